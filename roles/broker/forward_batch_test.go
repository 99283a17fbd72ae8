package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// BenchmarkForwardedCachePut compares cache puts served by the broker
// the client reached (local) with the same through the other broker
// (forwarded), with 64 requests in flight on one client stream, as a
// pipelining SDK keeps them.
func BenchmarkForwardedCachePut(b *testing.B) {
	a, o := startStandard(b)
	key := cacheKeys()[1] // on o
	value := make([]byte, 100)
	const inFlight = 64
	for _, tc := range []struct {
		name string
		via  *env
	}{{"local", o}, {"forwarded", a}} {
		s := tc.via.authed(tc.via.dial(0), 0, allFeatures, cacheAll)
		b.Run(tc.name+"/inflight64", func(b *testing.B) {
			id, out := uint64(0), 0
			put := func() {
				id++
				out++
				s.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, Value: value, RequestID: id})
			}
			recv := func() {
				if _, ok := s.recv().(*wire.CacheOK); !ok {
					b.Fatal("refused")
				}
				out--
			}
			for b.Loop() {
				if out == inFlight {
					recv()
				}
				put()
			}
			for out > 0 {
				recv()
			}
		})
	}
}

// queued counts the forwards an entry broker holds queued, not yet sent.
func queued[T any](qs *fwdQueues[T]) int {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	n := 0
	for _, q := range qs.m {
		n += len(q.items)
	}
	return n
}

// holdFirstCall makes the first peer call e serves wait until release is
// closed (entered receives once it is there), and counts the calls by
// type.
func holdFirstCall(t testing.TB, e *env, release chan struct{}) (entered <-chan struct{}, calls func(typ string) int) {
	in := make(chan struct{}, 1)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	var (
		mu sync.Mutex
		n  = map[string]int{}
	)
	hook := func(ctx context.Context, typ string) {
		mu.Lock()
		n[typ]++
		first := len(n) == 1 && n[typ] == 1
		mu.Unlock()
		if first {
			in <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	}
	e.srv.fwd.callHook.Store(&hook)
	return in, func(typ string) int {
		mu.Lock()
		defer mu.Unlock()
		return n[typ]
	}
}

func TestForwardedPublishesArePipelinedInOrder(t *testing.T) {
	a, b := startStandard(t)
	bqc := b.dial(0)
	sub := b.subscribe(bqc, b.authed(bqc, 0, allFeatures, pubAll), "log")
	release := make(chan struct{})
	entered, calls := holdFirstCall(t, b, release)

	// Acked and fire-and-forget publishes mixed; all but the first queue
	// up behind the first forward, which the owner holds.
	s := a.authed(a.dial(0), durableFlags, durableFeatures, "stream.publish:*")
	const n = 300
	acked := func(i int) bool { return i%3 == 2 }
	for i := range n {
		s.write(binPublish("log", acked(i), uint64(i+1), numbered(i)))
		if i == 0 {
			<-entered
		}
	}
	waitFor(t, "the publishes to queue", func() bool { return queued(&a.srv.fwd.pubQ) == n-1 })
	close(release)
	for i := range n {
		if !acked(i) {
			continue
		}
		ok, isOK := s.recv().(*wire.PublishOK)
		if !isOK || ok.RequestID != uint64(i+1) || ok.Offset == nil || *ok.Offset != uint64(i) {
			t.Fatalf("answer to publish %d: %#v", i, ok)
		}
	}
	checkOrder(t, sub.payloads(n), n)
	// The first alone, the other 299 in two batches (fwdBatchMax).
	if one, batches := calls(TypeFwdPublish), calls(TypeFwdPublishBatch); one != 1 || batches != 2 {
		t.Fatalf("%d fwd_publish and %d fwd_publish_batch calls, want 1 and 2", one, batches)
	}
	if got := b.metric("felix_broker_forwards_received_total"); got != n {
		t.Fatalf("b received %v forwards, want %d", got, n)
	}
	if got := a.metric("felix_broker_forwarded_publishes_total"); got != n {
		t.Fatalf("a forwarded %v publishes, want %d", got, n)
	}
}

func TestLinkDyingUnderABatchAnswersEachPublishOnce(t *testing.T) {
	a, b := startStandard(t)
	// The link's end may reach a only as the call's deadline.
	a.srv.fwd.timeout = 2 * time.Second
	release, started := make(chan struct{}), make(chan struct{}, 1)
	var calls atomic.Int32
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	hook := func(ctx context.Context, _ string) {
		if calls.Add(1) == 1 {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return
		}
		started <- struct{}{}
		<-ctx.Done()
	}
	b.srv.fwd.callHook.Store(&hook)
	s := a.authed(a.dial(0), 0, allFeatures, pubAll)
	const n = 10
	for i := range n {
		s.write(binPublish("log", true, uint64(i+1), numbered(i)))
		if i == 0 {
			waitFor(t, "the first forward to reach b", func() bool { return calls.Load() == 1 })
		}
	}
	waitFor(t, "the publishes to queue", func() bool { return queued(&a.srv.fwd.pubQ) == n-1 })
	close(release)
	<-started // the other nine are at the owner, in one call
	b.srv.Peer().Close()
	if ok, isOK := s.recv().(*wire.PublishOK); !isOK || ok.RequestID != 1 {
		t.Fatalf("first answer %#v", ok)
	}
	for i := 2; i <= n; i++ {
		pe, ok := s.recv().(*wire.PublishError)
		if !ok || pe.RequestID != uint64(i) || pe.Code != wire.CodeShardUnavailable || pe.Retry != wire.RetryOutcomeUnknown {
			t.Fatalf("answer %d: %#v", i, pe)
		}
	}
	// Exactly one answer each: the next thing on the stream is the
	// answer to the next publish, never sent (retry).
	s.write(binPublish("log", true, 100, numbered(n)))
	pe, ok := s.recv().(*wire.PublishError)
	if !ok || pe.RequestID != 100 || pe.Retry != wire.RetryRetry {
		t.Fatalf("answer after the link died: %#v", pe)
	}
	if got := b.metric("felix_publish_messages_total"); got != 1 {
		t.Fatalf("b published %v messages, want 1", got)
	}
}

func TestSlowForwardedCacheAnswerDoesNotHoldUpTheStream(t *testing.T) {
	a, b := startStandard(t)
	release := make(chan struct{})
	entered, _ := holdFirstCall(t, b, release)
	keys := cacheKeys() // keys[0] on a, keys[1] on b
	s := a.authed(a.dial(0), 0, allFeatures, cacheAll)
	s.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: keys[1], Value: []byte("far"), RequestID: 1})
	<-entered
	// The stream reads and serves the next request while the forward
	// waits at b.
	s.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: keys[0], Value: []byte("near"), RequestID: 2})
	if ok, isOK := s.recv().(*wire.CacheOK); !isOK || ok.RequestID != 2 {
		t.Fatalf("first answer %#v, want the local put's", ok)
	}
	close(release)
	if ok, isOK := s.recv().(*wire.CacheOK); !isOK || ok.RequestID != 1 {
		t.Fatalf("second answer %#v, want the forwarded put's", ok)
	}
}

