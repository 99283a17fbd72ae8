package broker

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

const withCounters = allFeatures | wire.FeatureCounters

func counterAdd(key string, delta int64, reqID uint64) *wire.CounterAdd {
	return &wire.CounterAdd{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, Delta: &delta, RequestID: reqID}
}

func counterGet(key string, reqID uint64) *wire.CounterGet {
	return &wire.CounterGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, RequestID: reqID}
}

// counterValue asserts m is the counter_value for reqID and returns its
// sum (nil: never written).
func counterValue(t *testing.T, m wire.Message, reqID uint64) *int64 {
	t.Helper()
	v, ok := m.(*wire.CounterValue)
	if !ok || v.RequestID != reqID {
		t.Fatalf("answer %#v, want counter_value for %d", m, reqID)
	}
	return v.Value
}

func wantSum(t *testing.T, got *int64, want int64) {
	t.Helper()
	if got == nil || *got != want {
		t.Fatalf("sum %v, want %d", got, want)
	}
}

// TestCountersOverTheWire: on a broker with storage, FEATURE_COUNTERS is
// advertised; adds answer the sum including them, a never-written counter
// reads as null (not 0), an overflow is refused and adds nothing, a
// read-only token reads but cannot add. (Restarts: core's counter store
// tests and e2e/counters_test.go.)
func TestCountersOverTheWire(t *testing.T) {
	cfg := testConfig()
	cfg.Durable.Fsync = "always"
	e := startDurable(t, cfg)
	if e.srv.serverFeatures()&wire.FeatureCounters == 0 {
		t.Fatal("FEATURE_COUNTERS not advertised with durable storage")
	}
	s := e.authed(e.dial(0), 0, withCounters, cacheAll)
	s.send(counterGet("hits", 1))
	if v := counterValue(t, s.recv(), 1); v != nil {
		t.Fatalf("never-written counter reads %d, want null", *v)
	}
	// Pipelined: every add is written before the first answer is read.
	for i, d := range []int64{5, -3, math.MaxInt64} {
		s.send(counterAdd("hits", d, uint64(10+i)))
	}
	// Answers of a log-backed cache come as each is ready: match by id.
	got := map[uint64]wire.Message{}
	for range 3 {
		m := s.recv()
		switch m := m.(type) {
		case *wire.CounterValue:
			got[m.RequestID] = m
		case *wire.ErrorMsg:
			got[*m.RequestID] = m
		}
	}
	wantSum(t, counterValue(t, got[10], 10), 5)
	wantSum(t, counterValue(t, got[11], 11), 2)
	if e := expectCode(t, got[12], wire.CodeInvalidRequest); e.Detail[wire.DetailReason] != "counter_overflow" {
		t.Fatalf("overflow refused with %v", e)
	}
	s.send(&wire.CounterAdd{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "hits", RequestID: 13})
	expectCode(t, s.recv(), wire.CodeInvalidRequest)
	s.send(counterAdd("zero", 0, 14))
	wantSum(t, counterValue(t, s.recv(), 14), 0)

	ro := e.authed(e.dial(0), 0, withCounters, "cache.read:cache:acme/prod/sessions")
	ro.send(counterGet("hits", 20))
	wantSum(t, counterValue(t, ro.recv(), 20), 2)
	ro.send(counterAdd("hits", 1, 21))
	expectCode(t, ro.recv(), wire.CodeForbidden)
}

// TestCountersNeedDurableStorage: a broker keeping its caches in memory
// does not advertise FEATURE_COUNTERS and answers counter ops as
// unsupported.
func TestCountersNeedDurableStorage(t *testing.T) {
	e := startEnv(t, testConfig())
	if e.srv.serverFeatures()&wire.FeatureCounters != 0 {
		t.Fatal("FEATURE_COUNTERS advertised without storage")
	}
	s := e.authed(e.dial(0), 0, withCounters, cacheAll)
	s.send(counterAdd("hits", 1, 1))
	if m, ok := s.recv().(*wire.Unsupported); !ok || m.MessageType() != "unsupported" {
		t.Fatalf("counter_add without storage answered %#v", m)
	}
}

// TestCountersThroughEitherBroker: concurrent adds to a key of the other
// broker's shard, through both brokers, are forwarded to its owner: the
// answers are distinct sums and the final sum is their total.
func TestCountersThroughEitherBroker(t *testing.T) {
	a, b := startStandard(t)
	key := cacheKeys()[1] // on b
	const clients, adds = 4, 10
	sums := make(chan int64, clients*adds)
	var wg sync.WaitGroup
	for i := range clients {
		e := []*env{a, b}[i%2]
		s := e.authed(e.dial(0), 0, withCounters, cacheAll)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range adds {
				s.send(counterAdd(key, 1, uint64(j+1)))
				if v, ok := s.recv().(*wire.CounterValue); ok && v.Value != nil {
					sums <- *v.Value
				}
			}
		}()
	}
	wg.Wait()
	close(sums)
	seen := map[int64]bool{}
	for v := range sums {
		if seen[v] || v < 1 || v > clients*adds {
			t.Fatalf("sum %d answered twice or out of range", v)
		}
		seen[v] = true
	}
	if len(seen) != clients*adds {
		t.Fatalf("%d adds answered, want %d", len(seen), clients*adds)
	}
	s := a.authed(a.dial(0), 0, withCounters, cacheAll)
	s.send(counterGet(key, 100))
	wantSum(t, counterValue(t, s.recv(), 100), clients*adds)
	c, _ := a.srv.resolveCache(testTenant, "prod", "sessions")
	if sum, ok, _ := c.CounterGetStaged(key); ok {
		t.Fatalf("the entry broker holds the counter (%d)", sum)
	}
}

// TestForwardedCounterAddLostIsOutcomeUnknown: a forwarded add whose
// answer is lost is answered outcome_unknown once and never sent to the
// owner again; a get in the same state is answered retryable.
func TestForwardedCounterAddLostIsOutcomeUnknown(t *testing.T) {
	a, b := startStandard(t)
	a.srv.fwd.timeout = 2 * time.Second
	var (
		mu    sync.Mutex
		calls int
	)
	started := make(chan struct{}, 1)
	hook := func(ctx context.Context, typ string) {
		mu.Lock()
		calls++
		mu.Unlock()
		started <- struct{}{}
		<-ctx.Done()
	}
	b.srv.fwd.callHook.Store(&hook)
	key := cacheKeys()[1] // on b
	s := a.authed(a.dial(0), 0, withCounters, cacheAll)
	s.send(counterAdd(key, 1, 1))
	<-started
	b.srv.Peer().Close()
	e := expectCode(t, s.recv(), wire.CodeShardUnavailable)
	if e.Retry != wire.RetryOutcomeUnknown {
		t.Fatalf("lost add refused %v, want outcome_unknown", e)
	}
	s.send(counterGet(key, 2))
	if e = expectCode(t, s.recv(), wire.CodeShardUnavailable); e.Retry == wire.RetryOutcomeUnknown {
		t.Fatalf("a get refused %v", e)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Fatalf("the owner was called %d times, want once", calls)
	}
}
