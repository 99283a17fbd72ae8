package felix

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// clusterFeatures are the cluster messages a fake cluster answers.
const clusterFeatures = wire.FeatureTopology | wire.FeatureRedirect | wire.FeatureStreamShards |
	wire.FeatureCacheShards | wire.FeatureShardOwners | wire.FeatureShardMoved

// fakeCluster plays a cluster of fake brokers b0, b1, … : each answers
// topology with all of them, stream_shards, cache_shards and shard_owners
// from the placement the test sets, refuses a subscribe or cache watch for
// a shard another broker owns with not_leader, and refuses an acked
// publish to a stream named "strict*" on a broker that does not own its
// shard with not_leader (a broker that forwards would accept it).
type fakeCluster struct {
	t testing.TB

	mu        sync.Mutex
	nodes     []*fakeBroker
	ids       []string
	shards    map[ownerKey][]int // owner index per shard; -1: unavailable
	gen       uint64
	topoAsks  int
	ownerAsks int // shard_owners requests
	countAsks int // stream_shards and cache_shards requests
	// noCacheShards answers cache_shards unsupported, so the client does
	// not learn a cache's shard count before it watches.
	noCacheShards bool
	// groups, when set, plays consumer groups per shard
	// (fakegroup_test.go).
	groups *fakeGroups
}

func newFakeCluster(t testing.TB, n int, opts fakeOpts) *fakeCluster {
	t.Helper()
	cl := &fakeCluster{t: t, shards: map[ownerKey][]int{}, gen: 1, groups: opts.groups}
	opts.cluster = cl
	opts.features |= clusterFeatures
	if opts.flags == 0 {
		opts.flags = binaryFlags
	}
	for i := range n {
		if opts.watches != nil {
			opts.watches = make(chan *fakeWatch, 64) // one per broker, to tell where a watch went
		}
		fb := newFakeBroker(t, opts)
		cl.mu.Lock()
		cl.nodes = append(cl.nodes, fb)
		cl.ids = append(cl.ids, fmt.Sprintf("b%d", i))
		cl.mu.Unlock()
	}
	return cl
}

func (cl *fakeCluster) node(i int) *fakeBroker { return cl.nodes[i] }

// seeds returns the address of each node given.
func (cl *fakeCluster) seeds(idx ...int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, cl.nodes[i].Addr())
	}
	return out
}

// place sets the owner of each shard of a stream or cache.
func (cl *fakeCluster) place(kind ShardKind, ns, name string, owners ...int) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.shards[ownerKey{kind: kind, namespace: ns, name: name}] = owners
	cl.gen++
}

// ownerOf returns the index of the owner of shard, or -1 when unplaced.
func (cl *fakeCluster) ownerOf(kind ShardKind, ns, name string, shard uint32) int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	owners := cl.shards[ownerKey{kind: kind, namespace: ns, name: name}]
	if int(shard) >= len(owners) {
		return -1
	}
	return owners[shard]
}

func (cl *fakeCluster) indexOf(fb *fakeBroker) int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for i, n := range cl.nodes {
		if n == fb {
			return i
		}
	}
	return -1
}

// notLeader is the redirect to node i.
func (cl *fakeCluster) notLeader(i int) *wire.NotLeader {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return &wire.NotLeader{NodeID: cl.ids[i], Addr: cl.nodes[i].Addr(), Generation: cl.gen}
}

func (cl *fakeCluster) counts() (topo, shardCounts, owners int) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.topoAsks, cl.countAsks, cl.ownerAsks
}

