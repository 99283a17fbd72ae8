package felix

import (
	"context"
	"errors"
	"testing"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// publishIf answers a publish_if the way a broker does: the batch is
// recorded only at the stream's next offset (publish_ok with it), else
// refused with publish_refused and the tail. Stream "lose" drops every
// connection instead of answering; "memory" is refused as an in-memory
// stream; "redirect" is refused with a not_leader publish_error.
func (fb *fakeBroker) publishIf(s transport.Stream, m *wire.PublishIf) bool {
	fb.mu.Lock()
	fb.pubIfOps++
	fb.mu.Unlock()
	switch m.Stream {
	case "lose":
		fb.closeConns("answer lost")
		return false
	case "memory":
		e := wire.NewError(wire.CodeInvalidRequest, "stream memory is not durable").WithDetail(wire.DetailReason, "not_durable")
		return writeMsg(s, e.PublishErrorMessage(m.RequestID, true)) == nil
	}
	fb.mu.Lock()
	k := m.Namespace + "/" + m.Stream
	tail := uint64(len(fb.published[k]))
	if tail != *m.ExpectedOffset {
		fb.mu.Unlock()
		return writeMsg(s, &wire.PublishRefused{RequestID: m.RequestID, OffsetMismatch: &wire.OffsetMismatch{Tail: tail}}) == nil
	}
	for _, p := range m.Payloads {
		fb.published[k] = append(fb.published[k], pubRecord{payload: p, key: m.Key})
	}
	fb.notifyLocked()
	fb.mu.Unlock()
	return writeMsg(s, &wire.PublishOK{RequestID: m.RequestID, Offset: &tail}) == nil
}

func (fb *fakeBroker) pubIfCount() int {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.pubIfOps
}

func TestPublishIfNeedsTheFeature(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: wire.FeatureExplicitShard})
	c := connect(t, fb)
	_, err := c.PublishIf(context.Background(), "ns", "s", nil, [][]byte{[]byte("x")}, 0)
	if be := asBroker(t, err); be.Code != wire.CodeUnsupported || !wasNotSent(err) {
		t.Fatalf("publish_if without the bit: %v", err)
	}
	if _, err := c.PublishIfOnShard(context.Background(), "ns", "s", 1, [][]byte{[]byte("x")}, 0); asBroker(t, err).Code != wire.CodeUnsupported {
		t.Fatalf("publish_if_on_shard without the bit: %v", err)
	}
	fb2 := newFakeBroker(t, fakeOpts{features: wire.FeaturePublishConditional})
	c2 := connect(t, fb2)
	if _, err := c2.PublishIfOnShard(context.Background(), "ns", "s", 1, [][]byte{[]byte("x")}, 0); asBroker(t, err).Code != wire.CodeUnsupported {
		t.Fatalf("publish_if_on_shard without FEATURE_EXPLICIT_SHARD: %v", err)
	}
	if n := fb.pubIfCount() + fb2.pubIfCount(); n != 0 {
		t.Fatalf("the brokers received %d publish_if", n)
	}
	if fb.authMsgs[0].Features&wire.FeaturePublishConditional == 0 {
		t.Fatal("the client did not offer FEATURE_PUBLISH_CONDITIONAL")
	}
}

// A written publish_if returns its offset; a refused one is an
// *OffsetMismatchError with the tail, which errors.As also finds as a
// *BrokerError of code offset_mismatch; bad arguments are refused before
// sending; other refusals come back as *BrokerError.
func TestPublishIfWrittenAndRefused(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: wire.FeaturePublishConditional | wire.FeatureExplicitShard})
	c := connect(t, fb)
	ctx := context.Background()
	off, err := c.PublishIf(ctx, "ns", "s", []byte("k"), [][]byte{[]byte("a"), []byte("b")}, 0)
	if err != nil || off != 0 {
		t.Fatalf("first publish_if: %d %v", off, err)
	}
	_, err = c.PublishIf(ctx, "ns", "s", nil, [][]byte{[]byte("late")}, 0)
	var om *OffsetMismatchError
	if !errors.As(err, &om) || om.Tail != 2 || om.Expected != 0 {
		t.Fatalf("stale publish_if: %v", err)
	}
	if be := asBroker(t, err); be.Code != wire.CodeOffsetMismatch || be.Retry != wire.RetryFatal {
		t.Fatalf("as a broker error: %+v", be)
	}
	if tail, ok := (&wire.Error{Code: asBroker(t, err).Code, Detail: asBroker(t, err).Detail}).OffsetMismatchTail(); !ok || tail != 2 {
		t.Fatalf("detail tail %d %v", tail, ok)
	}
	if off, err := c.PublishIfOnShard(ctx, "ns", "s", 0, [][]byte{[]byte("c")}, 2); err != nil || off != 2 {
		t.Fatalf("publish_if at the tail: %d %v", off, err)
	}
	if got := fb.records("ns", "s"); len(got) != 3 || string(got[2].payload) != "c" {
		t.Fatalf("the broker holds %d records", len(got))
	}
	before := fb.pubIfCount()
	if _, err := c.PublishIf(ctx, "ns", "s", nil, nil, 3); err == nil || !wasNotSent(err) {
		t.Fatalf("empty batch: %v", err)
	}
	if _, err := c.PublishIf(ctx, "ns", "s", nil, [][]byte{make([]byte, c.cfg.MaxFrameBytes)}, 3); err == nil || !wasNotSent(err) {
		t.Fatalf("oversized batch: %v", err)
	}
	if n := fb.pubIfCount() - before; n != 0 {
		t.Fatalf("%d invalid publish_if sent", n)
	}
	_, err = c.PublishIf(ctx, "ns", "memory", nil, [][]byte{[]byte("x")}, 0)
	if be := asBroker(t, err); be.Code != wire.CodeInvalidRequest || errors.As(err, &om) {
		t.Fatalf("in-memory stream: %v", err)
	}
}

