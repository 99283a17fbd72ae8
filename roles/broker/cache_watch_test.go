package broker

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

const cacheAll = "cache.*:cache:acme/prod"

// watch sends req on s and returns the watch's event stream with the
// answer.
func (e *env) watch(qc transport.Conn, s *tstream, req *wire.CacheWatch) (*tsub, *wire.CacheWatchOK) {
	e.t.Helper()
	req.TenantID, req.Namespace, req.Cache = testTenant, "prod", "sessions"
	s.send(req)
	m := s.recv()
	ok, isOK := m.(*wire.CacheWatchOK)
	if !isOK || ok.RequestID != req.RequestID {
		e.t.Fatalf("cache_watch refused: %#v", m)
	}
	return e.acceptEvents(qc, ok.WatchID), ok
}

func cachePut(s *tstream, key, value string) {
	s.t.Helper()
	s.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, Value: []byte(value), RequestID: 1})
	if _, ok := s.recv().(*wire.CacheOK); !ok {
		s.t.Fatal("cache put refused")
	}
}

func cacheDelete(s *tstream, key string) {
	s.t.Helper()
	s.send(&wire.CacheDelete{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, RequestID: 2})
	s.recv()
}

// msg reads the next frame of an event stream as a JSON message.
func (s *tsub) msg() wire.Message {
	s.t.Helper()
	f := s.frame()
	m, err := wire.ParseMessage(f.Payload)
	if err != nil {
		s.t.Fatal(err)
	}
	return m
}

