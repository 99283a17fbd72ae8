package broker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/wire"
)

// fakeViews is a ClusterViewSource tests never let the broker poll:
// they hand it views with applyView.
type fakeViews struct{}

func (fakeViews) ClusterView(context.Context, string) (wire.ClusterView, bool, error) {
	return wire.ClusterView{}, false, nil
}

const (
	selfNode  = "n1"
	otherNode = "n2"
	otherAddr = "10.0.0.2:5000"
	selfAddr  = "10.0.0.1:5000"
)

// startClusterEnv starts broker n1 in a cluster (a view source the test
// drives), with the catalog of startEnv, the given streams and caches.
func startClusterEnv(t *testing.T, cfg Config, caches []wire.CacheSpec, streams ...wire.StreamSpec) *env {
	t.Helper()
	cfg.Node.ID = selfNode
	signer, jwks := testSigner(t)
	src := &fakeSource{
		tenants:    []wire.Tenant{{TenantID: testTenant}},
		namespaces: []wire.Namespace{{TenantID: testTenant, Namespace: "prod"}},
		caches:     append([]wire.CacheSpec{{TenantID: testTenant, Namespace: "prod", Cache: "sessions"}}, caches...),
		jwks:       jwks,
	}
	for _, s := range streams {
		s.TenantID, s.Namespace = testTenant, "prod"
		src.streams = append(src.streams, s)
	}
	tlsCfg, roots := testTLS(t)
	deps := Deps{Catalog: src, TLS: tlsCfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Cluster: fakeViews{}}
	return startServer(t, cfg, deps, signer, roots, src)
}

// view builds a cluster view of brokers n1 and n2 and the given
// assignments, named by (kind, name, shard) -> (owner, generation).
type placed struct {
	kind, name string
	shard      uint32
	node       string
	gen        uint64
	durable    bool
}

func clusterView(tag string, ps ...placed) wire.ClusterView {
	v := wire.ClusterView{Tag: tag, Brokers: []wire.Broker{
		{BrokerRegistration: wire.BrokerRegistration{NodeID: selfNode, ClientAddrs: []string{selfAddr}}, State: wire.BrokerLive},
		{BrokerRegistration: wire.BrokerRegistration{NodeID: otherNode, ClientAddrs: []string{otherAddr}}, State: wire.BrokerLive},
	}}
	for _, p := range ps {
		a := wire.ShardAssignment{Kind: p.kind, TenantID: testTenant, Namespace: "prod", Name: p.name, Shard: p.shard, NodeID: p.node, Generation: p.gen}
		if p.durable {
			a.StorageID = "storage-" + p.node
		}
		v.Assignments = append(v.Assignments, a)
	}
	return v
}

const clusterFeatures = allFeatures | ClusterFeatures

func subscribeShard(stream string, shard uint32) *wire.Subscribe {
	return &wire.Subscribe{TenantID: testTenant, Namespace: "prod", Stream: stream, Shard: &shard}
}

