package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/roles/broker/sched"
	"github.com/felixmq/felix/wire"
)

// viewSource is a cluster view source that answers the view a test
// applied (apply), so a broker polling it routes by that view too; before
// the first, it has nothing new.
type viewSource struct {
	mu sync.Mutex
	v  wire.ClusterView
}

func (f *viewSource) ClusterView(_ context.Context, known string) (wire.ClusterView, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.v.Tag == "" || known == f.v.Tag {
		return wire.ClusterView{}, false, nil
	}
	return f.v, true, nil
}

// apply makes v the view e's source answers and e routes by.
func apply(e *env, v wire.ClusterView) {
	f := e.srv.cluster.(*viewSource)
	f.mu.Lock()
	f.v = v
	f.mu.Unlock()
	e.srv.applyView(v)
}

// testCacheShards is the number of shards the tests place cache "sessions" on.
const testCacheShards = 2

// startCluster starts brokers a and b, each with a peer listener from
// one CA, durable storage, and a catalog with the same streams and token
// signer; both are in a cluster (Deps.Cluster), with no view yet.
func startCluster(t testing.TB, streams ...wire.StreamSpec) (a, b *env) {
	return startPair(t, func(cfg *Config) { cfg.Durable.StorageDir = t.TempDir() }, streams...)
}

// startPair is startCluster with each broker's config adjusted by tune.
func startPair(t testing.TB, tune func(*Config), streams ...wire.StreamSpec) (a, b *env) {
	envs := startBrokers(t, 2, tune, streams...)
	return envs[0], envs[1]
}

// startBrokers starts n brokers named broker-a, broker-b, ... as
// startPair does.
func startBrokers(t testing.TB, n int, tune func(*Config), streams ...wire.StreamSpec) []*env {
	t.Helper()
	return startBrokersWith(t, n, tune, nil, streams...)
}

// startBrokersWith is startBrokers with every broker fetching its view
// from cluster; nil gives each its own viewSource.
func startBrokersWith(t testing.TB, n int, tune func(*Config), cluster ClusterViewSource, streams ...wire.StreamSpec) []*env {
	t.Helper()
	dirs := sharedDevCA(t, n)
	signer, jwks := testSigner(t)
	start := func(id, dir string) *env {
		cfg := peerConfig(id, dir)
		tune(&cfg)
		src := &fakeSource{
			tenants:    []wire.Tenant{{TenantID: testTenant}},
			namespaces: []wire.Namespace{{TenantID: testTenant, Namespace: "prod"}},
			caches:     []wire.CacheSpec{{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Shards: testCacheShards}},
			jwks:       jwks,
		}
		for _, s := range streams {
			s.TenantID, s.Namespace = testTenant, "prod"
			s.Shards = max(s.Shards, 1)
			src.streams = append(src.streams, s)
		}
		tlsCfg, roots := testTLS(t)
		var w io.Writer = io.Discard
		if os.Getenv("FELIX_TEST_LOG") != "" {
			w = os.Stderr
		}
		var cs ClusterViewSource = &viewSource{}
		if cluster != nil {
			cs = cluster
		}
		deps := Deps{Catalog: src, TLS: tlsCfg, Logger: slog.New(slog.NewTextHandler(w, nil)).With("node", id), Cluster: cs}
		return startServer(t, cfg, deps, signer, roots, src)
	}
	envs := make([]*env, n)
	for i := range envs {
		envs[i] = start("broker-"+string(rune('a'+i)), dirs[i])
	}
	return envs
}

// owned assigns a shard to a node ("" with unavailable for nobody).
func owned(kind wire.ShardKind, name string, shard uint32, node string) wire.ShardAssignment {
	a := wire.ShardAssignment{Kind: string(kind), TenantID: testTenant, Namespace: "prod", Name: name, Shard: shard, NodeID: node, Generation: 1}
	if node == "" {
		a.Unavailable = wire.UnavailableOwnerDown
	}
	return a
}

