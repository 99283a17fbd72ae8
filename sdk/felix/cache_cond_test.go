package felix

import (
	"context"
	"errors"
	"testing"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// newVersionLocked is the version of the fake's next cache write, one
// more than the last; the caller holds fb.mu.
func (fb *fakeBroker) newVersionLocked() uint64 {
	fb.lastVersion++
	return fb.lastVersion + 100
}

// condOp answers a conditional write. Key "lose" drops every connection
// instead of answering (the answer is lost); key "forward-lost" is
// refused outcome_unknown, as an entry broker refuses a forward whose
// owner did not answer.
func (fb *fakeBroker) condOp(s transport.Stream, msg wire.Message) bool {
	fb.mu.Lock()
	fb.condOps++
	var key string
	var id uint64
	switch m := msg.(type) {
	case *wire.CachePutIf:
		key, id = m.Key, m.RequestID
	case *wire.CacheDeleteIf:
		key, id = m.Key, m.RequestID
	}
	switch key {
	case "lose":
		fb.mu.Unlock()
		fb.closeConns("answer lost")
		return false
	case "forward-lost":
		fb.mu.Unlock()
		e := wire.NewError(wire.CodeShardUnavailable, "the owner did not answer").ErrorMessage(true)
		e.Retry, e.RequestID = wire.RetryOutcomeUnknown, &id
		return writeMsg(s, e) == nil
	}
	defer fb.mu.Unlock()
	return writeMsg(s, fb.applyCondLocked(msg)) == nil
}

func (fb *fakeBroker) applyCondLocked(msg wire.Message) *wire.CacheConditionResult {
	switch m := msg.(type) {
	case *wire.CachePutIf:
		k := m.Cache + "/" + m.Key
		cur, live := fb.versions[k]
		if (m.Condition.Absent && live) || (!m.Condition.Absent && (!live || cur != m.Condition.Version)) {
			return refusedAt(cur, live, m.RequestID)
		}
		v := fb.newVersionLocked()
		fb.cache[k], fb.versions[k] = m.Value, v
		return &wire.CacheConditionResult{Applied: true, Version: &v, RequestID: m.RequestID}
	case *wire.CacheDeleteIf:
		k := m.Cache + "/" + m.Key
		cur, live := fb.versions[k]
		if !live || cur != *m.Version {
			return refusedAt(cur, live, m.RequestID)
		}
		delete(fb.cache, k)
		delete(fb.versions, k)
		return &wire.CacheConditionResult{Applied: true, RequestID: m.RequestID}
	}
	panic("not a conditional write")
}

func refusedAt(cur uint64, live bool, id uint64) *wire.CacheConditionResult {
	r := &wire.CacheConditionResult{RequestID: id}
	if live {
		r.Version = &cur
	}
	return r
}

func (fb *fakeBroker) condCount() int {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.condOps
}

func TestCacheConditionalNeedsTheFeature(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: wire.FeatureCacheDelete})
	c := connect(t, fb)
	ctx := context.Background()
	_, err := c.CachePutIf(ctx, "ns", "c", "k", []byte("v"), 0, IfAbsent())
	if be := asBroker(t, err); be.Code != wire.CodeUnsupported || !wasNotSent(err) {
		t.Fatalf("put_if without the bit: %v", err)
	}
	if _, err := c.CacheDeleteIf(ctx, "ns", "c", "k", 1); asBroker(t, err).Code != wire.CodeUnsupported {
		t.Fatalf("delete_if without the bit: %v", err)
	}
	if _, _, _, err := c.CacheGetVersioned(ctx, "ns", "c", "k"); asBroker(t, err).Code != wire.CodeUnsupported {
		t.Fatalf("versioned get without the bit: %v", err)
	}
	if n := fb.condCount(); n != 0 {
		t.Fatalf("the broker received %d conditional writes", n)
	}
	if fb.authMsgs[0].Features&wire.FeatureCacheConditional == 0 {
		t.Fatal("the client did not offer FEATURE_CACHE_CONDITIONAL")
	}
}