// changes reads n cache_change frames as "op:key=value@offset".
func (s *tsub) changes(n int) ([]string, []uint64) {
	s.t.Helper()
	var out []string
	var offs []uint64
	for range n {
		m := s.msg()
		ch, ok := m.(*wire.CacheChange)
		if !ok {
			s.t.Fatalf("want cache_change, got %#v", m)
		}
		if err := ch.Validate(); err != nil {
			s.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s:%s=%s", ch.Op, ch.Key, ch.Value))
		offs = append(offs, ch.Offset)
	}
	return out, offs
}

// lastFrame reads past cache_change frames to the watch's last frame and
// checks the stream ends after it.
func (s *tsub) lastFrame() (wire.Message, int) {
	s.t.Helper()
	n := 0
	for {
		m := s.msg()
		if _, ok := m.(*wire.CacheChange); ok {
			n++
			continue
		}
		if _, err := s.next(); err != io.EOF {
			s.t.Fatalf("event stream after %T: %v, want EOF", m, err)
		}
		return m, n
	}
}

func TestCacheWatchOverTheWire(t *testing.T) {
	e := startEnv(t, testConfig())
	qc := e.dial(0)
	s := e.authed(qc, 0, allFeatures, cacheAll)
	if f := e.srv.serverFeatures(); f&wire.FeatureCacheWatch == 0 || f&wire.FeatureCacheWatchRetained == 0 {
		t.Fatalf("server features %#x lack the cache watch", f)
	}
	w, ok := e.watch(qc, s, &wire.CacheWatch{Key: "u1", WatchID: ptr[uint64](77), RequestID: 3})
	if ok.WatchID != 77 {
		t.Fatalf("watch id %d, want the client's 77", ok.WatchID)
	}
	cachePut(s, "u1", "v1")
	cachePut(s, "u2", "other")
	cachePut(s, "u1", "v2")
	cacheDelete(s, "u1")
	got, offs := w.changes(3)
	if fmt.Sprint(got) != "[put:u1=v1 put:u1=v2 delete:u1=]" || offs[0] != ok.Offset || offs[1] != ok.Offset+2 || offs[2] != ok.Offset+3 {
		t.Fatalf("watch saw %v at %v (ok offset %d)", got, offs, ok.Offset)
	}

	// A second watch asking for id 77 gets another id.
	cachePut(s, "u1", "v3")
	r, rok := e.watch(qc, s, &wire.CacheWatch{Key: "u1", Retained: true, WatchID: ptr[uint64](77), RequestID: 4})
	if rok.WatchID == 77 {
		t.Fatal("watch id 77 handed out twice on one connection")
	}
	if got, offs := r.changes(1); got[0] != "put:u1=v3" || offs[0] != rok.Offset-1 {
		t.Fatalf("retained start gave %v at %v", got, offs)
	}
	if st, isState := r.msg().(*wire.CacheWatchState); !isState || st.Offset != rok.Offset || st.Count != 1 {
		t.Fatalf("want cache_watch_state{%d 1}, got %#v", rok.Offset, st)
	}
	cachePut(s, "u1", "v4")
	if got, _ := r.changes(1); got[0] != "put:u1=v4" {
		t.Fatalf("after the state: %v", got)
	}

	// Stop reading the first watch, write meanwhile, resume after it.
	_, last := w.changes(2) // v3, v4
	w.rs.CancelRead(0)
	e.waitSubs(1) // the broker let the cancelled watch go
	cachePut(s, "u1", "v5")
	cacheDelete(s, "u1")
	from := last[1] + 1
	w2, _ := e.watch(qc, s, &wire.CacheWatch{Key: "u1", FromOffset: &from, RequestID: 5})
	if got, offs := w2.changes(2); fmt.Sprint(got) != "[put:u1=v5 delete:u1=]" || offs[0] != from {
		t.Fatalf("resume from %d gave %v at %v", from, got, offs)
	}
}

func TestCacheWatchPrefixAndAuth(t *testing.T) {
	e := startEnv(t, testConfig())
	qc := e.dial(0)
	s := e.authed(qc, 0, allFeatures, cacheAll)
	users := e.authed(qc, 0, allFeatures, "cache.read:cache:acme/prod/sessions/user-*")
	w, _ := e.watch(qc, users, &wire.CacheWatch{Key: "user-1", Prefix: true, RequestID: 1})
	cachePut(s, "user-1a", "a")
	cachePut(s, "user-2", "b")
	cachePut(s, "user-1", "c")
	if got, _ := w.changes(2); fmt.Sprint(got) != "[put:user-1a=a put:user-1=c]" {
		t.Fatalf("prefix watch saw %v", got)
	}
	// Outside the grant: a wider prefix, another key, an exact-key grant.
	users.send(&wire.CacheWatch{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "use", Prefix: true, RequestID: 2})
	expectCode(t, users.recv(), wire.CodeForbidden)
	users.send(&wire.CacheWatch{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "admin", RequestID: 3})
	expectCode(t, users.recv(), wire.CodeForbidden)
	one := e.authed(qc, 0, allFeatures, "cache.read:cache:acme/prod/sessions/user-1")
	one.send(&wire.CacheWatch{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "user-1", Prefix: true, RequestID: 4})
	expectCode(t, one.recv(), wire.CodeForbidden)
	s.send(&wire.CacheWatch{TenantID: testTenant, Namespace: "prod", Cache: "nope", Key: "user-1", RequestID: 5})
	expectCode(t, s.recv(), wire.CodeNotFound)
	future := uint64(1 << 63)
	s.send(&wire.CacheWatch{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "user-1", FromOffset: &future, RequestID: 6})
	if e := expectCode(t, s.recv(), wire.CodeInvalidRequest); e.Detail["reason"] != "in_future" {
		t.Fatalf("watch from the future: %v", e)
	}
}

func TestCacheWatchSlowReaderLags(t *testing.T) {
	cfg := testConfig()
	cfg.Core.CacheWatchMaxBytes = 8 << 10
	e := startEnv(t, cfg)
	qc := e.dial(16 << 10)
	s := e.authed(qc, 0, allFeatures, cacheAll)
	slow, sok := e.watch(qc, s, &wire.CacheWatch{Key: "slow", RequestID: 1})
	fast, _ := e.watch(qc, s, &wire.CacheWatch{Key: "fast", RequestID: 2})
	value := strings.Repeat("x", 1000)
	const n = 200
	for i := range n {
		cachePut(s, "slow", fmt.Sprint(i, value))
	}
	cachePut(s, "fast", "still here")
	if got, _ := fast.changes(1); got[0] != "put:fast=still here" {
		t.Fatalf("other watch saw %v", got)
	}
	last, read := slow.lastFrame()
	lag, ok := last.(*wire.CacheWatchLagged)
	if !ok || lag.WatchID != slow.id || read == n {
		t.Fatalf("slow watch read %d changes and ended with %#v", read, last)
	}
	if want := sok.Offset + uint64(read); lag.ResumeFrom != want {
		t.Fatalf("resume from %d after %d changes from %d", lag.ResumeFrom, read, sok.Offset)
	}
	again, _ := e.watch(qc, s, &wire.CacheWatch{Key: "slow", FromOffset: &lag.ResumeFrom, RequestID: 3})
	got, offs := again.changes(n - read)
	if offs[0] != lag.ResumeFrom || !strings.HasPrefix(got[len(got)-1], fmt.Sprint("put:slow=", n-1, "x")) {
		t.Fatalf("resume gave %d changes from %d, last %.20s", len(got), offs[0], got[len(got)-1])
	}
	cachePut(s, "fast", "after")
	fast.changes(1)
}

func TestCacheWatchEnds(t *testing.T) {
	e := startEnv(t, testConfig())
	qc := e.dial(0)
	s := e.authed(qc, 0, allFeatures, cacheAll)
	issued, exp := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	alice := e.authAs(qc, e.tokenAs("alice", testTenant, issued, exp, userPerms...))
	aw, _ := e.watch(qc, alice, &wire.CacheWatch{Key: "k", RequestID: 1})
	w, _ := e.watch(qc, s, &wire.CacheWatch{Key: "k", Prefix: true, RequestID: 2})
	cachePut(s, "k", "v")

	e.src.revoke(wire.Revocation{TenantID: testTenant, Subject: "alice", RevokedBefore: time.Now().Unix()})
	last, n := aw.lastFrame()
	if expectCode(t, last, wire.CodeRevoked); n > 1 {
		t.Fatalf("%d changes before the revocation", n)
	}

	e.srv.state.RemoveCache(wire.CacheSpec{TenantID: testTenant, Namespace: "prod", Cache: "sessions"})
	last, n = w.lastFrame()
	if ee := expectCode(t, last, wire.CodeNotFound); n != 1 || ee.Detail["reason"] != "cache_deleted" {
		t.Fatalf("after %d changes: %v", n, ee)
	}
	e.waitSubs(0) // both watches gave their place back
}

// A watch whose write waits for the client's flow control still ends when
// its token is revoked, and gives its place back, though the client has
// read nothing: the kick's write deadline (endWriteTimeout, 5 s) ends the
// stalled write.
func TestCacheWatchStalledByFlowControlEndsOnRevoke(t *testing.T) {
	cfg := testConfig()
	cfg.Core.CacheWatchMaxBytes = 8 << 20 // never lags here
	e := startEnv(t, cfg)
	qc := e.dial(16 << 10)
	s := e.authed(qc, 0, allFeatures, cacheAll)
	issued, exp := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	alice := e.authAs(qc, e.tokenAs("alice", testTenant, issued, exp, userPerms...))
	aw, _ := e.watch(qc, alice, &wire.CacheWatch{Key: "k", RequestID: 1})
	value := strings.Repeat("x", 1000)
	const n = 200 // ~200 KB of changes against a 16 KiB stream window
	for i := range n {
		cachePut(s, "k", fmt.Sprint(i, value))
	}
	// Wait until the writer has stopped on flow control: what the watch
	// still holds stops shrinking.
	held := func() float64 { return e.metric("felix_cache_watch_queued_bytes") }
	deadline := time.Now().Add(10 * time.Second)
	for prev := -1.0; ; time.Sleep(50 * time.Millisecond) {
		cur := held()
		if cur > 0 && cur == prev {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watch's writer never stalled (%v bytes held)", cur)
		}
		prev = cur
	}
	e.src.revoke(wire.Revocation{TenantID: testTenant, Subject: "alice", RevokedBefore: time.Now().Unix()})
	e.waitSubs(0)
	// The client sees some changes, then the stream ends: with the revoked
	// frame, or reset if the end could not be written in time.
	read := 0
	for {
		f, err := aw.next()
		if err != nil {
			break
		}
		m, err := wire.ParseMessage(f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := m.(*wire.CacheChange); !ok {
			expectCode(t, m, wire.CodeRevoked)
			if _, err := aw.next(); err != io.EOF {
				t.Fatalf("after the revoked frame: %v, want EOF", err)
			}
			break
		}
		read++
	}
	if read >= n {
		t.Fatalf("read all %d changes: the write never stalled", read)
	}
}

func TestCacheWatchShutdown(t *testing.T) {
	e := startEnv(t, testConfig())
	qc := e.dial(0)
	s := e.authed(qc, 0, allFeatures, cacheAll)
	w, _ := e.watch(qc, s, &wire.CacheWatch{Key: "k", Retained: true, RequestID: 1})
	if _, ok := w.msg().(*wire.CacheWatchState); !ok {
		t.Fatal("no state")
	}
	for i := range 3 {
		cachePut(s, "k", fmt.Sprint("v", i))
	}
	type last struct {
		m    wire.Message
		read int
	}
	done := make(chan last, 1)
	go func() {
		m, read := w.lastFrame()
		done <- last{m, read}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	e.srv.Shutdown(ctx)
	got := <-done
	expectCode(t, got.m, wire.CodeDraining)
	if got.read != 3 {
		t.Fatalf("the drain delivered %d of the 3 changes before its last frame", got.read)
	}
	if gs := brokerGoroutines(); len(gs) > 0 {
		t.Fatalf("%d goroutines outlived Shutdown:\n%s", len(gs), strings.Join(gs, "\n\n"))
	}
}

// waitSubs waits until the connections hold n subscriptions and watches.
func (e *env) waitSubs(n int64) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.connSubs() != n {
		if time.Now().After(deadline) {
			e.t.Fatalf("%d subscriptions held, want %d", e.connSubs(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// connSubs sums the subscriptions and watches the connections hold.
func (e *env) connSubs() int64 {
	e.srv.mu.Lock()
	defer e.srv.mu.Unlock()
	var n int64
	for c := range e.srv.conns {
		n += c.subs.Load()
	}
	return n
}

// Subscriptions and cache watches on one connection never share an event
// stream id, whether the broker picks it or the client asks for one in
// use: the client routes each stream by the id its hello names.
func TestEventStreamIDsAreUniqueAcrossKinds(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "events"})
	qc := e.dial(0)
	s := e.authed(qc, 0, allFeatures, cacheAll, pubAll)
	sub := e.subscribe(qc, s, "events")
	_, ok := e.watch(qc, s, &wire.CacheWatch{Key: "k", RequestID: 1})
	if ok.WatchID == sub.id {
		t.Fatalf("a watch and a subscription share id %d", sub.id)
	}
	_, sd := e.subscribeWith(qc, s, &wire.Subscribe{TenantID: testTenant, Namespace: "prod", Stream: "events", SubscriptionID: &ok.WatchID})
	if sd.SubscriptionID == ok.WatchID || sd.SubscriptionID == sub.id {
		t.Fatalf("a subscription asking for watch id %d got %d (first subscription %d)", ok.WatchID, sd.SubscriptionID, sub.id)
	}
	_, ok2 := e.watch(qc, s, &wire.CacheWatch{Key: "k", WatchID: &sub.id, RequestID: 2})
	if ok2.WatchID == sub.id || ok2.WatchID == sd.SubscriptionID || ok2.WatchID == ok.WatchID {
		t.Fatalf("a watch asking for subscription id %d got %d", sub.id, ok2.WatchID)
	}
}