// TestClusterSubscribeRoutes: a broker serves subscriptions only to the
// shards it owns; others are redirected (not_leader to a client that
// offered FEATURE_REDIRECT, an error to the rest); before any view every
// shard is not_ready; an out-of-range shard is refused as before.
func TestClusterSubscribeRoutes(t *testing.T) {
	e := startClusterEnv(t, testConfig(), nil, wire.StreamSpec{Stream: "orders", Shards: 2})
	qc := e.dial(0)
	redirected := e.authed(qc, 0, clusterFeatures, "stream.*:stream:acme")
	plain := e.authed(qc, 0, allFeatures, "stream.*:stream:acme")

	redirected.send(subscribeShard("orders", 0))
	if we := expectCode(t, redirected.recv(), wire.CodeShardUnavailable); we.Reason() != unavailableNotReady {
		t.Fatalf("before any view: %v", we)
	}
	e.srv.applyView(clusterView("v1",
		placed{kind: "stream", name: "orders", shard: 0, node: selfNode, gen: 1},
		placed{kind: "stream", name: "orders", shard: 1, node: otherNode, gen: 2}))

	redirected.send(subscribeShard("orders", 1))
	nl, ok := redirected.recv().(*wire.NotLeader)
	if !ok || nl.NodeID != otherNode || nl.Addr != otherAddr || nl.Generation != 2 {
		t.Fatalf("subscribe to another broker's shard with FEATURE_REDIRECT: %#v", nl)
	}
	plain.send(subscribeShard("orders", 1))
	we := expectCode(t, plain.recv(), wire.CodeNotLeader)
	if back, ok := wire.NotLeaderFromError(we); !ok || back.Addr != otherAddr || back.Generation != 2 {
		t.Fatalf("not_leader error detail: %v", we.Detail)
	}
	plain.send(subscribeShard("orders", 7))
	if we := expectCode(t, plain.recv(), wire.CodeInvalidRequest); we.Reason() != wire.ReasonShardOutOfRange {
		t.Fatalf("out-of-range shard: %v", we)
	}
	sub, _ := e.subscribeWith(qc, redirected, subscribeShard("orders", 0))
	pub := e.authed(qc, 0, allFeatures, pubAll)
	zero := uint32(0)
	pub.send(&wire.Publish{TenantID: testTenant, Namespace: "prod", Stream: "orders", Payload: []byte("hi"), Shard: &zero, RequestID: 1, Ack: wire.AckPerMessage})
	if _, ok := pub.recv().(*wire.PublishOK); !ok {
		t.Fatal("publish to an owned shard refused")
	}
	if got := sub.payloads(1); string(got[0]) != "hi" {
		t.Fatalf("owned shard delivered %q", got)
	}
	if n := e.metric(`felix_broker_shards_owned{kind="stream"}`); n != 1 {
		t.Fatalf("shards owned gauge %v, want 1", n)
	}
}

// TestClusterAnswers: topology, stream_shards, cache_shards and
// shard_owners in a cluster and standalone.
func TestClusterAnswers(t *testing.T) {
	e := startClusterEnv(t, testConfig(), []wire.CacheSpec{{TenantID: testTenant, Namespace: "prod", Cache: "wide", Shards: 4}},
		wire.StreamSpec{Stream: "orders", Shards: 2})
	e.srv.applyView(clusterView("v1",
		placed{kind: "stream", name: "orders", shard: 0, node: selfNode, gen: 1},
		placed{kind: "stream", name: "orders", shard: 1, node: otherNode, gen: 2}))
	s := e.authed(e.dial(0), 0, clusterFeatures, "stream.*:stream:acme")

	s.send(&wire.Topology{})
	if tv, ok := s.recv().(*wire.TopologyView); !ok || len(tv.Brokers) != 2 || tv.Brokers[1].Addr != otherAddr {
		t.Fatalf("topology: %#v", tv)
	}
	s.send(&wire.StreamShards{TenantID: testTenant, Namespace: "prod", Stream: "orders", RequestID: 1})
	if v, ok := s.recv().(*wire.StreamShardsView); !ok || v.Shards != 2 || v.Routing != wire.RoutingJumpHash || v.RequestID != 1 {
		t.Fatalf("stream_shards: %#v", v)
	}
	s.send(&wire.StreamShards{TenantID: testTenant, Namespace: "prod", Stream: "nope", RequestID: 2})
	if v, ok := s.recv().(*wire.StreamShardsView); !ok || v.Shards != 0 || v.Routing != "" {
		t.Fatalf("stream_shards of an unknown stream: %#v", v)
	}
	s.send(&wire.CacheShards{TenantID: testTenant, Namespace: "prod", Cache: "wide", RequestID: 3})
	if v, ok := s.recv().(*wire.CacheShardsView); !ok || v.Shards != 4 {
		t.Fatalf("cache_shards: %#v", v)
	}
	s.send(&wire.CacheShards{TenantID: testTenant, Namespace: "prod", Cache: "nope", RequestID: 4})
	if v, ok := s.recv().(*wire.CacheShardsView); !ok || v.Shards != 0 {
		t.Fatalf("cache_shards of an unknown cache: %#v", v)
	}
	s.send(&wire.ShardOwners{TenantID: testTenant, Namespace: "prod", Name: "orders", Kind: wire.ShardKindStream, RequestID: 5})
	ov, ok := s.recv().(*wire.ShardOwnersView)
	if !ok || ov.Validate() != nil || len(ov.Owners) != 2 || ov.Owners[0].NodeID != selfNode || ov.Owners[0].Addr != selfAddr ||
		ov.Owners[1].NodeID != otherNode || ov.Owners[1].Generation != 2 {
		t.Fatalf("shard_owners: %#v", ov)
	}
	s.send(&wire.ShardOwners{TenantID: testTenant, Namespace: "prod", Name: "wide", Kind: wire.ShardKindCache, RequestID: 6})
	if ov, ok := s.recv().(*wire.ShardOwnersView); !ok || len(ov.Owners) != 4 || ov.Owners[3].Unavailable != wire.OwnerNotAssigned {
		t.Fatalf("shard_owners of an unplaced cache: %#v", ov)
	}
	s.send(&wire.ShardOwners{TenantID: testTenant, Namespace: "prod", Name: "nope", Kind: wire.ShardKindStream, RequestID: 7})
	expectCode(t, s.recv(), wire.CodeNotFound)
	s.send(&wire.StreamShards{TenantID: "other", Namespace: "prod", Stream: "orders", RequestID: 8})
	expectCode(t, s.recv(), wire.CodeForbidden)

	alone := startEnv(t, testConfig(), wire.StreamSpec{Stream: "orders", Shards: 3})
	a := alone.authed(alone.dial(0), 0, clusterFeatures, "stream.*:stream:acme")
	a.send(&wire.Topology{})
	if tv, ok := a.recv().(*wire.TopologyView); !ok || len(tv.Brokers) != 0 {
		t.Fatalf("standalone topology: %#v", tv)
	}
	a.send(&wire.ShardOwners{TenantID: testTenant, Namespace: "prod", Name: "orders", Kind: wire.ShardKindStream, RequestID: 1})
	if ov, ok := a.recv().(*wire.ShardOwnersView); !ok || len(ov.Owners) != 1 || ov.Owners[0].NodeID != "" || ov.Owners[0].Unavailable != "" {
		t.Fatalf("standalone shard_owners: %#v", ov)
	}
	a.send(&wire.StreamShards{TenantID: testTenant, Namespace: "prod", Stream: "orders", RequestID: 2})
	if v, ok := a.recv().(*wire.StreamShardsView); !ok || v.Shards != 3 {
		t.Fatalf("standalone stream_shards: %#v", v)
	}
}

