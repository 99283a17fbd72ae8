package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

const withVersions = allFeatures | wire.FeatureCacheConditional

func putIf(key, value string, cond wire.CacheCondition, reqID uint64) *wire.CachePutIf {
	return &wire.CachePutIf{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, Value: []byte(value),
		Condition: &cond, RequestID: reqID}
}

func deleteIf(key string, version, reqID uint64) *wire.CacheDeleteIf {
	return &wire.CacheDeleteIf{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, Version: &version, RequestID: reqID}
}

func condResult(t *testing.T, m wire.Message, reqID uint64) *wire.CacheConditionResult {
	t.Helper()
	r, ok := m.(*wire.CacheConditionResult)
	if !ok || r.RequestID != reqID {
		t.Fatalf("answer %#v, want cache_condition_result for %d", m, reqID)
	}
	return r
}

func cacheValue(t *testing.T, m wire.Message, reqID uint64) *wire.CacheValue {
	t.Helper()
	v, ok := m.(*wire.CacheValue)
	if !ok || v.RequestID != reqID {
		t.Fatalf("answer %#v, want cache_value for %d", m, reqID)
	}
	return v
}

func versionOf(v *wire.CacheValue) any {
	if v.Version == nil {
		return nil
	}
	return *v.Version
}

func TestCacheConditionalOverTheWire(t *testing.T) {
	e := startEnv(t, testConfig())
	if e.srv.serverFeatures()&wire.FeatureCacheConditional == 0 {
		t.Fatal("FEATURE_CACHE_CONDITIONAL not advertised")
	}
	qc := e.dial(0)
	s := e.authed(qc, 0, withVersions, cacheAll)
	// Pipelined: every request is written before the first answer is read.
	s.send(putIf("k", "v1", wire.CacheCondition{Absent: true}, 1))
	s.send(putIf("k", "v2", wire.CacheCondition{Absent: true}, 2))
	s.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "k", RequestID: 3})
	won := condResult(t, s.recv(), 1)
	if !won.Applied || won.Version == nil {
		t.Fatalf("put_if absent on an absent key: %+v", won)
	}
	if r := condResult(t, s.recv(), 2); r.Applied || r.Version == nil || *r.Version != *won.Version {
		t.Fatalf("put_if absent on a live key: %+v, want refused at %d", r, *won.Version)
	}
	if v := cacheValue(t, s.recv(), 3); string(v.Value) != "v1" || versionOf(v) != *won.Version {
		t.Fatalf("get with the bit: %q at %v, want v1 at %d", v.Value, versionOf(v), *won.Version)
	}
	s.send(putIf("k", "v3", wire.CacheCondition{Version: *won.Version}, 4))
	next := condResult(t, s.recv(), 4)
	if !next.Applied || *next.Version <= *won.Version {
		t.Fatalf("put_if at the version: %+v", next)
	}
	s.send(deleteIf("k", *won.Version, 5))
	if r := condResult(t, s.recv(), 5); r.Applied || *r.Version != *next.Version {
		t.Fatalf("delete_if at a stale version: %+v, want refused at %d", r, *next.Version)
	}
	s.send(deleteIf("k", *next.Version, 6))
	if r := condResult(t, s.recv(), 6); !r.Applied || r.Version != nil {
		t.Fatalf("delete_if at the version: %+v", r)
	}
	s.send(putIf("k", "v", wire.CacheCondition{Version: *next.Version}, 7))
	if r := condResult(t, s.recv(), 7); r.Applied || r.Version != nil {
		t.Fatalf("put_if at a version of an absent key: %+v, want refused without a version", r)
	}
	s.send(&wire.CacheGetVersioned{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "k", RequestID: 8})
	if v := cacheValue(t, s.recv(), 8); v.Value != nil || v.Version != nil {
		t.Fatalf("versioned get of an absent key: %#v", v)
	}
	s.send(&wire.CachePutIf{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "k", Value: []byte("v"), RequestID: 9})
	expectCode(t, s.recv(), wire.CodeInvalidRequest)

	// Without the bit a get's answer carries no version; a versioned get's
	// does, and a read-only token may read but not write conditionally.
	s.send(putIf("k", "v", wire.CacheCondition{Absent: true}, 10))
	at := *condResult(t, s.recv(), 10).Version
	ro := e.authed(qc, 0, allFeatures, "cache.read:cache:acme/prod/sessions")
	ro.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "k", RequestID: 11})
	if v := cacheValue(t, ro.recv(), 11); string(v.Value) != "v" || v.Version != nil {
		t.Fatalf("get without the bit: %#v", v)
	}
	ro.send(&wire.CacheGetVersioned{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "k", RequestID: 12})
	if v := cacheValue(t, ro.recv(), 12); string(v.Value) != "v" || versionOf(v) != at {
		t.Fatalf("versioned get: %#v, want version %d", v, at)
	}
	ro.send(putIf("k", "x", wire.CacheCondition{Version: at}, 13))
	expectCode(t, ro.recv(), wire.CodeForbidden)
	ro.send(deleteIf("k", at, 14))
	expectCode(t, ro.recv(), wire.CodeForbidden)
}

