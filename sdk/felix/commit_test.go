package felix

import (
	"context"
	"errors"
	"testing"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// fakeStateValue is one key of the fake broker's commit state.
type fakeStateValue struct {
	value   []byte
	version uint64
}

// commit answers a commit the way a broker does: the event is recorded
// at the stream's next offset (if expected_offset allows) and the state
// ops applied with that offset as their version. Stream "lose" drops
// every connection instead of answering.
func (fb *fakeBroker) commit(s transport.Stream, m *wire.Commit) bool {
	fb.mu.Lock()
	fb.commitOps++
	fb.mu.Unlock()
	if m.Stream == "lose" {
		fb.closeConns("answer lost")
		return false
	}
	if err := m.Validate(); err != nil {
		var we *wire.Error
		errors.As(err, &we)
		return writeMsg(s, we.PublishErrorMessage(m.RequestID, true)) == nil
	}
	fb.mu.Lock()
	k := m.Namespace + "/" + m.Stream
	tail := uint64(len(fb.published[k]))
	if m.ExpectedOffset != nil && tail != *m.ExpectedOffset {
		fb.mu.Unlock()
		return writeMsg(s, &wire.PublishRefused{RequestID: m.RequestID, OffsetMismatch: &wire.OffsetMismatch{Tail: tail}}) == nil
	}
	fb.published[k] = append(fb.published[k], pubRecord{payload: m.Event(), key: m.EntityKey})
	if fb.state == nil {
		fb.state = map[string]fakeStateValue{}
	}
	for _, op := range m.Ops {
		switch op.Op {
		case wire.CommitOpPut:
			fb.state[k+"/"+op.Key] = fakeStateValue{value: op.Value, version: tail}
		case wire.CommitOpDelete:
			delete(fb.state, k+"/"+op.Key)
		}
	}
	fb.notifyLocked()
	fb.mu.Unlock()
	return writeMsg(s, &wire.PublishOK{RequestID: m.RequestID, Offset: &tail}) == nil
}

func (fb *fakeBroker) stateGet(s transport.Stream, m *wire.StateGet) bool {
	fb.mu.Lock()
	v, ok := fb.state[m.Namespace+"/"+m.Stream+"/"+m.Key]
	fb.mu.Unlock()
	ans := &wire.StateValue{RequestID: m.RequestID, Key: m.Key}
	if ok {
		ans.Value, ans.Version = v.value, &v.version
	}
	return writeMsg(s, ans) == nil
}

func (fb *fakeBroker) commitCount() int {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.commitOps
}

const commitTestFeatures = wire.FeatureAtomicCommit | wire.FeatureExplicitShard

// Commits the client refuses send nothing: without FEATURE_ATOMIC_COMMIT
// (CommitUnsupported, an unsupported *BrokerError), without exactly one
// event (CommitEventCount), with an op on another stream
// (CommitNotOnOwningShard naming its index).
func TestCommitRefusedBeforeSending(t *testing.T) {
	ctx := context.Background()
	bare := newFakeBroker(t, fakeOpts{features: wire.FeatureExplicitShard})
	bc := connect(t, bare)
	_, err := bc.Commit(ctx, "ns", []byte("k"), []CommitOp{CommitPublish("s", []byte("e"))})
	var ce *CommitError
	if !errors.As(err, &ce) || ce.Kind != CommitUnsupported || asBroker(t, err).Code != wire.CodeUnsupported || !wasNotSent(err) {
		t.Fatalf("commit without the bit: %v", err)
	}
	if _, _, _, err := bc.StateGet(ctx, "ns", "s", nil, "k"); !errors.As(err, &ce) || ce.Kind != CommitUnsupported {
		t.Fatalf("state_get without the bit: %v", err)
	}

	fb := newFakeBroker(t, fakeOpts{features: commitTestFeatures})
	c := connect(t, fb)
	_, err = c.Commit(ctx, "orders", []byte("order-42"), []CommitOp{
		CommitPublish("order-events", []byte("placed")), CommitPut("inventory", "sku-1", []byte("3"))})
	if !errors.As(err, &ce) || ce.Kind != CommitNotOnOwningShard || ce.Index != 1 || ce.Stream != "inventory" || !wasNotSent(err) {
		t.Fatalf("an op on another stream: %v", err)
	}
	for _, ops := range [][]CommitOp{
		{CommitPut("s", "k", []byte("v"))},
		{CommitPublish("s", []byte("a")), CommitEnqueue("s", []byte("b"))},
	} {
		if _, err := c.Commit(ctx, "ns", nil, ops); !errors.As(err, &ce) || ce.Kind != CommitEventCount {
			t.Fatalf("%d events: %v", len(ops), err)
		}
	}
	if n := fb.commitCount() + bare.commitCount(); n != 0 {
		t.Fatalf("the brokers received %d commits", n)
	}
	fb.mu.Lock()
	offered := fb.authMsgs[0].Features
	fb.mu.Unlock()
	if offered&wire.FeatureAtomicCommit == 0 {
		t.Fatal("the client did not offer FEATURE_ATOMIC_COMMIT")
	}
}

// A commit returns its offset, state_get answers the state with that
// offset as its version, commit_if at a stale offset is an
// *OffsetMismatchError, a delete reads as absent, and a commit whose
// answer was lost is outcome_unknown and sent once.
func TestCommitWrittenReadAndLost(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: commitTestFeatures})
	c := connect(t, fb)
	ctx := context.Background()
	off, err := c.Commit(ctx, "orders", []byte("order-42"), []CommitOp{
		CommitEnqueue("order-events", []byte(`{"type":"placed"}`)),
		CommitPut("order-events", "order-42", []byte(`{"status":"placed"}`))})
	if err != nil || off != 0 {
		t.Fatalf("commit: %d %v", off, err)
	}
	v, ver, found, err := c.StateGet(ctx, "orders", "order-events", []byte("order-42"), "order-42")
	if err != nil || !found || ver != off || string(v) != `{"status":"placed"}` {
		t.Fatalf("state_get: %q v%d %v %v", v, ver, found, err)
	}
	_, err = c.CommitIf(ctx, "orders", nil, []CommitOp{CommitPublish("order-events", []byte("x"))}, 0)
	var om *OffsetMismatchError
	if !errors.As(err, &om) || om.Tail != 1 || om.Expected != 0 {
		t.Fatalf("stale commit_if: %v", err)
	}
	if off, err := c.CommitIfOnShard(ctx, "orders", 0, []CommitOp{CommitPublish("order-events", []byte("y")), CommitDelete("order-events", "order-42")}, 1); err != nil || off != 1 {
		t.Fatalf("commit_if_on_shard: %d %v", off, err)
	}
	if _, _, found, err := c.StateGetOnShard(ctx, "orders", "order-events", 0, "order-42"); err != nil || found {
		t.Fatalf("deleted key: %v %v", found, err)
	}
	before := fb.commitCount()
	_, err = c.Commit(ctx, "ns", nil, []CommitOp{CommitPublish("lose", []byte("x"))})
	wantOutcomeUnknown(t, err)
	if n := fb.commitCount() - before; n != 1 {
		t.Fatalf("a commit whose answer was lost was sent %d times", n)
	}
}

