package felix

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// nextSharded returns the next event or notice.
func nextSharded(t *testing.T, ss *ShardedSubscription) (Event, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := ss.Next(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("ShardedSubscription.Next: nothing in 10s")
	}
	return ev, err
}

func TestSubscribeShardedMergesEveryShardAndResumesEach(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{subscribed: durableAnswer(0, 100)})
	cl.place(KindStream, "ns", "s", 0, 1, 2)
	cc := connectClusterTest(t, cl, 0)
	ctx := context.Background()
	ss, err := cc.SubscribeSharded(ctx, "ns", "s", ShardedOptions{Start: Earliest()})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	if ss.Shards() != 3 {
		t.Fatalf("%d shards", ss.Shards())
	}
	fs := make([]*fakeSub, 3)
	for i := range 3 {
		fs[i] = cl.node(i).nextSubscription()
		if *fs[i].msg.Shard != uint32(i) {
			t.Fatalf("b%d got a subscribe for shard %d", i, *fs[i].msg.Shard)
		}
		sendRange(t, fs[i], 0, 2)
	}
	got := map[uint32][]uint64{}
	for range 6 {
		ev, err := nextSharded(t, ss)
		if err != nil {
			t.Fatal(err)
		}
		got[ev.Shard] = append(got[ev.Shard], ev.Offset)
	}
	for i := range uint32(3) {
		if len(got[i]) != 2 || got[i][0] != 0 || got[i][1] != 1 {
			t.Fatalf("shard %d delivered %v", i, got[i])
		}
	}
	if p := ss.Positions(); len(p) != 3 || p[0] != 2 || p[1] != 2 || p[2] != 2 {
		t.Fatalf("positions %v", p)
	}

	// Shard 1 moves to b0: reported, resumed there after what it delivered.
	cl.place(KindStream, "ns", "s", 0, 0, 2)
	fs[1].moved(t, cl, 0, nil)
	moved := cl.node(0).nextSubscription()
	if got := startOf(t, moved); got != 2 || *moved.msg.Shard != 1 {
		t.Fatalf("shard 1 resumed at %d on shard %d", got, *moved.msg.Shard)
	}
	sendRange(t, moved, 2, 3)
	_, err = nextSharded(t, ss)
	var n *ShardNotice
	var movedErr *ShardMovedError
	if !errors.As(err, &n) || n.Kind != ShardMovedTo || n.Shard != 1 || n.From != 2 ||
		!errors.As(err, &movedErr) || movedErr.NodeID != "b0" {
		t.Fatalf("want a moved notice for shard 1, got %v", err)
	}
	if ev, err := nextSharded(t, ss); err != nil || ev.Shard != 1 || ev.Offset != 2 {
		t.Fatalf("after the move: %+v %v", ev, err)
	}

	// Shard 2 is refused for good: reported, the others carry on.
	if err := writeMsg(fs[2].es, wire.NewError(wire.CodeForbidden, "gone").ErrorMessage(true)); err != nil {
		t.Fatal(err)
	}
	_, err = nextSharded(t, ss)
	if !errors.As(err, &n) || n.Kind != ShardLost || !n.Ended || n.Shard != 2 || asBroker(t, err).Code != wire.CodeForbidden {
		t.Fatalf("want an ended notice for shard 2, got %v", err)
	}
	sendRange(t, fs[0], 2, 3)
	if ev, err := nextSharded(t, ss); err != nil || ev.Shard != 0 || ev.Offset != 2 {
		t.Fatalf("shard 0 after shard 2 ended: %+v %v", ev, err)
	}

	// Positions resume a new sharded subscription where this one stopped.
	pos := ss.Positions()
	ss.Close()
	if _, err := ss.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	cl.place(KindStream, "ns", "s", 0, 1, 2)
	ss2, err := cc.SubscribeSharded(ctx, "ns", "s", ShardedOptions{Start: Earliest(), Positions: pos})
	if err != nil {
		t.Fatal(err)
	}
	defer ss2.Close()
	starts := map[uint32]uint64{}
	for i := range 3 {
		s := cl.node(i).nextSubscription()
		starts[*s.msg.Shard] = startOf(t, s)
	}
	if starts[0] != 3 || starts[1] != 3 || starts[2] != 2 {
		t.Fatalf("resumed at %v, want shard 0 and 1 at 3, shard 2 at 2", starts)
	}
}