// answer answers a cluster message; ok is false for any other message.
func (cl *fakeCluster) answer(msg wire.Message) (wire.Message, bool) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	switch m := msg.(type) {
	case *wire.Topology:
		cl.topoAsks++
		v := &wire.TopologyView{RequestID: m.RequestID}
		for i, n := range cl.nodes {
			v.Brokers = append(v.Brokers, wire.TopologyBroker{NodeID: cl.ids[i], Addr: n.Addr()})
		}
		return v, true
	case *wire.StreamShards:
		cl.countAsks++
		return &wire.StreamShardsView{RequestID: m.RequestID, Routing: wire.RoutingJumpHash,
			Shards: uint32(len(cl.shards[ownerKey{kind: KindStream, namespace: m.Namespace, name: m.Stream}]))}, true
	case *wire.CacheShards:
		cl.countAsks++
		if cl.noCacheShards {
			return &wire.Unsupported{RequestType: msg.MessageType(), RequestID: &m.RequestID}, true
		}
		return &wire.CacheShardsView{RequestID: m.RequestID,
			Shards: uint32(len(cl.shards[ownerKey{kind: KindCache, namespace: m.Namespace, name: m.Cache}]))}, true
	case *wire.ShardOwners:
		cl.ownerAsks++
		v := &wire.ShardOwnersView{RequestID: m.RequestID}
		for s, o := range cl.shards[ownerKey{kind: m.Kind, namespace: m.Namespace, name: m.Name}] {
			so := wire.ShardOwner{Shard: uint32(s), Generation: cl.gen}
			if o < 0 {
				so.Unavailable = wire.OwnerNotAssigned
			} else {
				so.NodeID, so.Addr = cl.ids[o], cl.nodes[o].Addr()
			}
			v.Owners = append(v.Owners, so)
		}
		return v, true
	}
	return nil, false
}

// redirect returns the not_leader fb answers a request for shard with,
// or nil when fb owns it or nobody does.
func (cl *fakeCluster) redirect(fb *fakeBroker, kind ShardKind, ns, name string, shard uint32) *wire.NotLeader {
	owner := cl.ownerOf(kind, ns, name, shard)
	if owner < 0 || owner == cl.indexOf(fb) {
		return nil
	}
	return cl.notLeader(owner)
}

// dropConns closes every connection of fb with an error but keeps it
// listening: the broker lives, its connections die.
func (fb *fakeBroker) dropConns() { fb.closeConns("dropped") }

// connCount returns how many connections fb accepted and still holds.
func (fb *fakeBroker) connCount() int {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return len(fb.conns)
}

// moved ends the subscription with shard_moved naming node i of cl (or
// nobody when i < 0) and resume_from (when not nil).
func (s *fakeSub) moved(t testing.TB, cl *fakeCluster, i int, resumeFrom *uint64) {
	t.Helper()
	m := &wire.ShardMoved{SubscriptionID: s.id, ResumeFrom: resumeFrom}
	if s.msg.Shard != nil {
		m.Shard = *s.msg.Shard
	}
	if i >= 0 {
		nl := cl.notLeader(i)
		m.NodeID, m.Addr, m.Generation = nl.NodeID, nl.Addr, nl.Generation
	}
	if err := writeMsg(s.es, m); err != nil {
		t.Fatalf("fake shard_moved: %v", err)
	}
	_ = s.es.Close()
}