// TestClusterShardMovesAwayAndBack: a view moving a durable shard away
// ends its subscriptions with shard_moved (or not_leader without the
// feature) and closes its log, keeping the files; moving it back reopens
// it, continuing its offsets.
func TestClusterShardMovesAwayAndBack(t *testing.T) {
	cfg := testConfig()
	cfg.Durable.StorageDir = t.TempDir()
	e := startClusterEnv(t, cfg, nil, wire.StreamSpec{Stream: "log", Shards: 1, Durable: true})
	here := placed{kind: "stream", name: "log", shard: 0, node: selfNode, gen: 1, durable: true}
	e.srv.applyView(clusterView("v1", here))
	qc := e.dial(0)
	pub := e.authed(qc, durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, pub, "log", 0, 3)
	moving := e.authed(qc, 0, clusterFeatures, "stream.*:stream:acme")
	subMoved, _ := e.subscribeWith(qc, moving, subscribeShard("log", 0))
	plain := e.authed(qc, 0, allFeatures, "stream.*:stream:acme")
	subPlain, _ := e.subscribeWith(qc, plain, subscribeShard("log", 0))

	e.srv.applyView(clusterView("v2", placed{kind: "stream", name: "log", shard: 0, node: otherNode, gen: 2, durable: true}))
	sm, ok := subMoved.msg().(*wire.ShardMoved)
	if !ok || sm.SubscriptionID != subMoved.id || sm.NodeID != otherNode || sm.Addr != otherAddr || sm.Generation != 2 ||
		sm.ResumeFrom == nil || *sm.ResumeFrom != 3 {
		t.Fatalf("moved subscription ended with %#v", sm)
	}
	em, ok := subPlain.msg().(*wire.ErrorMsg)
	if !ok || em.Err().Code != wire.CodeNotLeader {
		t.Fatalf("moved subscription without FEATURE_SHARD_MOVED ended with %#v", em)
	}
	st, _ := e.srv.core.Stream(core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "log"})
	if _, err := st.Shard(0); err == nil {
		t.Fatal("the lost shard is still open")
	}
	if _, err := os.Stat(core.ShardDir(cfg.Durable.StorageDir, st.Key(), 0)); err != nil {
		t.Fatalf("the lost shard's files: %v", err)
	}
	moving.send(subscribeShard("log", 0))
	if nl, ok := moving.recv().(*wire.NotLeader); !ok || nl.NodeID != otherNode {
		t.Fatalf("subscribe after the move: %#v", nl)
	}
	reader := e.authed(qc, durableFlags, durableFeatures|ClusterFeatures, "stream.*:stream:acme")
	reader.send(&wire.StreamRead{TenantID: testTenant, Namespace: "prod", Stream: "log", Shard: 0, From: 0, RequestID: 9})
	if nl, ok := reader.recv().(*wire.NotLeader); !ok || nl.RequestID == nil || *nl.RequestID != 9 || nl.Generation != 2 {
		t.Fatalf("stream_read after the move: %#v", nl)
	}

	here.gen = 3
	e.srv.applyView(clusterView("v3", here))
	from := &wire.StartPosition{Kind: wire.StartOffset, Offset: 0}
	req := subscribeShard("log", 0)
	req.Start = from
	sub, _ := e.subscribeWith(qc, moving, req)
	if offs := publishAcked(t, pub, "log", 3, 1); offs[0] != 3 {
		t.Fatalf("first publish after moving back at %d, want 3", offs[0])
	}
	checkOrder(t, sub.payloads(4), 4)
	if sh, err := st.Shard(0); err != nil || sh.Generation() != 3 {
		t.Fatalf("reopened shard: %v", err)
	}
}

