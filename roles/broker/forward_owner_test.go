package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/roles/broker/peer"
	"github.com/felixmq/felix/wire"
)

// startSlowViews is startCluster with brokers that poll their view
// source once a minute only, so a fetch in a test comes from a request
// for one (viewSoon), not the timer.
func startSlowViews(t *testing.T, streams ...wire.StreamSpec) (a, b *env) {
	return startPair(t, func(cfg *Config) { cfg.ClusterViewInterval = maxClusterViewInterval }, streams...)
}

// settle waits until e's catalog has applied stream and no view fetch
// is asked for or under way, so a view offered next is fetched only when
// something asks for it.
func settle(t *testing.T, e *env, stream string) {
	t.Helper()
	waitFor(t, "the catalog to apply "+stream, func() bool { _, err := e.srv.resolveStream(testTenant, "prod", stream); return err == nil })
	waitFor(t, "pending view fetches", func() bool { return len(e.srv.view.soonC) == 0 })
	e.srv.refreshView(context.Background())
}

// ownedAt assigns a shard to a node at a generation.
func ownedAt(kind wire.ShardKind, name string, shard uint32, node string, gen uint64) wire.ShardAssignment {
	a := owned(kind, name, shard, node)
	a.Generation = gen
	return a
}

// offer makes v the view e's source answers without applying it: e
// holds its old view until it fetches.
func offer(e *env, v wire.ClusterView) {
	f := e.srv.cluster.(*viewSource)
	f.mu.Lock()
	f.v = v
	f.mu.Unlock()
}

// genView is a view of a and b where b owns stream "log" and both cache
// shards at generation gen.
func genView(a, b *env, gen uint64) wire.ClusterView {
	return viewOf(fmt.Sprintf("v%d", gen), []*env{a, b},
		ownedAt(wire.ShardKindStream, "log", 0, "broker-b", gen),
		ownedAt(wire.ShardKindCache, "sessions", 0, "broker-b", gen),
		ownedAt(wire.ShardKindCache, "sessions", 1, "broker-b", gen))
}

func TestForwardNewerThanTheOwnersGenerationIsRefusedStale(t *testing.T) {
	a, b := startSlowViews(t, wire.StreamSpec{Stream: "log"})
	v1, v2 := genView(a, b, 1), genView(a, b, 2)
	apply(a, v2)
	apply(b, v1)
	settle(t, b, "log")
	offer(b, v2) // b's view is behind until it fetches
	s := a.authed(a.dial(0), 0, allFeatures, pubAll, cacheAll)

	s.write(binPublish("log", true, 1, numbered(0)))
	e := expectCode(t, s.recv(), wire.CodeShardUnavailable)
	if e.Retry != wire.RetryRetry || e.Detail[wire.DetailReason] != reasonStaleGeneration ||
		fmt.Sprint(e.Detail["generation"]) != "1" || fmt.Sprint(e.Detail["forward_generation"]) != "2" ||
		!strings.Contains(e.Message, "generation 2") || !strings.Contains(e.Message, "generation 1") {
		t.Fatalf("refusal %v", e)
	}
	if got := b.metric("felix_publish_messages_total"); got != 0 {
		t.Fatalf("b published %v messages under a stale generation", got)
	}
	// The refusal made b fetch its view: the retry is served.
	waitFor(t, "b to fetch v2", func() bool { return b.srv.routes.Tag() == "v2" })
	s.write(binPublish("log", true, 2, numbered(0)))
	if ok, isOK := s.recv().(*wire.PublishOK); !isOK || ok.RequestID != 2 {
		t.Fatalf("retry answered %#v", ok)
	}

	// A cache forward too.
	v3 := genView(a, b, 3)
	apply(a, v3)
	offer(b, v3)
	s.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "k", RequestID: 3})
	e = expectCode(t, s.recv(), wire.CodeShardUnavailable)
	if e.Detail[wire.DetailReason] != reasonStaleGeneration || fmt.Sprint(e.Detail["generation"]) != "2" {
		t.Fatalf("cache refusal %v", e)
	}
	waitFor(t, "b to fetch v3", func() bool { return b.srv.routes.Tag() == "v3" })
	s.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "k", RequestID: 4})
	if v, ok := s.recv().(*wire.CacheValue); !ok || v.RequestID != 4 {
		t.Fatalf("cache retry answered %#v", v)
	}
}

