package core

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

func TestParseQueuePolicy(t *testing.T) {
	for s, want := range map[string]QueuePolicy{"": DropNew, "drop_new": DropNew, "block": Block, "drop_old": DropOld} {
		p, err := ParseQueuePolicy(s)
		if err != nil || p != want {
			t.Errorf("ParseQueuePolicy(%q) = %v, %v", s, p, err)
		}
		if s != "" && p.String() != s {
			t.Errorf("%v.String() = %q", p, p.String())
		}
	}
	if _, err := ParseQueuePolicy("drop_everything"); err == nil {
		t.Error("unknown policy accepted")
	}
}

func TestApplyStreamUpdatesPolicyInPlace(t *testing.T) {
	b, st := newTestStream(t, Config{}, 2, "")
	sh := shard0(t, st)
	s := subscribe(t, sh, SubscribeOptions{})
	publish(t, sh, payloads(1, "x"))
	if st.Policy() != DropNew {
		t.Fatalf("default policy %v", st.Policy())
	}
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s", Shards: 2, SubQueuePolicy: "block"}); err != nil {
		t.Fatal(err)
	}
	st2, _ := b.Stream(st.Key())
	if st2 != st || st.Policy() != Block || sh.NextOffset() != 1 {
		t.Fatalf("update replaced the stream or lost state: same %v policy %v next %d", st2 == st, st.Policy(), sh.NextOffset())
	}
	if s.Err() != nil {
		t.Fatalf("subscriber ended by a policy update: %v", s.Err())
	}
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s", SubQueuePolicy: "nope"}); err == nil {
		t.Fatal("bad policy accepted")
	}
}

func TestApplyStreamShardChangeReplaces(t *testing.T) {
	b, st := newTestStream(t, Config{}, 2, "")
	s := subscribe(t, shard0(t, st), SubscribeOptions{})
	publish(t, shard0(t, st), payloads(1, "x"))
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s", Shards: 4}); err != nil {
		t.Fatal(err)
	}
	st2, _ := b.Stream(st.Key())
	if st2 == st || st2.Shards() != 4 {
		t.Fatalf("shard change: same %v shards %d", st2 == st, st2.Shards())
	}
	// What was queued is still readable, then the deletion is reported.
	if _, err := s.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(context.Background()); !errors.Is(err, ErrStreamDeleted) {
		t.Fatalf("old subscriber: %v", err)
	}
	if _, err := shard0(t, st).Publish(context.Background(), payloads(1, "x"), ""); !errors.Is(err, &wire.Error{Code: wire.CodeNotFound}) {
		t.Fatalf("publish to replaced stream: %v", err)
	}
}

func TestRemoveStreamEndsSubscribers(t *testing.T) {
	b, st := newTestStream(t, Config{}, 1, "")
	sh := shard0(t, st)
	s := subscribe(t, sh, SubscribeOptions{})
	got := make(chan error, 1)
	go func() {
		_, err := s.Next(context.Background())
		got <- err
	}()
	b.RemoveStream(st.Key())
	if err := <-got; !errors.Is(err, ErrStreamDeleted) {
		t.Fatalf("Next after removal: %v", err)
	}
	<-s.Done()
	if _, ok := b.Stream(st.Key()); ok {
		t.Fatal("stream still registered")
	}
	if _, err := sh.Subscribe(SubscribeOptions{}); err == nil {
		t.Fatal("subscribe to a removed stream accepted")
	}
}

