package felix

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A broker that stops answering (frozen, or killed where nothing tells
// the client) is found out by the probe after a call times out: its
// connection is dropped and its address is not dialled for a while, so
// the next publish goes through the entry broker at once.
func TestAnUnansweredProbeDropsASilentBrokersConnection(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{})
	cl.place(KindStream, "ns", "s", 1)
	cc := connectClusterTest(t, cl, 0)
	learnOwners(t, cc, KindStream, "ns", "s")
	ctx := context.Background()
	if _, err := cc.PublishAcked(ctx, "ns", "s", []byte("a"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	owner := cl.node(1).Addr()
	before := probesFailed.Get()

	cl.node(1).mute()
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := cc.PublishAcked(tctx, "ns", "s", []byte("lost"), AckPerMessage)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish to a silent broker: %v, want the deadline", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for probesFailed.Get() == before {
		if time.Now().After(deadline) {
			t.Fatal("the silent broker's connection was not dropped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := cc.clientAt(ctx, owner); err == nil {
		t.Fatal("the silent broker's address is dialled again at once")
	}
	// The shard moved meanwhile; the next publish reaches a live broker
	// without waiting for anything.
	cl.place(KindStream, "ns", "s", 2)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := cc.PublishAcked(pctx, "ns", "s", []byte("b"), AckPerMessage); err != nil {
		t.Fatalf("publish after the probe: %v", err)
	}
	if n := len(cl.node(0).records("ns", "s")) + len(cl.node(2).records("ns", "s")); n != 1 {
		t.Fatalf("%d records at the live brokers, want 1", n)
	}
}

// A broker that is alive but slow to answer one call keeps its
// connection: the probe gets an answer.
func TestAProbeAnsweredKeepsTheConnection(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	cl := newFakeCluster(t, 2, fakeOpts{hold: hold})
	cl.place(KindStream, "ns", "hold", 1)
	cc := connectClusterTest(t, cl, 0)
	learnOwners(t, cc, KindStream, "ns", "hold")
	before := probesFailed.Get()
	tctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := cc.PublishAcked(tctx, "ns", "hold", []byte("slow"), AckPerMessage)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("held publish: %v, want the deadline", err)
	}
	time.Sleep(probeTimeout + 500*time.Millisecond)
	if probesFailed.Get() != before {
		t.Fatal("a live broker's connection was dropped")
	}
	c, err := cc.clientAt(context.Background(), cl.node(1).Addr())
	if err != nil || c.dead() {
		t.Fatalf("the live broker's connection: %v", err)
	}
}
