package felix

import (
	"context"
	"errors"
	"testing"
)

func TestClusterHandleFollowsTheGateway(t *testing.T) {
	opts := fakeOpts{flags: binaryFlags, tokens: map[string]bool{"alice": true}}
	f1, f2 := newFakeBroker(t, opts), newFakeBroker(t, opts)
	ctx := context.Background()
	gw, err := ConnectCluster(ctx, []string{f1.Addr(), f2.Addr()}, f1.config())
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	alice, err := gw.WithIdentityToken("acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if err := alice.Publish(ctx, "ns", "s", []byte("one"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	if count(f1.authTokens(), "alice") != 1 {
		t.Fatalf("first broker auths %q", f1.authTokens())
	}
	f1.mu.Lock()
	conns := len(f1.conns)
	f1.mu.Unlock()
	if conns != 1 {
		t.Fatalf("%d connections to the first broker, want the gateway's one", conns)
	}

	old := entryOf(gw)
	f1.Kill()
	<-old.conn.Context().Done()
	if err := alice.Publish(ctx, "ns", "s", []byte("two"), AckPerMessage); err != nil {
		t.Fatalf("publish after the gateway's broker died: %v", err)
	}
	if got := f2.records("ns", "s"); len(got) != 1 || string(got[0].payload) != "two" {
		t.Fatalf("second broker got %+v", got)
	}
	if count(f2.authTokens(), "alice") != 1 {
		t.Fatalf("second broker auths %q", f2.authTokens())
	}
	if gw.Addr() != f2.Addr() {
		t.Fatalf("gateway on %s, want the second broker", gw.Addr())
	}
	// The gateway itself moved along with the handle: one connection.
	if err := gw.Publish(ctx, "ns", "s", []byte("gw"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	f2.mu.Lock()
	conns = len(f2.conns)
	f2.mu.Unlock()
	if conns != 1 {
		t.Fatalf("%d connections to the second broker, want 1", conns)
	}

	// Closing the handle leaves the gateway; closing the gateway ends
	// every handle.
	sib, err := alice.WithIdentityToken("acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	alice.Close()
	if err := alice.Publish(ctx, "ns", "s", []byte("x"), AckPerMessage); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed handle: %v", err)
	}
	if err := gw.Publish(ctx, "ns", "s", []byte("gw2"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	if err := sib.Publish(ctx, "ns", "s", []byte("sib"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	gw.Close()
	if err := sib.Publish(ctx, "ns", "s", []byte("x"), AckPerMessage); !errors.Is(err, ErrClosed) {
		t.Fatalf("handle after the gateway closed: %v", err)
	}
	if _, err := gw.WithIdentityToken("acme", "alice"); !errors.Is(err, ErrClosed) {
		t.Fatalf("WithIdentity on a closed gateway: %v", err)
	}
}