// TestPublishWidth: a keyed batch routed by a declared width the stream
// does not have is refused with stale_width; the right width, unkeyed and
// explicit-shard batches pass.
func TestPublishWidth(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "wide", Shards: 4})
	s := e.authed(e.dial(0), 0, clusterFeatures, pubAll)
	keyed := func(id uint64) *wire.Publish {
		return &wire.Publish{TenantID: testTenant, Namespace: "prod", Stream: "wide", Key: []byte("k"), Payload: []byte("x"), RequestID: id, Ack: wire.AckPerMessage}
	}
	s.send(keyed(1))
	if _, ok := s.recv().(*wire.PublishOK); !ok {
		t.Fatal("keyed publish without a width refused")
	}
	s.send(&wire.PublishWidth{TenantID: testTenant, Namespace: "prod", Stream: "wide", Width: 2})
	s.send(keyed(2))
	we := expectCode(t, s.recv(), wire.CodeStaleWidth)
	if we.Retry != wire.DefaultRetry(wire.CodeStaleWidth) || we.Detail[wire.DetailShards] == nil {
		t.Fatalf("stale_width refusal: %#v", we)
	}
	s.send(&wire.Publish{TenantID: testTenant, Namespace: "prod", Stream: "wide", Payload: []byte("x"), RequestID: 3, Ack: wire.AckPerMessage})
	if _, ok := s.recv().(*wire.PublishOK); !ok {
		t.Fatal("unkeyed publish refused under a stale width")
	}
	s.send(&wire.PublishWidth{TenantID: testTenant, Namespace: "prod", Stream: "wide", Width: 4})
	s.send(keyed(4))
	if _, ok := s.recv().(*wire.PublishOK); !ok {
		t.Fatal("keyed publish under the right width refused")
	}
}