// viewOf is a cluster view of brokers with the assignments.
func viewOf(tag string, brokers []*env, asg ...wire.ShardAssignment) wire.ClusterView {
	v := wire.ClusterView{Tag: tag, PlacementRevision: 1, Assignments: asg}
	for _, e := range brokers {
		v.Brokers = append(v.Brokers, wire.Broker{
			BrokerRegistration: wire.BrokerRegistration{NodeID: e.srv.nodeID(), ClientAddrs: []string{e.srv.Addr().String()},
				PeerAddr: e.srv.PeerAddr().String()},
			State: wire.BrokerLive,
		})
	}
	return v
}

// place applies one view to every broker.
func place(brokers []*env, asg ...wire.ShardAssignment) {
	v := viewOf("v1", brokers, asg...)
	for _, e := range brokers {
		apply(e, v)
	}
}

// cacheKeys returns a key of cache "sessions" for each shard.
func cacheKeys() []string {
	keys := make([]string, testCacheShards)
	for i, found := 0, 0; found < testCacheShards; i++ {
		k := fmt.Sprintf("user-%d", i)
		if s := wire.ShardForKey([]byte(k), testCacheShards); keys[s] == "" {
			keys[s] = k
			found++
		}
	}
	return keys
}

// standard places stream "log" (one shard) on b, stream "keyed" (four
// shards) on a and b alternately, stream "lost" nowhere, and cache
// "sessions" shard 0 on a, shard 1 on b.
func standard(a, b *env) {
	place([]*env{a, b},
		owned(wire.ShardKindStream, "log", 0, "broker-b"),
		owned(wire.ShardKindStream, "keyed", 0, "broker-a"), owned(wire.ShardKindStream, "keyed", 1, "broker-b"),
		owned(wire.ShardKindStream, "keyed", 2, "broker-a"), owned(wire.ShardKindStream, "keyed", 3, "broker-b"),
		owned(wire.ShardKindStream, "lost", 0, ""),
		owned(wire.ShardKindCache, "sessions", 0, "broker-a"), owned(wire.ShardKindCache, "sessions", 1, "broker-b"),
	)
}

func startStandard(t testing.TB) (a, b *env) {
	a, b = startCluster(t, wire.StreamSpec{Stream: "log", Durable: true}, wire.StreamSpec{Stream: "keyed", Shards: 4},
		wire.StreamSpec{Stream: "lost"})
	standard(a, b)
	return a, b
}

func TestForwardedPublishesLandOnTheOwnerInOrder(t *testing.T) {
	a, b := startStandard(t)
	bqc := b.dial(0)
	sub := b.subscribe(bqc, b.authed(bqc, 0, allFeatures, pubAll), "log")

	s := a.authed(a.dial(0), durableFlags, durableFeatures, "stream.publish:*")
	// Acked: answered with the owner's offsets.
	if offs := publishAcked(t, s, "log", 0, 3); fmt.Sprint(offs) != "[0 1 2]" {
		t.Fatalf("ack offsets %v", offs)
	}
	// Fire-and-forget, then one acked behind them: all in order.
	const n = 200
	for i := 3; i < n; i++ {
		s.write(binPublish("log", false, 0, numbered(i)))
	}
	s.write(binPublish("log", true, 1000, numbered(n)))
	if ok, isOK := s.recv().(*wire.PublishOK); !isOK || ok.Offset == nil || *ok.Offset != n {
		t.Fatalf("last ack %#v", ok)
	}
	checkOrder(t, sub.payloads(n+1), n+1)
	if got := b.metric("felix_broker_forwards_received_total"); got != n+1 {
		t.Fatalf("b received %v forwards, want %d", got, n+1)
	}
	if got := a.metric("felix_broker_forwarded_publishes_total"); got != n+1 {
		t.Fatalf("a forwarded %v publishes, want %d", got, n+1)
	}
	if got := a.metric("felix_publish_messages_total"); got != 0 {
		t.Fatalf("a published %v messages itself", got)
	}
	// JSON publishes are forwarded too.
	s.send(&wire.Publish{TenantID: testTenant, Namespace: "prod", Stream: "log", Payload: numbered(n + 1), RequestID: 7, Ack: wire.AckPerMessage})
	if ok, isOK := s.recv().(*wire.PublishOK); !isOK || ok.RequestID != 7 {
		t.Fatalf("JSON publish answered %#v", ok)
	}
	if got := sub.payloads(1); string(got[0]) != string(numbered(n+1)) {
		t.Fatalf("got %q", got[0])
	}
}