func TestPipelinedCacheForwardsKeepTheirOrder(t *testing.T) {
	a, b := startStandard(t)
	release := make(chan struct{})
	entered, calls := holdFirstCall(t, b, release)
	key := cacheKeys()[1] // on b
	s := a.authed(a.dial(0), 0, allFeatures, cacheAll)
	const n = 100
	for i := range n {
		s.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, Value: []byte(fmt.Sprintf("v%d", i)), RequestID: uint64(i + 1)})
		if i == 0 {
			<-entered
		}
	}
	s.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, RequestID: n + 1})
	waitFor(t, "the requests to queue", func() bool { return queued(&a.srv.fwd.cacheQ) == n })
	close(release)
	for i := range n {
		if ok, isOK := s.recv().(*wire.CacheOK); !isOK || ok.RequestID != uint64(i+1) {
			t.Fatalf("answer %d: %#v", i, ok)
		}
	}
	if v, ok := s.recv().(*wire.CacheValue); !ok || v.RequestID != n+1 || string(v.Value) != fmt.Sprintf("v%d", n-1) {
		t.Fatalf("get after the puts: %#v", v)
	}
	if one, batches := calls(TypeFwdCache), calls(TypeFwdCacheBatch); one != 1 || batches != 1 {
		t.Fatalf("%d fwd_cache and %d fwd_cache_batch calls, want 1 and 1", one, batches)
	}
	if got := a.metric("felix_broker_forwarded_cache_ops_total"); got != n+1 {
		t.Fatalf("a forwarded %v cache operations, want %d", got, n+1)
	}
}