func TestCacheConditionalWrites(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: wire.FeatureCacheDelete | wire.FeatureCacheConditional})
	c := connect(t, fb)
	ctx := context.Background()
	won, err := c.CachePutIf(ctx, "ns", "c", "k", []byte("v1"), 0, IfAbsent())
	if err != nil || !won.Applied || !won.HasVersion {
		t.Fatalf("put_if absent: %+v %v", won, err)
	}
	if v, ver, found, err := c.CacheGetVersioned(ctx, "ns", "c", "k"); err != nil || !found || string(v) != "v1" || ver != won.Version {
		t.Fatalf("versioned get: %q %d %v %v, want v1 at %d", v, ver, found, err, won.Version)
	}
	if r, err := c.CachePutIf(ctx, "ns", "c", "k", []byte("v2"), 0, IfAbsent()); err != nil || r != (CondResult{Version: won.Version, HasVersion: true}) {
		t.Fatalf("put_if absent on a live key: %+v %v", r, err)
	}
	next, err := c.CachePutIf(ctx, "ns", "c", "k", []byte("v3"), 0, IfVersion(won.Version))
	if err != nil || !next.Applied || next.Version == won.Version {
		t.Fatalf("put_if at the version: %+v %v", next, err)
	}
	if r, err := c.CacheDeleteIf(ctx, "ns", "c", "k", won.Version); err != nil || r != (CondResult{Version: next.Version, HasVersion: true}) {
		t.Fatalf("stale delete_if: %+v %v", r, err)
	}
	if r, err := c.CacheDeleteIf(ctx, "ns", "c", "k", next.Version); err != nil || r != (CondResult{Applied: true}) {
		t.Fatalf("delete_if at the version: %+v %v", r, err)
	}
	if _, _, found, err := c.CacheGetVersioned(ctx, "ns", "c", "k"); err != nil || found {
		t.Fatalf("versioned get of a deleted key: %v %v", found, err)
	}
	if _, err := c.CachePutIf(ctx, "ns", "c", "k", nil, -1, IfAbsent()); err == nil || !wasNotSent(err) {
		t.Fatalf("negative ttl: %v", err)
	}
}

// wantOutcomeUnknown fails unless err says the write may have been applied.
func wantOutcomeUnknown(t *testing.T, err error) {
	t.Helper()
	var be *BrokerError
	if !errors.As(err, &be) || be.Retry != wire.RetryOutcomeUnknown {
		t.Fatalf("error %v, want outcome_unknown", err)
	}
}

func TestCachePutIfLostAnswerIsOutcomeUnknown(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: wire.FeatureCacheConditional})
	c := connect(t, fb)
	_, err := c.CachePutIf(context.Background(), "ns", "c", "lose", []byte("v"), 0, IfAbsent())
	wantOutcomeUnknown(t, err)
	if !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("error %v does not wrap ErrConnectionLost", err)
	}
	if n := fb.condCount(); n != 1 {
		t.Fatalf("the broker received %d conditional writes, want 1", n)
	}
}

// ClusterClient routes conditional writes to the key's owner and never
// sends one again after its answer was lost, whether the connection died
// or the entry broker answered outcome_unknown.
func TestClusterClientNeverResendsAConditionalWrite(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{features: wire.FeatureCacheConditional})
	cl.place(KindCache, "ns", "c", 1)
	cc := connectClusterTest(t, cl, 0)
	learnOwners(t, cc, KindCache, "ns", "c")
	ctx := context.Background()
	r, err := cc.CachePutIf(ctx, "ns", "c", "k", []byte("v"), 0, IfAbsent())
	if err != nil || !r.Applied {
		t.Fatalf("put_if: %+v %v", r, err)
	}
	if n0, n1 := cl.node(0).condCount(), cl.node(1).condCount(); n0 != 0 || n1 != 1 {
		t.Fatalf("conditional writes at b0 %d, b1 %d: want all at the owner b1", n0, n1)
	}
	if _, ver, _, err := cc.CacheGetVersioned(ctx, "ns", "c", "k"); err != nil || ver != r.Version {
		t.Fatalf("versioned get: %d %v, want %d", ver, err, r.Version)
	}
	for _, key := range []string{"forward-lost", "lose"} {
		before := cl.node(0).condCount() + cl.node(1).condCount()
		_, err := cc.CachePutIf(ctx, "ns", "c", key, []byte("v"), 0, IfAbsent())
		wantOutcomeUnknown(t, err)
		_, err = cc.CacheDeleteIf(ctx, "ns", "c", key, 7)
		wantOutcomeUnknown(t, err)
		if n := cl.node(0).condCount() + cl.node(1).condCount() - before; n != 2 {
			t.Fatalf("key %s: %d conditional writes sent for 2 calls", key, n)
		}
	}
	// The client carries on after the lost connection.
	if r, err := cc.CachePutIf(ctx, "ns", "c", "after", []byte("v"), 0, IfAbsent()); err != nil || !r.Applied {
		t.Fatalf("put_if after the loss: %+v %v", r, err)
	}
}