func TestForwardedKeyedBatchesSplitByOwner(t *testing.T) {
	a, b := startStandard(t)
	s := a.authed(a.dial(0), 0, allFeatures, pubAll)
	var onA, onB int
	for i := range 40 {
		key := []byte(fmt.Sprintf("k%d", i))
		p := wire.BinaryPublish{RequestID: uint64(i + 1), Key: key, TenantID: testTenant, Namespace: "prod", Stream: "keyed",
			Payloads: [][]byte{numbered(i), numbered(i)}}
		s.write(p.AppendFrame(nil, wire.PublishFlags(true, true)))
		if ok, isOK := s.recv().(*wire.PublishOK); !isOK || ok.RequestID != uint64(i+1) {
			t.Fatalf("keyed publish %d: %#v", i, ok)
		}
		if wire.ShardForKey(key, 4)%2 == 0 {
			onA += 2
		} else {
			onB += 2
		}
	}
	if onA == 0 || onB == 0 {
		t.Fatal("the keys all fell on one broker")
	}
	// An acknowledged publish may be counted just after its answer.
	waitFor(t, "both brokers count every publish", func() bool {
		return a.metric("felix_publish_messages_total") >= float64(onA) && b.metric("felix_publish_messages_total") >= float64(onB)
	})
	if got, got2 := a.metric("felix_publish_messages_total"), b.metric("felix_publish_messages_total"); got != float64(onA) || got2 != float64(onB) {
		t.Fatalf("a published %v (want %d), b %v (want %d)", got, onA, got2, onB)
	}
	if got := b.metric("felix_broker_forwards_received_total"); got != float64(onB/2) {
		t.Fatalf("b received %v forwards, want %d", got, onB/2)
	}
}

func TestForwardNeedsPublishPermissionAtTheEntry(t *testing.T) {
	a, b := startStandard(t)
	s := a.authed(a.dial(0), 0, allFeatures, "stream.subscribe:*")
	s.write(binPublish("log", true, 1, numbered(0)))
	expectCode(t, s.recv(), wire.CodeForbidden)
	if got := b.metric("felix_broker_forwards_received_total"); got != 0 {
		t.Fatalf("a refused publish reached the owner (%v forwards)", got)
	}
}

func TestOwnerChecksTheTokenAgain(t *testing.T) {
	a, b := startStandard(t)
	s := a.authed(a.dial(0), 0, allFeatures, pubAll)
	publishAcked := func(id uint64) wire.Message {
		s.write(binPublish("log", true, id, numbered(0)))
		return s.recv()
	}
	if _, ok := publishAcked(1).(*wire.PublishOK); !ok {
		t.Fatal("the first publish was refused")
	}
	// Only the owner hears of the revocation.
	b.src.revoke(wire.Revocation{TenantID: testTenant, Subject: "tester", RevokedBefore: time.Now().Unix() + 1, Reason: "left"})
	waitFor(t, "the revocation to reach b", func() bool { return b.srv.revs.Len() > 0 })
	e := expectCode(t, publishAcked(2), wire.CodeRevoked)
	if e.Retry != wire.RetryFatal {
		t.Fatalf("refusal %v", e)
	}
	// A fire-and-forget one is dropped and counted; the acked one behind
	// it is answered after it.
	s.write(binPublish("log", false, 0, numbered(1)))
	expectCode(t, publishAcked(3), wire.CodeRevoked)
	if got := a.metric(`felix_broker_forward_failures_total{reason="dropped"}`); got != 1 {
		t.Fatalf("dropped %v", got)
	}
	if got := b.metric("felix_broker_forward_refused_auth_total"); got != 3 {
		t.Fatalf("b refused %v forwards for their token", got)
	}
	if got := b.metric("felix_publish_messages_total"); got != 1 {
		t.Fatalf("b published %v messages", got)
	}
}