func TestFwdQueuesSendInOrderOneCallAtATime(t *testing.T) {
	var (
		qs       fwdQueues[int]
		inFlight [2]atomic.Int32
		mu       sync.Mutex
		sent     [2][]int
		done     = make(chan struct{}, 64)
	)
	const n = 2000
	take := func(q []int) int { return min(len(q), 7) }
	sender := func(key int) func([]int) {
		return func(batch []int) {
			if len(batch) > 7 {
				t.Errorf("a batch of %d", len(batch))
			}
			if inFlight[key].Add(1) != 1 {
				t.Error("two calls in flight on one channel")
			}
			if batch[0]%3 == 0 {
				time.Sleep(50 * time.Microsecond)
			}
			mu.Lock()
			sent[key] = append(sent[key], batch...)
			all := len(sent[0]) + len(sent[1])
			mu.Unlock()
			inFlight[key].Add(-1)
			if all == 2*n {
				done <- struct{}{}
			}
		}
	}
	var wg sync.WaitGroup
	for key := range 2 {
		wg.Go(func() {
			for i := range n {
				qs.push(key, i, take, sender(key))
				if i%100 == 0 {
					time.Sleep(100 * time.Microsecond) // let the queue empty now and then
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("not everything was sent")
	}
	mu.Lock()
	defer mu.Unlock()
	for key := range 2 {
		for i, v := range sent[key] {
			if v != i {
				t.Fatalf("channel %d: item %d sent as the %dth", key, v, i)
			}
		}
	}
	waitFor(t, "the queues to be dropped", func() bool {
		qs.mu.Lock()
		defer qs.mu.Unlock()
		return len(qs.m) == 0
	})
}

func TestOwnerWithoutBatchesGetsEachForwardAlone(t *testing.T) {
	a, b := startStandard(t)
	b.srv.fwd.noBatches.Store(true) // as a broker of an earlier release
	bqc := b.dial(0)
	sub := b.subscribe(bqc, b.authed(bqc, 0, allFeatures, pubAll), "log")
	// The first fwd_publish and the first fwd_cache wait until release,
	// so the others queue behind them and go as batches, refused.
	release, entered := make(chan struct{}), make(chan struct{}, 2)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	var (
		mu    sync.Mutex
		count = map[string]int{}
	)
	calls := func(typ string) int {
		mu.Lock()
		defer mu.Unlock()
		return count[typ]
	}
	hook := func(ctx context.Context, typ string) {
		mu.Lock()
		count[typ]++
		first := count[typ] == 1 && (typ == TypeFwdPublish || typ == TypeFwdCache)
		mu.Unlock()
		if first {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	}
	b.srv.fwd.callHook.Store(&hook)
	s := a.authed(a.dial(0), 0, allFeatures, pubAll, cacheAll)
	const n = 20
	for i := range n {
		s.write(binPublish("log", true, uint64(i+1), numbered(i)))
		if i == 0 {
			<-entered
		}
	}
	key := cacheKeys()[1] // on b
	for i := range n {
		s.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, Value: []byte(fmt.Sprintf("v%d", i)), RequestID: uint64(100 + i)})
		if i == 0 {
			<-entered
		}
	}
	waitFor(t, "the requests to queue", func() bool {
		return queued(&a.srv.fwd.pubQ) == n-1 && queued(&a.srv.fwd.cacheQ) == n-1
	})
	close(release)
	next := map[bool]int{}
	for range 2 * n {
		switch m := s.recv().(type) {
		case *wire.PublishOK:
			if m.RequestID != uint64(next[false]+1) {
				t.Fatalf("publish answer %d, want %d", m.RequestID, next[false]+1)
			}
			next[false]++
		case *wire.CacheOK:
			if m.RequestID != uint64(100+next[true]) {
				t.Fatalf("cache answer %d, want %d", m.RequestID, 100+next[true])
			}
			next[true]++
		default:
			t.Fatalf("answer %#v", m)
		}
	}
	checkOrder(t, sub.payloads(n), n)
	if calls(TypeFwdPublishBatch) != 1 || calls(TypeFwdCacheBatch) != 1 || calls(TypeFwdPublish) != n || calls(TypeFwdCache) != n {
		t.Fatalf("calls: %d fwd_publish_batch, %d fwd_cache_batch, %d fwd_publish, %d fwd_cache",
			calls(TypeFwdPublishBatch), calls(TypeFwdCacheBatch), calls(TypeFwdPublish), calls(TypeFwdCache))
	}
}