func TestOwnerNotesItsNewerGenerationAndTheEntryCatchesUp(t *testing.T) {
	a, b := startSlowViews(t, wire.StreamSpec{Stream: "log"})
	v1, v2 := genView(a, b, 1), genView(a, b, 2)
	apply(a, v1)
	settle(t, a, "log")
	offer(a, v2) // a's view is behind until it fetches
	apply(b, v2)
	s := a.authed(a.dial(0), 0, allFeatures, pubAll, cacheAll)

	// b does own the shard: served, and a fetches its view.
	s.write(binPublish("log", true, 1, numbered(0)))
	if ok, isOK := s.recv().(*wire.PublishOK); !isOK || ok.RequestID != 1 {
		t.Fatalf("publish answered %#v", ok)
	}
	waitFor(t, "a to fetch v2", func() bool { return a.srv.routes.Tag() == "v2" })
	if got := b.metric("felix_publish_messages_total"); got != 1 {
		t.Fatalf("b published %v messages", got)
	}

	v3 := genView(a, b, 3)
	offer(a, v3)
	apply(b, v3)
	s.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "k", Value: []byte("v"), RequestID: 2})
	if ok, isOK := s.recv().(*wire.CacheOK); !isOK || ok.RequestID != 2 {
		t.Fatalf("cache put answered %#v", ok)
	}
	waitFor(t, "a to fetch v3", func() bool { return a.srv.routes.Tag() == "v3" })
}

func TestForwardToABrokerThatNeverOwnedTheShardIsNotLeader(t *testing.T) {
	a, b := startSlowViews(t, wire.StreamSpec{Stream: "log"})
	// a thinks b owns the shard at a newer generation; b thinks a owns it:
	// b does not own it at any generation, so the answer is not_leader,
	// not stale_generation.
	apply(a, viewOf("a", []*env{a, b}, ownedAt(wire.ShardKindStream, "log", 0, "broker-b", 5)))
	apply(b, viewOf("b", []*env{a, b}, ownedAt(wire.ShardKindStream, "log", 0, "broker-a", 1)))
	s := a.authed(a.dial(0), 0, allFeatures, pubAll)
	s.write(binPublish("log", true, 1, numbered(0)))
	if e := expectCode(t, s.recv(), wire.CodeNotLeader); e.Detail["node_id"] != "broker-a" {
		t.Fatalf("refusal %v", e)
	}
}

func TestUnreachableOwnerIsRefusedNamingIt(t *testing.T) {
	a, b := startCluster(t, wire.StreamSpec{Stream: "log"}, wire.StreamSpec{Stream: "mine"})
	// An address that takes connections and never answers, over TCP and
	// QUIC (a UDP socket on the same port): a peer dial to it waits until
	// it gives up. (A port nobody listens at would refuse a TCP dial at
	// once.)
	silent := silentAddr(t)
	v := viewOf("v1", []*env{a, b}, owned(wire.ShardKindStream, "log", 0, "broker-b"), owned(wire.ShardKindStream, "mine", 0, "broker-a"))
	v.Brokers[1].PeerAddr = silent
	apply(a, v)
	a.srv.fwd.timeout = time.Second

	s := a.authed(a.dial(0), 0, allFeatures, pubAll)
	s.write(binPublish("log", true, 1, numbered(0)))
	// The forward waits in its own lane: the client's stream goes on
	// meanwhile.
	s.write(binPublish("mine", true, 2, numbered(0)))
	if ok, isOK := s.recv().(*wire.PublishOK); !isOK || ok.RequestID != 2 {
		t.Fatalf("a local publish behind the forward answered %#v", ok)
	}
	e := expectCode(t, s.recv(), wire.CodeShardUnavailable)
	addr := silent
	if e.Retry != wire.RetryRetry || e.Detail[wire.DetailReason] != fwdFailNotSent || e.Detail["node_id"] != "broker-b" ||
		e.Detail["peer_addr"] != addr || !strings.Contains(e.Message, "broker-b") || !strings.Contains(e.Message, addr) ||
		!strings.Contains(e.Message, "cannot reach") {
		t.Fatalf("refusal %v", e)
	}
	if got := a.metric(`felix_broker_forward_failures_total{reason="owner_unreachable"}`); got != 1 {
		t.Fatalf("owner_unreachable failures %v", got)
	}
	// Still bounded the second time (the dial in the background may
	// still be trying).
	s.write(binPublish("log", true, 3, numbered(1)))
	if e := expectCode(t, s.recv(), wire.CodeShardUnavailable); e.Detail["peer_addr"] != addr {
		t.Fatalf("second refusal %v", e)
	}
}