func TestUnavailableShardIsRefusedNotForwarded(t *testing.T) {
	a, b := startStandard(t)
	s := a.authed(a.dial(0), 0, allFeatures, pubAll)
	s.write(binPublish("lost", true, 1, numbered(0)))
	e := expectCode(t, s.recv(), wire.CodeShardUnavailable)
	if e.Retry != wire.RetryRetry || e.Detail[wire.DetailReason] != wire.UnavailableOwnerDown {
		t.Fatalf("refusal %v", e)
	}
	// Fire-and-forget: refused with an error, never dropped silently.
	s.write(binPublish("lost", false, 0, numbered(0)))
	expectCode(t, s.recv(), wire.CodeShardUnavailable)
	if got := b.metric("felix_broker_forwards_received_total"); got != 0 {
		t.Fatalf("%v forwards", got)
	}
}

func TestOwnerThatDisagreesRefusesAndNeverForwardsAgain(t *testing.T) {
	a, b := startCluster(t, wire.StreamSpec{Stream: "log"})
	brokers := []*env{a, b}
	// a thinks b owns the shard; b thinks a does.
	apply(a, viewOf("a", brokers, owned(wire.ShardKindStream, "log", 0, "broker-b")))
	apply(b, viewOf("b", brokers, owned(wire.ShardKindStream, "log", 0, "broker-a")))
	s := a.authed(a.dial(0), 0, allFeatures, pubAll)
	s.write(binPublish("log", true, 1, numbered(0)))
	e := expectCode(t, s.recv(), wire.CodeNotLeader)
	if e.Detail["node_id"] != "broker-a" {
		t.Fatalf("refusal %v", e)
	}
	if got := a.metric("felix_broker_forwards_received_total"); got != 0 {
		t.Fatalf("b forwarded the forward back to a (%v)", got)
	}
}

func TestOwnerGoneMidForwardIsOutcomeUnknown(t *testing.T) {
	a, b := startStandard(t)
	a.srv.fwd.timeout = 2 * time.Second
	started := make(chan struct{}, 1)
	hook := func(ctx context.Context) {
		started <- struct{}{}
		<-ctx.Done()
	}
	b.srv.fwd.ownerHook.Store(&hook)
	s := a.authed(a.dial(0), 0, allFeatures, pubAll)
	s.write(binPublish("log", true, 1, numbered(0)))
	<-started
	b.srv.Peer().Close()
	e := expectCode(t, s.recv(), wire.CodeShardUnavailable)
	if e.Retry != wire.RetryOutcomeUnknown || e.Detail[wire.DetailReason] != "forward_unanswered" {
		t.Fatalf("refusal %v, want outcome_unknown", e)
	}
	// Now nothing answers: the next one is never sent, so it may be
	// retried.
	s.write(binPublish("log", true, 2, numbered(1)))
	e = expectCode(t, s.recv(), wire.CodeShardUnavailable)
	if e.Retry != wire.RetryRetry {
		t.Fatalf("refusal %v, want retry", e)
	}
	if got := b.metric("felix_publish_messages_total"); got != 0 {
		t.Fatalf("b published %v", got)
	}
}

