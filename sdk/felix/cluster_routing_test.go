package felix

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

func TestClientClusterCallsNeedTheirFeature(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	ctx := context.Background()
	if _, err := c.Topology(ctx); asBroker(t, err).Code != wire.CodeUnsupported || !wasNotSent(err) {
		t.Fatalf("topology on a broker without it: %v", err)
	}
	if _, err := c.StreamShards(ctx, "ns", "s"); asBroker(t, err).Code != wire.CodeUnsupported {
		t.Fatalf("stream_shards: %v", err)
	}
	if _, err := c.CacheShards(ctx, "ns", "c"); asBroker(t, err).Code != wire.CodeUnsupported {
		t.Fatalf("cache_shards: %v", err)
	}
	if _, err := c.ShardOwners(ctx, "ns", "s", KindStream); asBroker(t, err).Code != wire.CodeUnsupported {
		t.Fatalf("shard_owners: %v", err)
	}
	// The client offered every cluster bit it handles.
	fb.mu.Lock()
	offered := fb.authMsgs[0].Features
	fb.mu.Unlock()
	if offered&clusterFeatures != clusterFeatures {
		t.Fatalf("auth offered %#x, want the cluster bits %#x", offered, clusterFeatures)
	}
}

func TestClientClusterCallsAnswered(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{})
	cl.place(KindStream, "ns", "s", 0, 1, -1)
	cl.place(KindCache, "ns", "c", 2, 2)
	c := connect(t, cl.node(0))
	ctx := context.Background()
	brokers, err := c.Topology(ctx)
	if err != nil || len(brokers) != 3 || brokers[1].NodeID != "b1" || brokers[1].Addr != cl.node(1).Addr() {
		t.Fatalf("topology: %+v %v", brokers, err)
	}
	if n, err := c.StreamShards(ctx, "ns", "s"); n != 3 || err != nil {
		t.Fatalf("stream_shards: %d %v", n, err)
	}
	if n, err := c.CacheShards(ctx, "ns", "c"); n != 2 || err != nil {
		t.Fatalf("cache_shards: %d %v", n, err)
	}
	owners, err := c.ShardOwners(ctx, "ns", "s", KindStream)
	if err != nil || len(owners) != 3 || owners[1].NodeID != "b1" || owners[2].Unavailable != wire.OwnerNotAssigned {
		t.Fatalf("shard_owners: %+v %v", owners, err)
	}
	if !c.SupportsCluster() {
		t.Fatal("SupportsCluster false on a cluster broker")
	}
}

func TestClientSubscribeNotLeaderIsTyped(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{})
	cl.place(KindStream, "ns", "s", 1)
	c := connect(t, cl.node(0))
	_, err := c.Subscribe(context.Background(), "ns", "s")
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.NodeID != "b1" || nl.Addr != cl.node(1).Addr() {
		t.Fatalf("subscribe on a non-owner: %v", err)
	}
	if be := asBroker(t, err); be.Code != wire.CodeNotLeader || be.Retry != wire.RetryRedirect {
		t.Fatalf("as a broker error: %+v", be)
	}
}

// connectClusterTest connects to the seeds with short resume backoff.
func connectClusterTest(t *testing.T, cl *fakeCluster, seeds ...int) *ClusterClient {
	t.Helper()
	return connectClusterFast(t, cl.node(0).config(), cl.seeds(seeds...)...)
}

func TestClusterClientLearnsBrokersFromOneSeed(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{})
	cc := connectClusterTest(t, cl, 0)
	if got := cc.Brokers(); len(got) != 3 || got["b2"] != cl.node(2).Addr() {
		t.Fatalf("brokers %v", got)
	}
	// The only seed dies: the client carries on at a broker it learned.
	// It waits to see the connection go: a publish sent just before that
	// is rightly outcome_unknown.
	old := entryOf(cc)
	cl.node(0).Kill()
	<-old.conn.Context().Done()
	ctx := context.Background()
	if err := cc.Publish(ctx, "ns", "s", []byte("x"), AckPerMessage); err != nil {
		t.Fatalf("publish after the seed died: %v", err)
	}
	if a := cc.Addr(); a != cl.node(1).Addr() && a != cl.node(2).Addr() {
		t.Fatalf("entry %s, want a learned broker", a)
	}
}