// ClusterClient sends a commit and a state_get to the shard's owner,
// follows a not_leader after a move (once), and never sends a commit
// again after its answer was lost.
func TestClusterClientCommit(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{features: commitTestFeatures})
	cl.place(KindStream, "ns", "s", 1)
	cl.place(KindStream, "ns", "lose", 1)
	cc := connectClusterTest(t, cl, 0)
	ctx := context.Background()
	learnOwners(t, cc, KindStream, "ns", "s")
	off, err := cc.Commit(ctx, "ns", nil, []CommitOp{CommitPublish("s", []byte("a")), CommitPut("s", "k", []byte("v"))})
	if err != nil || off != 0 {
		t.Fatalf("commit: %d %v", off, err)
	}
	if got := cl.node(1).records("ns", "s"); len(got) != 1 {
		t.Fatalf("the owner b1 holds %d records", len(got))
	}
	if _, ver, found, err := cc.StateGet(ctx, "ns", "s", nil, "k"); err != nil || !found || ver != 0 {
		t.Fatalf("state_get on the owner: v%d %v %v", ver, found, err)
	}
	before := cl.node(0).commitCount() + cl.node(1).commitCount()
	learnOwners(t, cc, KindStream, "ns", "lose")
	_, err = cc.Commit(ctx, "ns", nil, []CommitOp{CommitPublish("lose", []byte("x"))})
	wantOutcomeUnknown(t, err)
	if n := cl.node(0).commitCount() + cl.node(1).commitCount() - before; n != 1 {
		t.Fatalf("a commit whose answer was lost was sent %d times", n)
	}
	cl.place(KindStream, "ns", "moved", 1)
	learnOwners(t, cc, KindStream, "ns", "moved")
	cl.place(KindStream, "ns", "moved", 0)
	b0, b1 := cl.node(0).commitCount(), cl.node(1).commitCount()
	if off, err := cc.CommitOnShard(ctx, "ns", 0, []CommitOp{CommitPublish("moved", []byte("m"))}); err != nil || off != 0 {
		t.Fatalf("commit after a move: %d %v", off, err)
	}
	if d0, d1 := cl.node(0).commitCount()-b0, cl.node(1).commitCount()-b1; d0 != 1 || d1 != 1 {
		t.Fatalf("after a move: b0 got %d, b1 %d commits; want 1 each (the redirect, then the write)", d0, d1)
	}
}