// Several clients race put_if absent on one key of the other broker's
// shard, through either broker: exactly one wins, and every loser is
// told the winner's version.
func TestConditionalWritesThroughEitherBroker(t *testing.T) {
	a, b := startStandard(t)
	key := cacheKeys()[1] // on b
	const clients = 6
	results := make([]*wire.CacheConditionResult, clients)
	var wg sync.WaitGroup
	for i := range clients {
		e := []*env{a, b}[i%2]
		s := e.authed(e.dial(0), 0, withVersions, cacheAll)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.send(putIf(key, string(rune('a'+i)), wire.CacheCondition{Absent: true}, uint64(i+1)))
			results[i], _ = s.recv().(*wire.CacheConditionResult)
		}()
	}
	wg.Wait()
	var winner = -1
	for i, r := range results {
		if r == nil || r.Version == nil {
			t.Fatalf("client %d: %#v", i, r)
		}
		if r.Applied {
			if winner >= 0 {
				t.Fatalf("clients %d and %d both won", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("nobody won")
	}
	for i, r := range results {
		if *r.Version != *results[winner].Version {
			t.Fatalf("client %d told version %d, the winner wrote %d", i, *r.Version, *results[winner].Version)
		}
	}
	s := a.authed(a.dial(0), 0, withVersions, cacheAll)
	s.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, RequestID: 100})
	if v := cacheValue(t, s.recv(), 100); string(v.Value) != string(rune('a'+winner)) || versionOf(v) != *results[winner].Version {
		t.Fatalf("forwarded get: %q at %v, want the winner's", v.Value, versionOf(v))
	}
	s.send(deleteIf(key, *results[winner].Version+1, 101))
	if r := condResult(t, s.recv(), 101); r.Applied || *r.Version != *results[winner].Version {
		t.Fatalf("forwarded stale delete_if: %+v", r)
	}
	plain := a.authed(a.dial(0), 0, allFeatures, cacheAll)
	plain.send(&wire.CacheGet{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, RequestID: 102})
	if v := cacheValue(t, plain.recv(), 102); v.Version != nil {
		t.Fatalf("forwarded get without the bit carries a version: %#v", v)
	}
	if c, _ := a.srv.resolveCache(testTenant, "prod", "sessions"); func() bool { n, _ := c.Len(); return n != 0 }() {
		t.Fatal("the entry broker stored the key")
	}
}

// A forwarded conditional write whose answer is lost is answered
// outcome_unknown, once, and never sent to the owner again; a versioned
// get in the same state is answered retryable.
func TestForwardedConditionalWriteLostIsOutcomeUnknown(t *testing.T) {
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
	s := a.authed(a.dial(0), 0, withVersions, cacheAll)
	s.send(putIf(key, "v", wire.CacheCondition{Absent: true}, 1))
	<-started
	b.srv.Peer().Close()
	e := expectCode(t, s.recv(), wire.CodeShardUnavailable)
	if e.Retry != wire.RetryOutcomeUnknown || e.Detail[wire.DetailReason] != "forward_unanswered" {
		t.Fatalf("refusal %v, want outcome_unknown", e)
	}
	// The next answer on the stream is the next request's: the lost one
	// was answered exactly once.
	s.send(&wire.CacheGetVersioned{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: key, RequestID: 2})
	e = expectCode(t, s.recv(), wire.CodeShardUnavailable)
	if e.Retry == wire.RetryOutcomeUnknown {
		t.Fatalf("a versioned get refused %v", e)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Fatalf("the owner was called %d times, want once", calls)
	}
}