func TestCacheOperationsThroughEitherBroker(t *testing.T) {
	a, b := startStandard(t)
	sa := a.authed(a.dial(0), 0, allFeatures, cacheAll)
	sb := b.authed(b.dial(0), 0, allFeatures, cacheAll)
	keys := cacheKeys() // keys[0] on a, keys[1] on b
	for i, k := range keys {
		sa.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: k, Value: []byte("v" + k), RequestID: uint64(10 + i)})
		if ok, isOK := sa.recv().(*wire.CacheOK); !isOK || ok.RequestID != uint64(10+i) {
			t.Fatalf("put %s through a: %#v", k, ok)
		}
	}
	for i, k := range keys {
		sb.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: k, RequestID: uint64(20 + i)})
		v, ok := sb.recv().(*wire.CacheValue)
		if !ok || v.RequestID != uint64(20+i) || string(v.Value) != "v"+k {
			t.Fatalf("get %s through b: %#v", k, v)
		}
	}
	// Each key was stored by its owner only.
	for i, e := range []*env{a, b} {
		c, _ := e.srv.resolveCache(testTenant, "prod", "sessions")
		if n, _ := c.Len(); n != 1 {
			t.Fatalf("broker %d holds %d keys, want its own one", i, n)
		}
	}
	sb.send(&wire.CacheDelete{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: keys[0], RequestID: 30})
	if v, ok := sb.recv().(*wire.CacheValue); !ok || string(v.Value) != "v"+keys[0] {
		t.Fatalf("delete through b: %#v", v)
	}
	if a.metric("felix_broker_forwarded_cache_ops_total") != 1 || b.metric("felix_broker_forwarded_cache_ops_total") != 2 {
		t.Fatalf("forwarded cache ops: a %v, b %v", a.metric("felix_broker_forwarded_cache_ops_total"), b.metric("felix_broker_forwarded_cache_ops_total"))
	}
	// A read-only token may not put, at the entry or at the owner.
	ro := b.authed(b.dial(0), 0, allFeatures, "cache.read:cache:acme/prod")
	ro.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: keys[0], Value: []byte("x"), RequestID: 40})
	expectCode(t, ro.recv(), wire.CodeForbidden)
	// The owner's own refusals reach the client unchanged, request id
	// included.
	ro.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: keys[0], RequestID: 41})
	if v, ok := ro.recv().(*wire.CacheValue); !ok || v.RequestID != 41 || v.Value != nil {
		t.Fatalf("get of a deleted key: %#v", v)
	}
}

func TestIngressPublishesAreForwardedInOrder(t *testing.T) {
	a, b := startStandard(t)
	bqc := b.dial(0)
	sub := b.subscribe(bqc, b.authed(bqc, 0, allFeatures, pubAll), "log")
	frames := [][]byte{authFrame(testTenant, a.token(pubAll))}
	const n = 50
	for i := range n {
		frames = append(frames, binPublish("log", false, 0, numbered(i)))
	}
	st := openIngress(t, a.dial(0), frames...)
	st.Close()
	checkOrder(t, sub.payloads(n), n)
}

func TestOwnerWithoutPeerAddressIsARedirect(t *testing.T) {
	a, b := startCluster(t, wire.StreamSpec{Stream: "log"})
	v := viewOf("v1", []*env{a, b}, owned(wire.ShardKindStream, "log", 0, "broker-b"),
		owned(wire.ShardKindCache, "sessions", 0, "broker-b"), owned(wire.ShardKindCache, "sessions", 1, "broker-b"))
	v.Brokers[1].PeerAddr = ""
	apply(a, v)
	s := a.authed(a.dial(0), 0, allFeatures, pubAll, cacheAll)
	s.write(binPublish("log", true, 1, numbered(0)))
	e := expectCode(t, s.recv(), wire.CodeNotLeader)
	if e.Detail["node_id"] != "broker-b" || e.Detail["addr"] != b.srv.Addr().String() {
		t.Fatalf("refusal %v", e)
	}
	s.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "k", RequestID: 5})
	if e := expectCode(t, s.recv(), wire.CodeNotLeader); e.Detail["node_id"] != "broker-b" {
		t.Fatalf("refusal %v", e)
	}
	if got := a.metric(`felix_broker_forward_failures_total{reason="no_peer_link"}`); got != 2 {
		t.Fatalf("no_peer_link failures %v", got)
	}
}