func TestRemoveTenantAndNamespace(t *testing.T) {
	b := NewBroker(Config{})
	t.Cleanup(b.Close)
	for _, k := range []StreamKey{{"a", "x", "s"}, {"a", "y", "s"}, {"b", "x", "s"}} {
		if err := b.ApplyStream(wire.StreamSpec{TenantID: k.Tenant, Namespace: k.Namespace, Stream: k.Stream}); err != nil {
			t.Fatal(err)
		}
		if err := b.ApplyCache(wire.CacheSpec{TenantID: k.Tenant, Namespace: k.Namespace, Cache: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	b.RemoveNamespace("a", "x")
	has := func(t, ns string) (bool, bool) {
		_, s := b.Stream(StreamKey{t, ns, "s"})
		_, c := b.Cache(CacheKey{t, ns, "c"})
		return s, c
	}
	if s, c := has("a", "x"); s || c {
		t.Error("namespace a/x not removed")
	}
	if s, c := has("a", "y"); !s || !c {
		t.Error("namespace a/y removed")
	}
	b.RemoveTenant("a")
	if s, c := has("a", "y"); s || c {
		t.Error("tenant a not removed")
	}
	if s, c := has("b", "x"); !s || !c {
		t.Error("tenant b removed")
	}
	b.RemoveCache(CacheKey{"b", "x", "c"})
	if _, c := has("b", "x"); c {
		t.Error("cache not removed")
	}
}

func TestApplyRejectsBadSpecs(t *testing.T) {
	b := NewBroker(Config{})
	defer b.Close()
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "", Stream: "s"}); err == nil {
		t.Error("empty namespace accepted")
	}
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "n", Stream: "s", Shards: MaxStreamShards + 1}); err == nil {
		t.Error("too many shards accepted")
	}
	if err := b.ApplyCache(wire.CacheSpec{TenantID: "t", Namespace: "n"}); err == nil {
		t.Error("empty cache name accepted")
	}
}

func TestNoGoroutinesOutliveClose(t *testing.T) {
	baseline := runtime.NumGoroutine()
	b := NewBroker(Config{})
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "n", Stream: "s", Shards: 2, SubQueuePolicy: "block"}); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stream(StreamKey{"t", "n", "s"})
	sh, _ := st.Shard(1)
	var wg sync.WaitGroup
	for range 4 {
		s, err := sh.Subscribe(SubscribeOptions{Capacity: 1})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for {
				if _, err := s.Next(context.Background()); err != nil {
					return
				}
			}
		})
	}
	stalled, _ := sh.Subscribe(SubscribeOptions{Capacity: 1})
	publish(t, sh, payloads(1, "x"))
	wg.Go(func() { sh.Publish(context.Background(), payloads(1, "y"), "") }) // waits on stalled
	for stalled.Err() == nil {
		if n, _ := stalled.Depth(); n == 1 && sh.NextOffset() == 2 {
			break
		}
		runtime.Gosched()
	}
	b.Close()
	wg.Wait()
	if !errors.Is(stalled.Err(), ErrSubscriberClosed) {
		t.Fatalf("subscriber after Close: %v", stalled.Err())
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > baseline && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > baseline {
		t.Fatalf("%d goroutines after Close, %d before", n, baseline)
	}
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "n", Stream: "s"}); err == nil {
		t.Fatal("apply after Close accepted")
	}
}

func TestSubscriberReadyAndContext(t *testing.T) {
	_, st := newTestStream(t, Config{}, 1, "")
	sh := shard0(t, st)
	s := subscribe(t, sh, SubscribeOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context: %v", err)
	}
	publish(t, sh, payloads(1, "a"))
	publish(t, sh, payloads(1, "b"))
	<-s.Ready()
	if got := drain(s); len(got) != 2 {
		t.Fatalf("drained %d after Ready", len(got))
	}
	s.Close()
	s.Close() // idempotent
	if sh.Subscribers() != 0 {
		t.Fatal("closed subscriber still registered")
	}
	publish(t, sh, payloads(1, "c"))
	if n, _ := s.Depth(); n != 0 || s.Dropped() != 0 {
		t.Fatal("closed subscriber still receives")
	}
	if a, b := newTestSubscriberIDs(t, sh); a == b {
		t.Fatal("subscriber ids repeat")
	}
}

func newTestSubscriberIDs(t *testing.T, sh *Shard) (uint64, uint64) {
	a := subscribe(t, sh, SubscribeOptions{})
	b := subscribe(t, sh, SubscribeOptions{})
	return a.ID(), b.ID()
}