// TestClusterCacheWatchRoutes: a prefix watch of a multi-shard cache must
// name a shard unless this broker owns them all; a watch of another
// broker's shard is redirected; losing a watched shard ends the watch
// with shard_moved.
func TestClusterCacheWatchRoutes(t *testing.T) {
	e := startClusterEnv(t, testConfig(), []wire.CacheSpec{{TenantID: testTenant, Namespace: "prod", Cache: "wide", Shards: 2}})
	mine := placed{kind: "cache", name: "wide", shard: 0, node: selfNode, gen: 1}
	theirs := placed{kind: "cache", name: "wide", shard: 1, node: otherNode, gen: 2}
	e.srv.applyView(clusterView("v1", mine, theirs))
	qc := e.dial(0)
	s := e.authed(qc, 0, clusterFeatures, cacheAll)
	watch := func(id uint64, shard *uint32) {
		s.send(&wire.CacheWatch{TenantID: testTenant, Namespace: "prod", Cache: "wide", Key: "", Prefix: true, Shard: shard, RequestID: id})
	}
	watch(1, nil)
	if we := expectCode(t, s.recv(), wire.CodeInvalidRequest); we.Reason() != ReasonWatchNeedsShard {
		t.Fatalf("prefix watch without a shard: %v", we)
	}
	one, zero := uint32(1), uint32(0)
	watch(2, &one)
	if nl, ok := s.recv().(*wire.NotLeader); !ok || nl.NodeID != otherNode || nl.RequestID == nil || *nl.RequestID != 2 {
		t.Fatalf("watch of another broker's shard: %#v", nl)
	}
	watch(3, &zero)
	ok, isOK := s.recv().(*wire.CacheWatchOK)
	if !isOK {
		t.Fatalf("watch of an owned shard refused: %#v", ok)
	}
	events := e.acceptEvents(qc, ok.WatchID)
	mine.node, mine.gen = otherNode, 3
	e.srv.applyView(clusterView("v2", mine, theirs))
	sm, isMoved := events.msg().(*wire.ShardMoved)
	if !isMoved || sm.SubscriptionID != ok.WatchID || sm.NodeID != otherNode || sm.Generation != 3 || sm.ResumeFrom != nil {
		t.Fatalf("watch of a lost shard ended with %#v", sm)
	}
}

// TestClusterStreamAfterView: a shard placed here before its stream
// reached the catalog opens when the catalog applies the stream; a
// replacement of the stream (another shard count) reopens the owned ones.
func TestClusterStreamAfterView(t *testing.T) {
	e := startClusterEnv(t, testConfig(), nil)
	e.srv.applyView(clusterView("v1", placed{kind: "stream", name: "late", shard: 1, node: selfNode, gen: 4}))
	spec := wire.StreamSpec{TenantID: testTenant, Namespace: "prod", Stream: "late", Shards: 2}
	if err := e.srv.state.ApplyStream(spec); err != nil { // as catalog sync applies it
		t.Fatal(err)
	}
	k := core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "late"}
	st, _ := e.srv.core.Stream(k)
	if sh, err := st.Shard(1); err != nil || sh.Generation() != 4 {
		t.Fatalf("owned shard of a stream applied after the view: %v", err)
	}
	if _, err := st.Shard(0); err == nil {
		t.Fatal("a shard placed elsewhere opened")
	}
	spec.Shards = 3
	if err := e.srv.state.ApplyStream(spec); err != nil {
		t.Fatal(err)
	}
	st, _ = e.srv.core.Stream(k)
	if _, err := st.Shard(1); err != nil || st.Shards() != 3 {
		t.Fatalf("owned shard of the replaced stream: %v", err)
	}
}

// A request that reaches a stream the catalog made visible before it
// opened the shards the view places here (the window between the core's
// apply and openOwned) opens them itself instead of answering "not open".
func TestServedShardOpensAnOwnedShardTheCatalogHasNotOpenedYet(t *testing.T) {
	e := startClusterEnv(t, testConfig(), nil)
	e.srv.applyView(clusterView("v1", placed{kind: "stream", name: "fresh", shard: 0, node: selfNode, gen: 2},
		placed{kind: "stream", name: "fresh", shard: 1, node: "broker-9", gen: 3}))
	spec := wire.StreamSpec{TenantID: testTenant, Namespace: "prod", Stream: "fresh", Shards: 2}
	if err := e.srv.core.ApplyStream(spec); err != nil { // the core's half of a catalog apply
		t.Fatal(err)
	}
	st, _ := e.srv.core.Stream(core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "fresh"})
	if _, err := st.Shard(0); err == nil {
		t.Fatal("the core opened a shard by itself")
	}
	sh, err := e.srv.servedShard(st, 0)
	if err != nil || sh.Generation() != 2 {
		t.Fatalf("servedShard of an owned shard: %v", err)
	}
	if _, err := e.srv.servedShard(st, 1); err == nil {
		t.Fatal("servedShard opened a shard placed on another broker")
	}
}