// clusterHandle answers what the fake cluster decides for msg on fb:
// handled is false when the ordinary fake handles it.
func (fb *fakeBroker) clusterHandle(s transport.Stream, msg wire.Message) (handled, keep bool) {
	cl := fb.opts.cluster
	if cl == nil {
		return false, true
	}
	if ans, ok := cl.answer(msg); ok {
		return true, fb.send(s, ans) == nil
	}
	if cl.groups != nil {
		if handled, keep := fb.clusterGroupOp(cl, s, msg); handled {
			return true, keep
		}
	}
	switch m := msg.(type) {
	case *wire.Subscribe:
		var shard uint32
		if m.Shard != nil {
			shard = *m.Shard
		}
		if nl := cl.redirect(fb, KindStream, m.Namespace, m.Stream, shard); nl != nil {
			_ = writeMsg(s, nl)
			_ = s.Close()
			return true, false
		}
	case *wire.CacheWatch:
		var shard uint32
		switch n := cl.shardCount(KindCache, m.Namespace, m.Cache); {
		case !m.Prefix && n > 0:
			shard = wire.ShardForKey([]byte(m.Key), n)
		case m.Shard != nil:
			shard = *m.Shard
		case n > 1:
			for i := range n {
				if cl.redirect(fb, KindCache, m.Namespace, m.Cache, i) != nil {
					e := wire.NewError(wire.CodeInvalidRequest, "watch each shard").
						WithDetail(wire.DetailReason, reasonWatchNeedsShard).WithDetail(wire.DetailShards, n).ErrorMessage(true)
					id := m.RequestID
					e.RequestID = &id
					_ = writeMsg(s, e)
					return true, true
				}
			}
		}
		if nl := cl.redirect(fb, KindCache, m.Namespace, m.Cache, shard); nl != nil {
			id := m.RequestID
			nl.RequestID = &id
			_ = writeMsg(s, nl)
			return true, true
		}
	case *wire.PublishIdempotent: // never forwarded either (fakeidem_test.go)
		var shard uint32
		if shards := cl.shardCount(KindStream, m.Namespace, m.Stream); len(m.Key) > 0 && shards > 0 {
			shard = wire.ShardForKey(m.Key, shards)
		}
		if m.Shard != nil {
			shard = *m.Shard
		}
		if nl := cl.redirect(fb, KindStream, m.Namespace, m.Stream, shard); nl != nil {
			id := m.RequestID
			nl.RequestID = &id
			return true, writeMsg(s, nl) == nil
		}
	case *wire.Commit: // never forwarded either (commit_test.go)
		shard := cl.streamShard(m.Namespace, m.Stream, m.EntityKey, m.Shard)
		if nl := cl.redirect(fb, KindStream, m.Namespace, m.Stream, shard); nl != nil {
			fb.mu.Lock()
			fb.commitOps++
			fb.mu.Unlock()
			id := m.RequestID
			nl.RequestID = &id
			return true, writeMsg(s, nl) == nil
		}
	case *wire.StateGet:
		shard := cl.streamShard(m.Namespace, m.Stream, m.EntityKey, m.Shard)
		if nl := cl.redirect(fb, KindStream, m.Namespace, m.Stream, shard); nl != nil {
			id := m.RequestID
			nl.RequestID = &id
			return true, writeMsg(s, nl) == nil
		}
	case *wire.PublishIf: // never forwarded: a non-owner answers not_leader
		var shard uint32
		if shards := cl.shardCount(KindStream, m.Namespace, m.Stream); len(m.Key) > 0 && shards > 0 {
			shard = wire.ShardForKey(m.Key, shards)
		}
		if m.Shard != nil {
			shard = *m.Shard
		}
		if nl := cl.redirect(fb, KindStream, m.Namespace, m.Stream, shard); nl != nil {
			fb.mu.Lock()
			fb.pubIfOps++
			fb.mu.Unlock()
			id := m.RequestID
			nl.RequestID = &id
			return true, writeMsg(s, nl) == nil
		}
	case *wire.Publish:
		if len(m.Stream) >= 6 && m.Stream[:6] == "strict" && m.Ack != wire.AckNone {
			var shard uint32
			if shards := cl.shardCount(KindStream, m.Namespace, m.Stream); len(m.Key) > 0 && shards > 0 {
				shard = wire.ShardForKey(m.Key, shards)
			}
			if nl := cl.redirect(fb, KindStream, m.Namespace, m.Stream, shard); nl != nil {
				e := nl.Err()
				return true, writeMsg(s, e.PublishErrorMessage(m.RequestID, true)) == nil
			}
		}
	}
	return false, true
}

// streamShard is the shard a keyed or shard-naming request is for.
func (cl *fakeCluster) streamShard(ns, stream string, key []byte, named *uint32) uint32 {
	if named != nil {
		return *named
	}
	if shards := cl.shardCount(KindStream, ns, stream); len(key) > 0 && shards > 0 {
		return wire.ShardForKey(key, shards)
	}
	return 0
}

func (cl *fakeCluster) shardCount(kind ShardKind, ns, name string) uint32 {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return uint32(len(cl.shards[ownerKey{kind: kind, namespace: ns, name: name}]))
}

// learnOwners has cc learn the owners of a stream or cache before the
// test's first call, so that call cannot go through the entry broker for
// want of an answer within ownerWait on a loaded machine.
func learnOwners(t testing.TB, cc *ClusterClient, kind ShardKind, ns, name string) {
	t.Helper()
	k := ownerKey{kind: kind, namespace: ns, name: name}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for cc.owners.lookup(ctx, k).shards == 0 {
		if ctx.Err() != nil {
			t.Fatalf("owners of %s/%s not learned", ns, name)
		}
		time.Sleep(time.Millisecond)
	}
}