func TestClusterClientRoutesKeyedPublishesToOwners(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{})
	cl.place(KindStream, "ns", "s", 0, 1, 2)
	cc := connectClusterTest(t, cl, 0)
	learnOwners(t, cc, KindStream, "ns", "s")
	ctx := context.Background()
	want := map[int]int{}
	for i := range 30 {
		key := fmt.Appendf(nil, "k%d", i)
		want[int(wire.ShardForKey(key, 3))]++
		if err := cc.PublishKeyed(ctx, "ns", "s", key, []byte("v"), AckPerMessage); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if got := len(cl.node(i).records("ns", "s")); got != want[i] {
			t.Fatalf("b%d got %d records, want %d", i, got, want[i])
		}
	}
	if _, counts, owners := cl.counts(); counts != 1 || owners != 1 {
		t.Fatalf("asked shard counts %d and owners %d times, want once", counts, owners)
	}
}

// Mixed roles on every broker (entry, publish owner, subscription owner,
// cache owner) use one connection each.
func TestOneConnectionPerBrokerUnderLightMixedRoleUse(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{})
	cl.place(KindStream, "ns", "s", 0, 1, 2)
	cl.place(KindCache, "ns", "c", 2, 1, 0)
	cc := connectClusterTest(t, cl, 0)
	learnOwners(t, cc, KindStream, "ns", "s")
	learnOwners(t, cc, KindCache, "ns", "c")
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 12 {
		wg.Go(func() {
			key := fmt.Sprintf("k%d", i)
			if err := cc.PublishKeyed(ctx, "ns", "s", []byte(key), []byte("v"), AckPerMessage); err != nil {
				errs <- err
			}
			if err := cc.CachePut(ctx, "ns", "c", key, []byte("v"), 0); err != nil {
				errs <- err
			}
			if _, _, err := cc.CacheGet(ctx, "ns", "c", key); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for shard := range uint32(3) {
		sub, err := cc.SubscribeFrom(ctx, "ns", "s", SubscribeOptions{Shard: shard})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		cl.node(int(shard)).nextSubscription()
	}
	per := cc.ConnectionsPerNode()
	for i := range 3 {
		if c := cl.node(i).connCount(); c != 1 {
			t.Fatalf("b%d holds %d connections, want 1", i, c)
		}
		if per[fmt.Sprintf("b%d", i)] != 1 {
			t.Fatalf("ConnectionsPerNode %v", per)
		}
	}
}

func TestConcurrentFirstUsesShareOneDialAndOneAsk(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{})
	cl.place(KindStream, "ns", "s", 1)
	cc := connectClusterTest(t, cl, 0)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := cc.Publish(ctx, "ns", "s", []byte("v"), AckPerMessage); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if c := cl.node(1).connCount(); c > 1 {
		t.Fatalf("owner holds %d connections, want 1", c)
	}
	if _, _, owners := cl.counts(); owners != 1 {
		t.Fatalf("owners asked %d times, want 1", owners)
	}
	// On a loaded machine a publish may give up waiting for the owners
	// (ownerWait) and go through the entry broker; none is lost.
	if got := len(cl.node(1).records("ns", "s")) + len(cl.node(0).records("ns", "s")); got != 20 {
		t.Fatalf("brokers got %d records", got)
	}
}

func TestClusterPublishRefusedByAStaleOwnerGoesToTheNewOne(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{})
	cl.place(KindStream, "ns", "strict", 1)
	cc := connectClusterTest(t, cl, 0)
	learnOwners(t, cc, KindStream, "ns", "strict")
	ctx := context.Background()
	if err := cc.Publish(ctx, "ns", "strict", []byte("a"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	cl.place(KindStream, "ns", "strict", 2) // moved; the client still thinks b1
	if err := cc.Publish(ctx, "ns", "strict", []byte("b"), AckPerMessage); err != nil {
		t.Fatalf("publish after the shard moved: %v", err)
	}
	if got := cl.node(2).records("ns", "strict"); len(got) != 1 || string(got[0].payload) != "b" {
		t.Fatalf("new owner got %+v", got)
	}
}

func TestClusterSubscribeFollowsNotLeader(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{})
	cl.place(KindStream, "ns", "s", 1)
	cc := connectClusterTest(t, cl, 0)
	learnOwners(t, cc, KindStream, "ns", "s")
	ctx := context.Background()
	// Learn b1 as the owner, then move the shard behind the client's back.
	if err := cc.Publish(ctx, "ns", "s", []byte("a"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	cl.place(KindStream, "ns", "s", 2)
	sub, err := cc.Subscribe(ctx, "ns", "s")
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer sub.Close()
	fs := cl.node(2).nextSubscription()
	fs.send(t, 0, []byte("m0"))
	if ev := next(t, sub); string(ev.Payload) != "m0" {
		t.Fatalf("got %+v", ev)
	}
}

// An owner the client failed to dial a moment ago (it was restarting)
// is dialled again when another broker's not_leader names it, rather
// than the open bouncing between the entry's redirects until they run
// out.
func TestClusterSubscribeRedialsAnOwnerThatCameBack(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{})
	cl.place(KindStream, "ns", "s", 2)
	cc := connectClusterTest(t, cl, 0)
	owner := cl.node(2).Addr()
	failed := &brokerConn{done: make(chan struct{}), err: notSent(ErrConnectionLost), at: time.Now()}
	close(failed.done)
	cc.mu.Lock()
	cc.conns[owner] = failed
	cc.mu.Unlock()
	if _, err := cc.clientAt(context.Background(), owner); err == nil {
		t.Fatal("the remembered failed dial was not returned")
	}
	sub, err := cc.Subscribe(context.Background(), "ns", "s")
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer sub.Close()
	fs := cl.node(2).nextSubscription()
	fs.send(t, 0, []byte("m0"))
	if ev := next(t, sub); string(ev.Payload) != "m0" {
		t.Fatalf("got %+v", ev)
	}
}

func TestClusterSubscriptionResumesOnTheNewOwnerAfterShardMoved(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{subscribed: durableAnswer(0, 100)})
	cl.place(KindStream, "ns", "s", 0, 1)
	cc := connectClusterTest(t, cl, 0)
	sub := clusterSubscribe(t, cc, &SubscribeOptions{Start: AtOffset(0), Shard: 1})
	fs := cl.node(1).nextSubscription()
	sendRange(t, fs, 0, 3)
	expectOffsets(t, sub, 0, 1, 2)
	cl.place(KindStream, "ns", "s", 0, 2)
	resume := uint64(2) // below what was delivered: max(3, 2) = 3
	fs.moved(t, cl, 2, &resume)
	got := make(chan Event, 1)
	go func() { // Next resumes
		ev, _ := sub.Next(context.Background())
		got <- ev
	}()
	fs2 := cl.node(2).nextSubscription()
	if got := startOf(t, fs2); got != 3 {
		t.Fatalf("resubscribed at %d, want 3", got)
	}
	sendRange(t, fs2, 3, 5)
	if ev := <-got; ev.Offset != 3 || ev.Shard != 1 {
		t.Fatalf("first event after the move: %+v", ev)
	}
	expectOffsets(t, sub, 4)
	if sub.Resumes() != 1 {
		t.Fatalf("resumes %d", sub.Resumes())
	}

	// A resume_from past what was delivered wins.
	later := uint64(9)
	cl.place(KindStream, "ns", "s", 0, 1)
	fs2.moved(t, cl, 1, &later)
	go func() {
		ev, _ := sub.Next(context.Background())
		got <- ev
	}()
	fs3 := cl.node(1).nextSubscription()
	if got := startOf(t, fs3); got != 9 {
		t.Fatalf("resubscribed at %d, want 9", got)
	}
	sendRange(t, fs3, 9, 10)
	<-got
}

func TestInMemorySubscriptionEndsWhenItsShardMoves(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{})
	cl.place(KindStream, "ns", "s", 0)
	cc := connectClusterTest(t, cl, 0)
	sub := clusterSubscribe(t, cc, nil)
	fs := cl.node(0).nextSubscription()
	fs.moved(t, cl, 1, nil)
	err := nextErr(t, sub)
	var moved *ShardMovedError
	if !errors.Is(err, ErrSubscriptionLost) || !errors.As(err, &moved) || moved.NodeID != "b1" {
		t.Fatalf("got %v", err)
	}
}

