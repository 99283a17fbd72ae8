package felix

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

func userFake(t *testing.T) (*fakeBroker, *Client) {
	t.Helper()
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, features: wire.FeatureCacheDelete,
		tokens: map[string]bool{"alice": true, "bob": true, "alice-2": true}})
	return fb, connect(t, fb)
}

func handle(t *testing.T, c *Client, token string) *Handle {
	t.Helper()
	h, err := c.WithIdentityToken("acme", token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func count(tokens []string, tok string) int {
	n := 0
	for _, t := range tokens {
		if t == tok {
			n++
		}
	}
	return n
}

func TestHandleStreamsCarryTheirOwnToken(t *testing.T) {
	fb, gw := userFake(t)
	ctx := context.Background()
	alice, bob := handle(t, gw, "alice"), handle(t, gw, "bob")

	if err := alice.Publish(ctx, "app", "feed", []byte("a1"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	if err := alice.Publish(ctx, "app", "feed", []byte("a2"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	if err := bob.CachePut(ctx, "app", "prefs", "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := bob.CacheGet(ctx, "app", "prefs", "k"); err != nil || !ok || string(v) != "v" {
		t.Fatalf("bob's get: %q %v %v", v, ok, err)
	}
	sub, err := alice.Subscribe(ctx, "app", "feed")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if fs := fb.nextSubscription(); fs.token != "alice" {
		t.Fatalf("alice's subscription authenticated as %q", fs.token)
	}
	if err := gw.Publish(ctx, "app", "feed", []byte("g"), AckPerMessage); err != nil {
		t.Fatal(err)
	}

	toks := fb.authTokens()
	// Alice: one publish stream (reused) and one subscribe stream. Bob:
	// one cache stream (reused). The gateway: its own streams only.
	if count(toks, "alice") != 2 || count(toks, "bob") != 1 {
		t.Fatalf("auths %q: want alice twice, bob once", toks)
	}
	if count(toks, goodToken) < 2 {
		t.Fatalf("auths %q: the gateway's streams did not use its token", toks)
	}
	fb.mu.Lock()
	conns := len(fb.conns)
	fb.mu.Unlock()
	if conns != 1 {
		t.Fatalf("%d connections, want the gateway's one", conns)
	}
	if got := len(fb.waitRecords("app", "feed", 3)); got != 3 {
		t.Fatalf("%d records", got)
	}
}

func TestRevokedHandleEndsOnlyItsOwnStreams(t *testing.T) {
	fb, gw := userFake(t)
	ctx := context.Background()
	alice, bob := handle(t, gw, "alice"), handle(t, gw, "bob")
	subscribe := func(c interface {
		Subscribe(context.Context, string, string) (*Subscription, error)
	}) (*Subscription, *fakeSub) {
		t.Helper()
		s, err := c.Subscribe(ctx, "app", "feed")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, fb.nextSubscription()
	}
	aSub, _ := subscribe(alice)
	bSub, bFake := subscribe(bob)
	gSub, gFake := subscribe(gw)
	if err := alice.Publish(ctx, "app", "feed", []byte("x"), AckPerMessage); err != nil {
		t.Fatal(err)
	}

	fb.revoke("alice")
	ctx5, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := aSub.Next(ctx5)
	if be := asBroker(t, err); be.Code != wire.CodeRevoked {
		t.Fatalf("alice's subscription ended with %v", err)
	}
	// A publish racing the revocation on alice's old publish stream may end
	// as outcome_unknown; the next one opens a stream and is refused.
	for attempt := 0; ; attempt++ {
		_, err = alice.PublishAcked(ctx5, "app", "feed", []byte("y"), AckPerMessage)
		be := asBroker(t, err)
		if be.Code == wire.CodeRevoked {
			break
		}
		if attempt == 2 || be.Retry != wire.RetryOutcomeUnknown {
			t.Fatalf("alice's publish after revocation: %v", err)
		}
	}
	if _, err := alice.Subscribe(ctx5, "app", "feed"); asBroker(t, err).Code != wire.CodeRevoked {
		t.Fatalf("alice's subscribe after revocation: %v", err)
	}

	// Bob and the gateway carry on over the same connection.
	bFake.send(t, 1, []byte("for-bob"))
	gFake.send(t, 1, []byte("for-gw"))
	if ev, err := bSub.Next(ctx5); err != nil || string(ev.Payload) != "for-bob" {
		t.Fatalf("bob: %q %v", ev.Payload, err)
	}
	if ev, err := gSub.Next(ctx5); err != nil || string(ev.Payload) != "for-gw" {
		t.Fatalf("gateway: %q %v", ev.Payload, err)
	}
	if err := bob.Publish(ctx5, "app", "feed", []byte("b"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	if err := gw.CachePut(ctx5, "app", "c", "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
}

// countingTokens hands out tokens from a list, counting the calls.
type countingTokens struct {
	mu    sync.Mutex
	calls int
	next  func(call int) (string, error)
}

func (p *countingTokens) Token(context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	return p.next(p.calls)
}

func (p *countingTokens) n() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

func TestTokenProviderConsultedPerNewStream(t *testing.T) {
	fb, gw := userFake(t)
	ctx := context.Background()
	var fail atomic.Bool
	prov := &countingTokens{next: func(call int) (string, error) {
		if fail.Load() {
			return "", errors.New("refresh failed")
		}
		if call == 1 {
			return "alice", nil
		}
		return "alice-2", nil // a refreshed token
	}}
	h, err := gw.WithIdentity("acme", prov)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if prov.n() != 0 {
		t.Fatal("WithIdentity opened a stream")
	}
	for range 3 {
		if err := h.Publish(ctx, "app", "feed", []byte("p"), AckPerMessage); err != nil {
			t.Fatal(err)
		}
	}
	if prov.n() != 1 {
		t.Fatalf("provider called %d times for one publish stream", prov.n())
	}
	if err := h.CachePut(ctx, "app", "c", "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.CacheGet(ctx, "app", "c", "k"); err != nil {
		t.Fatal(err)
	}
	if prov.n() != 2 {
		t.Fatalf("provider called %d times, want 2", prov.n())
	}
	if toks := fb.authTokens(); !slices.Contains(toks, "alice") || !slices.Contains(toks, "alice-2") {
		t.Fatalf("auths %q", toks)
	}
	fail.Store(true)
	if _, err := h.Subscribe(ctx, "app", "feed"); err == nil || !wasNotSent(err) {
		t.Fatalf("subscribe with a failing provider: %v", err)
	}
	if prov.n() != 3 {
		t.Fatalf("provider called %d times, want 3", prov.n())
	}
}

func TestHandleCloseLeavesGatewayOpen(t *testing.T) {
	fb, gw := userFake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	alice, err := gw.WithIdentityToken("acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	bob := handle(t, gw, "bob")
	sub, err := alice.Subscribe(ctx, "app", "feed")
	if err != nil {
		t.Fatal(err)
	}
	fb.nextSubscription()
	if err := alice.Publish(ctx, "app", "feed", []byte("a"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	if err := alice.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("subscription of a closed handle: %v", err)
	}
	if err := alice.Publish(ctx, "app", "feed", []byte("a"), AckPerMessage); !errors.Is(err, ErrClosed) {
		t.Fatalf("publish on a closed handle: %v", err)
	}
	if err := gw.Publish(ctx, "app", "feed", []byte("g"), AckPerMessage); err != nil {
		t.Fatalf("gateway after a handle closed: %v", err)
	}
	if err := bob.Publish(ctx, "app", "feed", []byte("b"), AckPerMessage); err != nil {
		t.Fatalf("other handle after a handle closed: %v", err)
	}

	// Closing the gateway closes its handles.
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bob.Publish(ctx, "app", "feed", []byte("b"), AckPerMessage); !errors.Is(err, ErrClosed) {
		t.Fatalf("handle after its gateway closed: %v", err)
	}
	if _, err := gw.WithIdentityToken("acme", "bob"); !errors.Is(err, ErrClosed) {
		t.Fatalf("WithIdentity on a closed client: %v", err)
	}
}

func TestWithIdentityArguments(t *testing.T) {
	_, gw := userFake(t)
	if _, err := gw.WithIdentity("", StaticToken("x")); err == nil {
		t.Fatal("empty tenant accepted")
	}
	if _, err := gw.WithIdentity("acme", nil); err == nil {
		t.Fatal("nil provider accepted")
	}
	if _, err := gw.WithIdentityToken("acme", ""); err == nil {
		t.Fatal("empty token accepted")
	}
}

// sdkGoroutines counts goroutines running this package's code.
func sdkGoroutines() int {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "sdk/felix.(*") && !strings.Contains(g, "_test.go") {
			n++
		}
	}
	return n
}

func TestHandleCloseLeavesNoGoroutines(t *testing.T) {
	fb, gw := userFake(t)
	ctx := context.Background()
	if err := gw.Publish(ctx, "ns", "s", []byte("x"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	before := sdkGoroutines()
	h, err := gw.WithIdentityToken("acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Publish(ctx, "ns", "s", []byte("x"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.CacheGet(ctx, "ns", "c", "k"); err != nil {
		t.Fatal(err)
	}
	sub, err := h.Subscribe(ctx, "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	fb.nextSubscription().send(t, 0, []byte("e"))
	next(t, sub)
	h.Close()
	deadline := time.Now().Add(5 * time.Second)
	for sdkGoroutines() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d client goroutines, %d before the handle:\n%s", sdkGoroutines(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := gw.Publish(ctx, "ns", "s", []byte("y"), AckPerMessage); err != nil {
		t.Fatalf("gateway after the handle closed: %v", err)
	}
}
