package felix

import (
	"context"
	"errors"
	"testing"

	"github.com/felixmq/felix/wire"
)

func TestClusterClientFailsOverToNextSeed(t *testing.T) {
	f1 := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	f2 := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	cfg := f1.config()
	ctx := context.Background()
	cc, err := ConnectCluster(ctx, []string{f1.Addr(), f2.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if cc.Addr() != f1.Addr() {
		t.Fatalf("connected to %s, want the first seed", cc.Addr())
	}
	if err := cc.Publish(ctx, "ns", "s", []byte("one"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	sub, err := cc.Subscribe(ctx, "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	f1.nextSubscription()

	old := entryOf(cc)
	f1.Kill()
	<-old.conn.Context().Done()

	if err := nextErr(t, sub); !errors.Is(err, ErrSubscriptionLost) {
		t.Fatalf("subscription on the dead connection: %v", err)
	}
	if err := cc.Publish(ctx, "ns", "s", []byte("two"), AckPerMessage); err != nil {
		t.Fatalf("publish after failover: %v", err)
	}
	if cc.Addr() != f2.Addr() {
		t.Fatalf("connected to %s, want the second seed", cc.Addr())
	}
	if got := f2.records("ns", "s"); len(got) != 1 || string(got[0].payload) != "two" {
		t.Fatalf("second broker got %+v", got)
	}
	if err := cc.CachePut(ctx, "ns", "c", "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Subscribe(ctx, "ns", "s"); err != nil {
		t.Fatal(err)
	}
	f2.nextSubscription()
	if err := cc.Finish(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestClusterClientReplacesConnectionKilledMidCall(t *testing.T) {
	f1 := newFakeBroker(t, fakeOpts{flags: binaryFlags, features: 0})
	f2 := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	ctx := context.Background()
	cc, err := ConnectCluster(ctx, []string{f1.Addr(), f2.Addr()}, f1.config())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	// The dead connection is noticed by the call itself (no wait for the
	// close to arrive first): a cache get is safe to retry elsewhere.
	f1.Kill()
	if _, _, err := cc.CacheGet(ctx, "ns", "c", "k"); err != nil {
		t.Fatalf("get across the failover: %v", err)
	}
	if cc.Addr() != f2.Addr() {
		t.Fatalf("on %s, want the second seed", cc.Addr())
	}
}

func TestConnectClusterSkipsBadSeed(t *testing.T) {
	f1 := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	f2 := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	cfg := f1.config()
	ctx := context.Background()
	// An unparsable first seed fails at once, without a network wait.
	cc, err := ConnectCluster(ctx, []string{"not-an-address", f2.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if cc.Addr() != f2.Addr() {
		t.Fatalf("on %s", cc.Addr())
	}
	if _, err := ConnectCluster(ctx, nil, cfg); err == nil {
		t.Fatal("no seeds accepted")
	}
	_ = f1
}

func TestClusterClientDoesNotResendAmbiguousPublish(t *testing.T) {
	f1 := newFakeBroker(t, fakeOpts{flags: binaryFlags, hold: make(chan struct{})})
	f2 := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	ctx := context.Background()
	cc, err := ConnectCluster(ctx, []string{f1.Addr(), f2.Addr()}, f1.config())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	errC := make(chan error, 1)
	go func() { errC <- cc.Publish(ctx, "ns", "hold", []byte("x"), AckPerMessage) }()
	f1.waitRecords("ns", "hold", 1)
	f1.Kill()
	be := asBroker(t, <-errC)
	if be.Code != wire.CodeInternal || be.Retry != wire.RetryOutcomeUnknown {
		t.Fatalf("got %+v", be)
	}
	if got := f2.records("ns", "hold"); len(got) != 0 {
		t.Fatalf("the ambiguous publish was re-sent: %+v", got)
	}
	if err := cc.Publish(ctx, "ns", "s", []byte("next"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	if cc.Addr() != f2.Addr() {
		t.Fatalf("on %s", cc.Addr())
	}
}

// entryOf returns cc's entry connection; the background topology loop
// may be replacing it, so it is read under the lock.
func entryOf(cc *ClusterClient) *Client {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.cur
}