// A connection that dies fails only the streams on it; the next call for
// that broker dials it again.
func TestADeadConnectionIsReplacedAndOnlyItsStreamsFail(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{})
	cl.place(KindStream, "ns", "s", 1, 2)
	cc := connectClusterTest(t, cl, 0)
	learnOwners(t, cc, KindStream, "ns", "s")
	ctx := context.Background()
	sub1, err := cc.SubscribeFrom(ctx, "ns", "s", SubscribeOptions{Shard: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer sub1.Close()
	sub2, err := cc.SubscribeFrom(ctx, "ns", "s", SubscribeOptions{Shard: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub2.Close()
	cl.node(1).nextSubscription()
	fs2 := cl.node(2).nextSubscription()

	cl.node(1).dropConns()
	if err := nextErr(t, sub1); !errors.Is(err, ErrSubscriptionLost) {
		t.Fatalf("subscription on the dead connection: %v", err)
	}
	fs2.send(t, 0, []byte("still"))
	if ev := next(t, sub2); string(ev.Payload) != "still" {
		t.Fatalf("other subscription got %+v", ev)
	}
	// The next publish to b1's shard dials b1 again.
	if err := cc.Publish(ctx, "ns", "s", []byte("x"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	cl.node(1).waitRecords("ns", "s", 1)
	if per := cc.ConnectionsPerNode(); per["b1"] != 1 || per["b2"] != 1 {
		t.Fatalf("ConnectionsPerNode %v", per)
	}
}

func TestAReconnectForAClientAlreadyReplacedDoesNothing(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{})
	cc := connectClusterTest(t, cl, 0)
	ctx := context.Background()
	c1, err := cc.connTo(ctx, cl.node(1).Addr())
	if err != nil {
		t.Fatal(err)
	}
	cc.invalidate(c1)
	c2, err := cc.connTo(ctx, cl.node(1).Addr())
	if err != nil || c2 == c1 {
		t.Fatalf("replacement %p (old %p) %v", c2, c1, err)
	}
	before := reconnects.Get()
	cc.invalidate(c1) // a late report about the old connection
	if c2.dead() || reconnects.Get() != before {
		t.Fatal("a report about a replaced connection dropped its successor")
	}
	if c3, _ := cc.connTo(ctx, cl.node(1).Addr()); c3 != c2 {
		t.Fatal("the successor was replaced")
	}
}

func TestConcurrentResolutionsShareOneLookup(t *testing.T) {
	r := newResolver()
	release := make(chan struct{})
	var mu sync.Mutex
	calls := 0
	r.lookup = func(ctx context.Context, host string) ([]string, error) {
		mu.Lock()
		calls++
		mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return []string{"10.0.0.7"}, nil
	}
	defer r.wait()
	// A caller that gives up does not cancel the lookup for the others.
	cancelled, cancel := context.WithCancel(context.Background())
	done := make(chan []resolved)
	go func() { done <- r.resolveAgain(cancelled, []string{"broker.test:7000"}) }()
	var wg sync.WaitGroup
	results := make([][]resolved, 8)
	for i := range results {
		wg.Go(func() { results[i] = r.resolveAgain(context.Background(), []string{"broker.test:7000", "127.0.0.1:1"}) })
	}
	cancel()
	if got := <-done; got != nil {
		t.Fatalf("cancelled caller got %v", got)
	}
	close(release)
	wg.Wait()
	for _, res := range results {
		if len(res) != 1 || res[0].addr != "10.0.0.7:7000" || res[0].host != "broker.test" {
			t.Fatalf("resolved %+v", res)
		}
	}
	// Within resolveEvery the answer is reused.
	r.resolveAgain(context.Background(), []string{"broker.test:7000"})
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Fatalf("%d lookups, want 1", calls)
	}
}

func TestClusterClientOnAPlainBrokerRoutesEverythingThroughIt(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	cc := connectClusterFast(t, fb.config(), fb.Addr())
	ctx := context.Background()
	if err := cc.PublishKeyed(ctx, "ns", "s", []byte("k"), []byte("v"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	if err := cc.CachePut(ctx, "ns", "c", "k", []byte("v"), time.Second); err != nil {
		t.Fatal(err)
	}
	if fb.connCount() != 1 || len(cc.Brokers()) != 0 {
		t.Fatalf("connections %d, brokers %v", fb.connCount(), cc.Brokers())
	}
}

// waitWatch returns the next watch fb accepted.
func watchOn(t *testing.T, fb *fakeBroker) *fakeWatch { t.Helper(); return fb.nextWatch() }

func TestClusterKeyWatchGoesToTheKeysOwner(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{watches: make(chan *fakeWatch, 1), features: wire.FeatureCacheWatch})
	cl.place(KindCache, "ns", "c", 0, 1, 2)
	cc := connectClusterTest(t, cl, 0)
	learnOwners(t, cc, KindCache, "ns", "c")
	key := "user-7"
	owner := int(wire.ShardForKey([]byte(key), 3))
	w, err := cc.WatchCache(context.Background(), "ns", "c", WatchKey(key))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	fw := watchOn(t, cl.node(owner))
	fw.send(t, put(100, key, "v"))
	if it, err := w.Next(context.Background()); err != nil || it.Key != key {
		t.Fatalf("%+v %v", it, err)
	}
	// The shard moves: the watch carries on at the new owner, after what
	// it delivered.
	other := (owner + 1) % 3
	owners := []int{0, 1, 2}
	owners[owner] = other
	cl.place(KindCache, "ns", "c", owners...)
	m := &wire.ShardMoved{SubscriptionID: fw.id, Shard: uint32(owner)}
	nl := cl.notLeader(other)
	m.NodeID, m.Addr, m.Generation = nl.NodeID, nl.Addr, nl.Generation
	fw.send(t, m)
	got := make(chan error, 1)
	go func() {
		_, err := w.Next(context.Background())
		got <- err
	}()
	fw2 := watchOn(t, cl.node(other))
	if fw2.msg.FromOffset == nil || *fw2.msg.FromOffset != 101 {
		t.Fatalf("watched again from %v, want 101", fw2.msg.FromOffset)
	}
	fw2.send(t, put(101, key, "w"))
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func TestClusterPrefixWatchOfAMultiShardCacheWatchesEachShard(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{watches: make(chan *fakeWatch, 1), features: wire.FeatureCacheWatch})
	cl.place(KindCache, "ns", "c", 0, 1, 2)
	cc := connectClusterTest(t, cl, 0)
	w, err := cc.WatchCache(context.Background(), "ns", "c", WatchPrefix("user-"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Shards() != 3 {
		t.Fatalf("%d shards", w.Shards())
	}
	fws := make([]*fakeWatch, 3)
	for i := range 3 {
		fws[i] = watchOn(t, cl.node(i))
		if fws[i].msg.Shard == nil || *fws[i].msg.Shard != uint32(i) {
			t.Fatalf("b%d watch names shard %v", i, fws[i].msg.Shard)
		}
		fws[i].send(t, put(100+uint64(i), fmt.Sprintf("user-%d", i), "v"))
	}
	seen := map[uint32]string{}
	for range 3 {
		it, err := w.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		seen[it.Shard] = it.Key
	}
	if len(seen) != 3 || seen[2] != "user-2" {
		t.Fatalf("items by shard %v", seen)
	}
	if r := w.ResumeOffsets(); r[0] != 101 || r[1] != 102 || r[2] != 103 {
		t.Fatalf("resume offsets %v", r)
	}
	// A shard refused for good is reported; the others carry on.
	fws[1].send(t, wire.NewError(wire.CodeForbidden, "no").ErrorMessage(true))
	_, err = w.Next(context.Background())
	var n *ShardNotice
	if !errors.As(err, &n) || !n.Ended || n.Shard != 1 {
		t.Fatalf("want an ended notice for shard 1, got %v", err)
	}
	fws[2].send(t, put(103, "user-9", "v"))
	if it, err := w.Next(context.Background()); err != nil || it.Shard != 2 {
		t.Fatalf("%+v %v", it, err)
	}
}

// Every broker moved to an address the client never held: the name in its
// seeds is resolved again and the new address dialed.
func TestANameIsResolvedAgainWhenEveryBrokerHasMoved(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	_, port, _ := net.SplitHostPort(fb.Addr())
	var mu sync.Mutex
	lookups := 0
	old := lookupHost
	lookupHost = func(_ context.Context, host string) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		lookups++
		if host != "broker.invalid" {
			return nil, errors.New("no such host")
		}
		return []string{"127.0.0.1"}, nil
	}
	t.Cleanup(func() { lookupHost = old })
	cfg := fb.config() // ServerName localhost: the fake's certificate
	cfg.DialTimeout = 2 * time.Second
	// The system cannot resolve the seed's name; only the client's own
	// lookup (the stub) finds the broker.
	cc, err := ConnectCluster(context.Background(), []string{net.JoinHostPort("broker.invalid", port)}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if a := cc.Addr(); a != "127.0.0.1:"+port {
		t.Fatalf("entry %s", a)
	}
	if err := cc.Publish(context.Background(), "ns", "s", []byte("x"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if lookups != 1 {
		t.Fatalf("%d lookups", lookups)
	}
}

func TestClusterCacheOpsGoToTheKeysOwnerAndUnplacedShardsToTheEntry(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{})
	cl.place(KindCache, "ns", "c", 1, 2)
	cl.place(KindStream, "ns", "s", -1) // not assigned: the entry broker forwards
	cc := connectClusterTest(t, cl, 0)
	learnOwners(t, cc, KindCache, "ns", "c")
	ctx := context.Background()
	for i := range 10 {
		key := fmt.Sprintf("k%d", i)
		if err := cc.CachePut(ctx, "ns", "c", key, []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
		owner := cl.node(1 + int(wire.ShardForKey([]byte(key), 2)))
		owner.mu.Lock()
		_, ok := owner.cache["c/"+key]
		owner.mu.Unlock()
		if !ok {
			t.Fatalf("%s did not reach its owner", key)
		}
		if v, found, err := cc.CacheGet(ctx, "ns", "c", key); err != nil || !found || string(v) != "v" {
			t.Fatalf("get %s: %q %v %v", key, v, found, err)
		}
	}
	if err := cc.Publish(ctx, "ns", "s", []byte("x"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	if got := cl.node(0).records("ns", "s"); len(got) != 1 {
		t.Fatalf("entry got %d records for an unplaced shard", len(got))
	}
}

// An acknowledged publish whose owner's connection dies before the answer
// may have been applied: it is reported outcome_unknown, never re-sent.
func TestClusterPublishLostAtItsOwnerIsNotResent(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{hold: make(chan struct{})})
	cl.place(KindStream, "ns", "hold", 1)
	cc := connectClusterTest(t, cl, 0)
	learnOwners(t, cc, KindStream, "ns", "hold")
	errC := make(chan error, 1)
	go func() { errC <- cc.Publish(context.Background(), "ns", "hold", []byte("x"), AckPerMessage) }()
	cl.node(1).waitRecords("ns", "hold", 1)
	cl.node(1).dropConns()
	err := <-errC
	if be := asBroker(t, err); be.Retry != wire.RetryOutcomeUnknown {
		t.Fatalf("got %v", err)
	}
	if got := cl.node(0).records("ns", "hold"); len(got) != 0 {
		t.Fatalf("re-sent through the entry: %d records", len(got))
	}
	if got := cl.node(1).records("ns", "hold"); len(got) != 1 {
		t.Fatalf("owner got %d records", len(got))
	}
}

// A broker that does not own every shard refuses a prefix watch naming
// none (watch_needs_shard, with the count): the client watches each shard.
func TestClusterPrefixWatchRefusedForWantOfAShardWatchesEachShard(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{watches: make(chan *fakeWatch, 1), features: wire.FeatureCacheWatch})
	cl.mu.Lock()
	cl.noCacheShards = true
	cl.mu.Unlock()
	cl.place(KindCache, "ns", "c", 0, 1)
	cc := connectClusterTest(t, cl, 0)
	w, err := cc.WatchCache(context.Background(), "ns", "c", WatchPrefix(""))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Shards() != 2 {
		t.Fatalf("%d shards", w.Shards())
	}
	for i := range 2 {
		if fw := watchOn(t, cl.node(i)); fw.msg.Shard == nil || *fw.msg.Shard != uint32(i) {
			t.Fatalf("b%d watch names shard %v", i, fw.msg.Shard)
		}
	}
}

// When a connection dies the client asks for the topology again, and so
// learns of a broker that joined since.
func TestTopologyIsAskedAgainAfterAConnectionDies(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{})
	cc := connectClusterTest(t, cl, 0)
	if got := cc.Brokers(); len(got) != 2 {
		t.Fatalf("brokers %v", got)
	}
	joined := newFakeBroker(t, fakeOpts{flags: binaryFlags, features: clusterFeatures, cluster: cl})
	cl.mu.Lock()
	cl.nodes = append(cl.nodes, joined)
	cl.ids = append(cl.ids, "b2")
	cl.mu.Unlock()
	cl.node(0).dropConns()
	deadline := time.Now().Add(10 * time.Second)
	for cc.Brokers()["b2"] != joined.Addr() {
		if time.Now().After(deadline) {
			t.Fatalf("brokers %v: the new broker was not learned", cc.Brokers())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An identity's subscribe answered not_leader follows the redirect over
// the gateway's connection to the owner: a handle, no connection of its
// own.
func TestIdentitySubscribeFollowsNotLeaderOnTheGatewaysConnection(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{tokens: map[string]bool{"alice": true}})
	cl.place(KindStream, "ns", "s", 1)
	gw := connectClusterTest(t, cl, 0)
	alice, err := gw.WithIdentityToken("acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	sub, err := alice.Subscribe(context.Background(), "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if fs := cl.node(1).nextSubscription(); fs.token != "alice" {
		t.Fatalf("subscribed on the owner as %q", fs.token)
	}
	if c := cl.node(1).connCount(); c != 1 {
		t.Fatalf("owner holds %d connections, want the gateway's one", c)
	}
}

// A call whose context ended before any broker was tried says so, with
// the context's error, not an empty list of failures.
func TestNoBrokerTriedSaysWhy(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{})
	cc := connectClusterTest(t, cl, 0)
	// Every broker goes, so that no background topology refresh can
	// seat a new entry connection before the call below.
	old := entryOf(cc)
	cl.node(0).Kill()
	cl.node(1).Kill()
	<-old.conn.Context().Done()
	cc.invalidate(old)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := cc.client(ctx)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrConnectionLost) || strings.Contains(err.Error(), "%!") {
		t.Fatalf("client with a cancelled context: %v", err)
	}
}
