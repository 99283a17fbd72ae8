package felix

import (
	"context"
	"errors"
	"testing"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// counterOp answers counter_add and counter_get as a durable broker does.
// An add to key "lose" drops every connection instead of answering (the
// answer is lost); one to "forward-lost" is refused outcome_unknown, as
// an entry broker refuses a forward whose owner did not answer.
func (fb *fakeBroker) counterOp(s transport.Stream, msg wire.Message) bool {
	fb.mu.Lock()
	if fb.counters == nil {
		fb.counters = map[string]int64{}
	}
	switch m := msg.(type) {
	case *wire.CounterAdd:
		fb.counterAdds++
		switch m.Key {
		case "lose":
			fb.mu.Unlock()
			fb.closeConns("answer lost")
			return false
		case "forward-lost":
			fb.mu.Unlock()
			e := wire.NewError(wire.CodeShardUnavailable, "the owner did not answer").ErrorMessage(true)
			e.Retry, e.RequestID = wire.RetryOutcomeUnknown, &m.RequestID
			return writeMsg(s, e) == nil
		}
		k := m.Cache + "/" + m.Key
		fb.counters[k] += *m.Delta
		sum := fb.counters[k]
		fb.mu.Unlock()
		return writeMsg(s, &wire.CounterValue{Key: m.Key, Value: &sum, RequestID: m.RequestID}) == nil
	case *wire.CounterGet:
		v := &wire.CounterValue{Key: m.Key, RequestID: m.RequestID}
		if sum, ok := fb.counters[m.Cache+"/"+m.Key]; ok {
			v.Value = &sum
		}
		fb.mu.Unlock()
		return writeMsg(s, v) == nil
	}
	fb.mu.Unlock()
	return false
}

func (fb *fakeBroker) addCount() int {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.counterAdds
}

// Without FEATURE_COUNTERS (a broker without storage) nothing is sent and
// the calls fail unsupported; the client offers the bit.
func TestCountersNeedTheFeature(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: wire.FeatureCacheDelete})
	c := connect(t, fb)
	ctx := context.Background()
	_, err := c.CounterAdd(ctx, "ns", "c", "k", 1)
	if be := asBroker(t, err); be.Code != wire.CodeUnsupported || !wasNotSent(err) {
		t.Fatalf("counter_add without the bit: %v", err)
	}
	if _, _, err := c.CounterGet(ctx, "ns", "c", "k"); asBroker(t, err).Code != wire.CodeUnsupported {
		t.Fatalf("counter_get without the bit: %v", err)
	}
	if n := fb.addCount(); n != 0 {
		t.Fatalf("the broker received %d adds", n)
	}
	if fb.authMsgs[0].Features&wire.FeatureCounters == 0 {
		t.Fatal("the client did not offer FEATURE_COUNTERS")
	}
}

// CounterAdd returns the sum including the delta; CounterGet tells a
// never-written counter from a sum of zero.
func TestCounterAddAndGet(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: wire.FeatureCounters})
	c := connect(t, fb)
	ctx := context.Background()
	if _, ok, err := c.CounterGet(ctx, "ns", "c", "k"); err != nil || ok {
		t.Fatalf("never-written counter: ok %v, %v", ok, err)
	}
	for i, d := range []int64{3, -3} {
		sum, err := c.CounterAdd(ctx, "ns", "c", "k", d)
		if want := []int64{3, 0}[i]; err != nil || sum != want {
			t.Fatalf("add %d: %d %v, want %d", d, sum, err, want)
		}
	}
	if sum, ok, err := c.CounterGet(ctx, "ns", "c", "k"); err != nil || !ok || sum != 0 {
		t.Fatalf("counter at zero: %d %v %v", sum, ok, err)
	}
}

func TestCounterAddLostAnswerIsOutcomeUnknown(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: wire.FeatureCounters})
	c := connect(t, fb)
	_, err := c.CounterAdd(context.Background(), "ns", "c", "lose", 1)
	wantOutcomeUnknown(t, err)
	if !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("error %v does not wrap ErrConnectionLost", err)
	}
	if n := fb.addCount(); n != 1 {
		t.Fatalf("the broker received %d adds, want 1", n)
	}
}

// ClusterClient sends adds to the key's owner and never sends one again
// after its answer was lost, whether the connection died or the entry
// broker answered outcome_unknown.
func TestClusterClientNeverResendsACounterAdd(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{features: wire.FeatureCounters})
	cl.place(KindCache, "ns", "c", 1)
	cc := connectClusterTest(t, cl, 0)
	learnOwners(t, cc, KindCache, "ns", "c")
	ctx := context.Background()
	if sum, err := cc.CounterAdd(ctx, "ns", "c", "k", 5); err != nil || sum != 5 {
		t.Fatalf("add: %d %v", sum, err)
	}
	if n0, n1 := cl.node(0).addCount(), cl.node(1).addCount(); n0 != 0 || n1 != 1 {
		t.Fatalf("adds at b0 %d, b1 %d: want all at the owner b1", n0, n1)
	}
	if sum, ok, err := cc.CounterGet(ctx, "ns", "c", "k"); err != nil || !ok || sum != 5 {
		t.Fatalf("get: %d %v %v", sum, ok, err)
	}
	for _, key := range []string{"forward-lost", "lose"} {
		before := cl.node(0).addCount() + cl.node(1).addCount()
		_, err := cc.CounterAdd(ctx, "ns", "c", key, 1)
		wantOutcomeUnknown(t, err)
		if n := cl.node(0).addCount() + cl.node(1).addCount() - before; n != 1 {
			t.Fatalf("key %s: %d adds sent for 1 call", key, n)
		}
	}
	// The client carries on after the lost connection.
	if _, err := cc.CounterAdd(ctx, "ns", "c", "after", 1); err != nil {
		t.Fatalf("add after the loss: %v", err)
	}
}