func TestSubscribeShardedOnAPlainBrokerReadsShardZero(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	cc := connectClusterFast(t, fb.config(), fb.Addr())
	ss, err := cc.SubscribeSharded(context.Background(), "ns", "s", ShardedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	if ss.Shards() != 1 {
		t.Fatalf("%d shards", ss.Shards())
	}
	fb.nextSubscription().send(t, 0, []byte("x"))
	if ev, err := nextSharded(t, ss); err != nil || string(ev.Payload) != "x" {
		t.Fatalf("%+v %v", ev, err)
	}
}

func TestClusterClientCloseLeavesNoGoroutines(t *testing.T) {
	cl := newFakeCluster(t, 3, fakeOpts{subscribed: durableAnswer(0, 100)})
	cl.place(KindStream, "ns", "s", 0, 1, 2)
	before := runtime.NumGoroutine()
	cc, err := ConnectCluster(context.Background(), cl.seeds(0), cl.node(0).config())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 6 {
		if err := cc.PublishKeyed(ctx, "ns", "s", []byte{byte(i)}, []byte("v"), AckPerMessage); err != nil {
			t.Fatal(err)
		}
	}
	ss, err := cc.SubscribeSharded(ctx, "ns", "s", ShardedOptions{Start: Earliest()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		cl.node(i).nextSubscription()
	}
	ss.Close()
	cc.Close()
	waitGoroutinesAtMost(t, before)
}

func TestSubscribeShardedReportsAShardRecoveredAfterItsConnectionDied(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{subscribed: durableAnswer(0, 100)})
	cl.place(KindStream, "ns", "s", 0, 1)
	cc := connectClusterTest(t, cl, 0)
	ss, err := cc.SubscribeSharded(context.Background(), "ns", "s", ShardedOptions{Start: AtOffset(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cl.node(0).nextSubscription()
	fs := cl.node(1).nextSubscription()
	sendRange(t, fs, 0, 2)
	for range 2 {
		if _, err := nextSharded(t, ss); err != nil {
			t.Fatal(err)
		}
	}
	cl.node(1).dropConns()
	again := cl.node(1).nextSubscription()
	if got := startOf(t, again); got != 2 {
		t.Fatalf("resubscribed at %d", got)
	}
	_, err = nextSharded(t, ss)
	var n *ShardNotice
	if !errors.As(err, &n) || n.Kind != ShardRecovered || n.Shard != 1 || n.From != 2 || !errors.Is(err, ErrSubscriptionLost) {
		t.Fatalf("want a recovered notice for shard 1, got %v", err)
	}
}

func TestSubscribeShardedAsksAgainWhileAShardIsNotReady(t *testing.T) {
	var mu sync.Mutex
	refusals := 2
	cl := newFakeCluster(t, 1, fakeOpts{subscribed: func(m *wire.Subscribe) wire.Message {
		mu.Lock()
		defer mu.Unlock()
		if refusals > 0 {
			refusals--
			return wire.NewError(wire.CodeShardUnavailable, "opening").ErrorMessage(true)
		}
		return &wire.Subscribed{}
	}})
	cl.place(KindStream, "ns", "s", 0)
	cc := connectClusterTest(t, cl, 0)
	ss, err := cc.SubscribeSharded(context.Background(), "ns", "s", ShardedOptions{})
	if err != nil {
		t.Fatalf("subscribe after two refusals: %v", err)
	}
	defer ss.Close()
	cl.node(0).nextSubscription()
}