func TestCacheWithoutAViewIsNotReady(t *testing.T) {
	a, _ := startCluster(t)
	s := a.authed(a.dial(0), 0, allFeatures, cacheAll)
	s.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "k", RequestID: 5})
	e := expectCode(t, s.recv(), wire.CodeShardUnavailable)
	if e.Detail[wire.DetailReason] != unavailableNotReady {
		t.Fatalf("refusal %v", e)
	}
}

func TestFwdPublishHeadersRoundTrip(t *testing.T) {
	h := fwdPublish{Token: "tok", TenantID: "t1", Namespace: "prod", Stream: "log", Shard: 7, Acked: true, Generation: 1 << 40}
	got, err := parseFwdPublish(h.appendBinary(nil))
	if err != nil || got != h {
		t.Fatalf("%+v, %v", got, err)
	}
	off := uint64(99)
	for _, r := range []fwdPublished{{}, {Offset: &off}, {Offset: &off, Generation: 3}} {
		got, err := parseFwdPublished(r.appendBinary(nil))
		if err != nil || got.Generation != r.Generation || (got.Offset == nil) != (r.Offset == nil) || (r.Offset != nil && *got.Offset != *r.Offset) {
			t.Fatalf("%+v: %+v, %v", r, got, err)
		}
	}
	b := h.appendBinary(nil)
	for _, bad := range [][]byte{nil, b[:12], b[:len(b)-1], append(b, 0), append([]byte{0x02}, b[1:]...)} {
		if _, err := parseFwdPublish(bad); err == nil {
			t.Errorf("parseFwdPublish(%x) accepted", bad)
		}
	}
	for _, bad := range [][]byte{nil, make([]byte, 16), make([]byte, 18), append([]byte{0x04}, make([]byte, 16)...)} {
		if _, err := parseFwdPublished(bad); err == nil {
			t.Errorf("parseFwdPublished(%x) accepted", bad)
		}
	}
}

func FuzzParseFwdPublish(f *testing.F) {
	f.Add(fwdPublish{Token: "tok", TenantID: "t", Namespace: "n", Stream: "s", Shard: 1, Acked: true, Generation: 2}.appendBinary(nil))
	f.Add(fwdPublished{Generation: 1}.appendBinary(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := parseFwdPublish(b); err == nil {
			if again, err := parseFwdPublish(h.appendBinary(nil)); err != nil || again != h {
				t.Fatalf("round trip %+v: %+v, %v", h, again, err)
			}
		}
		if r, err := parseFwdPublished(b); err == nil {
			if again := r.appendBinary(nil); string(again) != string(b) {
				t.Fatalf("round trip %x -> %x", b, again)
			}
		}
	})
}