// A batch of forwarded publishes gets the same generation checks as one
// forward alone: refused whole when it names a generation newer than the
// owner's, served with the owner's generation noted when older.
func TestForwardedPublishBatchChecksTheGeneration(t *testing.T) {
	a, b := startSlowViews(t, wire.StreamSpec{Stream: "log"})
	v2 := genView(a, b, 2)
	apply(a, v2)
	apply(b, v2)
	settle(t, b, "log")
	tok := a.token(pubAll)
	batch := func(gen uint64) peer.Request {
		hdr, _ := json.Marshal(fwdPublishBatch{TenantID: testTenant, Namespace: "prod", Stream: "log", Generation: gen,
			Tokens: []string{tok}, Publishes: []fwdBatchPublish{{Token: 0, Acked: true, Payloads: 1}, {Token: 0, Acked: true, Payloads: 1}}})
		return peer.Request{Type: TypeFwdPublishBatch, Header: hdr, Body: appendPayloads(nil, [][]byte{[]byte("x"), []byte("y")})}
	}
	rep := b.srv.serveForwardedPublishBatch(context.Background(), batch(3))
	if rep.Err == nil || rep.Err.Detail[wire.DetailReason] != reasonStaleGeneration {
		t.Fatalf("a batch naming generation 3 at an owner of generation 2: %+v", rep)
	}
	if got := b.metric("felix_publish_messages_total"); got != 0 {
		t.Fatalf("b published %v messages under a stale generation", got)
	}
	rep = b.srv.serveForwardedPublishBatch(context.Background(), batch(1))
	var h fwdBatchReply
	if rep.Err != nil || json.Unmarshal(rep.Header, &h) != nil || h.Generation != 2 || len(h.Results) != 2 || h.Results[0].Error != nil || h.Results[1].Error != nil {
		t.Fatalf("a batch naming generation 1 at an owner of generation 2: %+v %s", rep.Err, rep.Header)
	}
}

// A batch of forwarded cache operations is checked op by op, and its
// reply notes the owner's generation when the entry's is older, as one
// forward's would.
func TestForwardedCacheBatchNotesTheOwnersGeneration(t *testing.T) {
	a, b := startSlowViews(t)
	v2 := genView(a, b, 2)
	apply(a, v2)
	apply(b, v2)
	hdr, _ := json.Marshal(fwdCacheBatch{fwdCache: fwdCache{Token: a.token(cacheAll), TenantID: testTenant, Namespace: "prod",
		Cache: "sessions", WithCodes: true, Generation: 1}})
	var body []byte
	for i, k := range cacheKeys() {
		op, _ := wire.MarshalMessage(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: k, Value: []byte("v"), RequestID: uint64(i + 1)})
		body = appendPayloads(body, [][]byte{op})
	}
	rep := b.srv.serveForwardedCacheBatch(context.Background(), peer.Request{Type: TypeFwdCacheBatch, Header: hdr, Body: body})
	var h fwdBatchReply
	if rep.Err != nil || json.Unmarshal(rep.Header, &h) != nil || h.Generation != 2 || len(h.Results) != len(cacheKeys()) {
		t.Fatalf("a cache batch naming generation 1 at an owner of generation 2: %+v %s", rep.Err, rep.Header)
	}
	for i, r := range h.Results {
		if r.Error != nil {
			t.Fatalf("op %d refused: %+v", i, r.Error)
		}
	}
}

// silentAddr returns a loopback address whose TCP listener accepts
// connections and never answers on them, with a UDP socket on the same
// port that never answers either; both close when the test ends.
func silentAddr(t *testing.T) string {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err != nil {
			pc.Close() // the TCP port is taken: try another
			continue
		}
		var mu sync.Mutex
		var held []net.Conn
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
		t.Cleanup(func() {
			ln.Close()
			pc.Close()
			mu.Lock()
			defer mu.Unlock()
			for _, c := range held {
				c.Close()
			}
		})
		return pc.LocalAddr().String()
	}
	t.Fatal("no port free for both TCP and UDP")
	return ""
}