func TestPublishIfLostAnswerIsOutcomeUnknown(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: wire.FeaturePublishConditional})
	c := connect(t, fb)
	_, err := c.PublishIf(context.Background(), "ns", "lose", nil, [][]byte{[]byte("x")}, 0)
	wantOutcomeUnknown(t, err)
	if !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("error %v does not wrap ErrConnectionLost", err)
	}
	if n := fb.pubIfCount(); n != 1 {
		t.Fatalf("the broker received %d publish_if, want 1", n)
	}
}

// ClusterClient sends publish_if to the shard's owner, follows a
// not_leader once it is there (nothing was written), and never sends one
// again after its answer was lost.
func TestClusterClientPublishIf(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{features: wire.FeaturePublishConditional | wire.FeatureExplicitShard})
	cl.place(KindStream, "ns", "s", 1)
	cl.place(KindStream, "ns", "lose", 1)
	cc := connectClusterTest(t, cl, 0)
	ctx := context.Background()
	off, err := cc.PublishIf(ctx, "ns", "s", nil, [][]byte{[]byte("a")}, 0)
	if err != nil || off != 0 {
		t.Fatalf("publish_if: %d %v", off, err)
	}
	if got := cl.node(1).records("ns", "s"); len(got) != 1 {
		t.Fatalf("the owner b1 holds %d records", len(got))
	}
	if got := cl.node(0).records("ns", "s"); len(got) != 0 {
		t.Fatalf("b0 wrote %d records", len(got))
	}
	_, err = cc.PublishIfOnShard(ctx, "ns", "s", 0, [][]byte{[]byte("b")}, 0)
	var om *OffsetMismatchError
	if !errors.As(err, &om) || om.Tail != 1 {
		t.Fatalf("stale publish_if on the owner: %v", err)
	}
	before := cl.node(0).pubIfCount() + cl.node(1).pubIfCount()
	learnOwners(t, cc, KindStream, "ns", "lose")
	_, err = cc.PublishIf(ctx, "ns", "lose", nil, [][]byte{[]byte("x")}, 0)
	wantOutcomeUnknown(t, err)
	if n := cl.node(0).pubIfCount() + cl.node(1).pubIfCount() - before; n != 1 {
		t.Fatalf("a publish_if whose answer was lost was sent %d times", n)
	}
	// The shard moves to b0: the client's cached owner b1 answers
	// not_leader, which says nothing was written, and the call follows it
	// to b0, once.
	cl.place(KindStream, "ns", "moved", 1)
	learnOwners(t, cc, KindStream, "ns", "moved")
	cl.place(KindStream, "ns", "moved", 0)
	b0, b1 := cl.node(0).pubIfCount(), cl.node(1).pubIfCount()
	if off, err := cc.PublishIf(ctx, "ns", "moved", nil, [][]byte{[]byte("m")}, 0); err != nil || off != 0 {
		t.Fatalf("publish_if after a move: %d %v", off, err)
	}
	if d0, d1 := cl.node(0).pubIfCount()-b0, cl.node(1).pubIfCount()-b1; d0 != 1 || d1 != 1 {
		t.Fatalf("after a move: b0 got %d, b1 %d publish_if; want 1 each (the redirect, then the write)", d0, d1)
	}
	if got := cl.node(0).records("ns", "moved"); len(got) != 1 {
		t.Fatalf("the new owner holds %d records", len(got))
	}
	// The client carries on after the lost connection.
	if off, err := cc.PublishIf(ctx, "ns", "s", nil, [][]byte{[]byte("c")}, 1); err != nil || off != 1 {
		t.Fatalf("publish_if after the loss: %d %v", off, err)
	}
}