func TestPayloadsRoundTrip(t *testing.T) {
	in := [][]byte{[]byte("a"), {}, []byte("ccc")}
	got, err := parsePayloads(appendPayloads(nil, in))
	if err != nil || len(got) != 3 || string(got[0]) != "a" || len(got[1]) != 0 || string(got[2]) != "ccc" {
		t.Fatalf("%q, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {0, 0, 0}, {0, 0, 0, 2, 'x'}} {
		if _, err := parsePayloads(bad); err == nil {
			t.Errorf("parsePayloads(%q) accepted", bad)
		}
	}
}

func FuzzParsePayloads(f *testing.F) {
	f.Add(appendPayloads(nil, [][]byte{[]byte("a"), {}, []byte("ccc")}))
	f.Add([]byte{0, 0, 0, 9, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parsePayloads(b)
		if err != nil {
			return
		}
		if again := appendPayloads(nil, p); string(again) != string(b) {
			t.Fatalf("round trip %q -> %q", b, again)
		}
	})
}

// BenchmarkForwardedPublish compares publishes to an in-memory shard
// served by the broker the client reached (local) with the same through
// the other broker (forwarded): acked ones one at a time, and
// fire-and-forget ones in a burst closed by an acked one. The forwarded
// lane batches what queued while a call was in flight, so a burst costs
// a peer round trip per batch (docs/benchmarks.md).
func BenchmarkForwardedPublish(b *testing.B) {
	a, o := startCluster(b, wire.StreamSpec{Stream: "mem"})
	place([]*env{a, o}, owned(wire.ShardKindStream, "mem", 0, "broker-b"))
	payload := make([]byte, 100)
	for _, tc := range []struct {
		name string
		via  *env
	}{{"local", o}, {"forwarded", a}} {
		s := tc.via.authed(tc.via.dial(0), 0, allFeatures, pubAll)
		b.Run(tc.name+"/acked", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				s.write(binPublish("mem", true, uint64(i+1), payload))
				if m := s.recv(); !isPublishOK(m) {
					b.Fatalf("refused: %#v", m)
				}
			}
		})
		b.Run(tc.name+"/fire-and-forget", func(b *testing.B) {
			n := 0
			for b.Loop() {
				s.write(binPublish("mem", false, 0, payload))
				if n++; n%256 == 0 {
					// The burst may fill the lane: the acked publish
					// closing it is then refused overloaded; send it again.
					for {
						s.write(binPublish("mem", true, 1, payload))
						m := s.recv()
						if isPublishOK(m) {
							break
						}
						if e, ok := m.(*wire.PublishError); !ok || e.Code != wire.CodeOverloaded {
							b.Fatalf("refused: %#v", m)
						}
						time.Sleep(time.Millisecond)
					}
				}
			}
		})
	}
}

func TestOwnerWithAFullLaneAnswersOverloaded(t *testing.T) {
	a, b := startStandard(t)
	st, _ := b.srv.resolveStream(testTenant, "prod", "log")
	heldC := make(chan []*lane, 1)
	hook := func(ctx context.Context) {
		var held []*lane
		for {
			l, ok := b.srv.lanes.admit(ctx, sched.LaneKey{Stream: st.Key()}, false)
			if !ok {
				heldC <- held
				return
			}
			held = append(held, l)
		}
	}
	b.srv.fwd.ownerHook.Store(&hook)
	s := a.authed(a.dial(0), 0, allFeatures, pubAll)
	s.write(binPublish("log", true, 1, numbered(0)))
	e := expectCode(t, s.recv(), wire.CodeOverloaded)
	if e.Detail["reason"] != "publish_queue_full" {
		t.Fatalf("refusal %v", e)
	}
	b.srv.fwd.ownerHook.Store(nil)
	for _, l := range <-heldC {
		b.srv.lanes.release(l)
	}
	s.write(binPublish("log", true, 2, numbered(0)))
	if _, ok := s.recv().(*wire.PublishOK); !ok {
		t.Fatal("refused once the lane had room")
	}
}

func TestConcurrentClientsKeepTheirOrderAcrossTheForward(t *testing.T) {
	a, b := startStandard(t)
	bqc := b.dial(0)
	sub := b.subscribe(bqc, b.authed(bqc, 0, allFeatures, pubAll), "log")
	const clients, n = 4, 100
	var wg sync.WaitGroup
	for c := range clients {
		s := a.authed(a.dial(0), 0, allFeatures, pubAll)
		wg.Go(func() {
			for i := range n {
				s.write(binPublish("log", i == n-1, 1, []byte(fmt.Sprintf("c%d-%05d", c, i))))
			}
			if _, ok := s.recv().(*wire.PublishOK); !ok {
				t.Error("the last publish was refused")
			}
		})
	}
	wg.Wait()
	next := make([]int, clients)
	for _, p := range sub.payloads(clients * n) {
		var c, i int
		if _, err := fmt.Sscanf(string(p), "c%d-%05d", &c, &i); err != nil || i != next[c] {
			t.Fatalf("payload %q: client %d expected %d (%v)", p, c, next[c], err)
		}
		next[c]++
	}
}

func isPublishOK(m wire.Message) bool {
	_, ok := m.(*wire.PublishOK)
	return ok
}
