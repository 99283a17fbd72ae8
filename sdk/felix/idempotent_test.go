package felix

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

const idemFakeFeatures = wire.FeatureIdempotentProducer | wire.FeaturePublishPipeline | wire.FeatureErrorCodes

func newProducer(t *testing.T, c *Client) *IdempotentProducer {
	t.Helper()
	p, err := c.IdempotentProducer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

func (fb *fakeBroker) idemSends() []fakeIdemSend {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return append([]fakeIdemSend(nil), fb.idem.sendLog...)
}

func TestIdempotentProducerNeedsTheFeature(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{})
	c := connect(t, fb)
	_, err := c.IdempotentProducer(context.Background())
	if be := asBroker(t, err); be.Code != wire.CodeUnsupported || !wasNotSent(err) {
		t.Fatalf("producer without the bit: %v", err)
	}
}

// Batches are numbered 0, 1, 2… under one producer id per stream, answered
// with their offsets; PublishBatches keeps several in flight on a
// pipelining stream and returns their offsets in order.
func TestIdempotentProducerNumbersBatches(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: idemFakeFeatures, window: 8})
	c := connect(t, fb)
	p := newProducer(t, c)
	ctx := context.Background()
	for i := range 3 {
		off, err := p.Publish(ctx, "ns", "s", fmt.Appendf(nil, "one-%d", i))
		if err != nil || off != uint64(i) {
			t.Fatalf("publish %d: %d %v", i, off, err)
		}
	}
	var batches [][][]byte
	for i := range 20 {
		batches = append(batches, [][]byte{fmt.Appendf(nil, "b-%d-a", i), fmt.Appendf(nil, "b-%d-b", i)})
	}
	offs, err := p.PublishBatches(ctx, "ns", "s", batches)
	if err != nil || len(offs) != 20 {
		t.Fatalf("publish_batches: %v %v", offs, err)
	}
	for i, off := range offs {
		if off != uint64(3+2*i) {
			t.Fatalf("batch %d at %d, want %d", i, off, 3+2*i)
		}
	}
	sends := fb.idemSends()
	for i, s := range sends {
		if s.id != p.ProducerID() || s.seq != uint64(i) || s.shard != 0 {
			t.Fatalf("send %d: %+v (producer %d)", i, s, p.ProducerID())
		}
	}
	if p.ProducerIDFor("ns", "s") != p.ProducerID() || p.ProducerID() == 0 {
		t.Fatalf("producer ids: %d %d", p.ProducerIDFor("ns", "s"), p.ProducerID())
	}
	// Another stream takes its own id and starts at 0.
	if _, err := p.Publish(ctx, "ns", "other", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if id := p.ProducerIDFor("ns", "other"); id == 0 || id == p.ProducerID() {
		t.Fatalf("second stream's id %d", id)
	}
	if got := len(fb.records("ns", "s")); got != 43 {
		t.Fatalf("stream holds %d records, want 43", got)
	}
}

// Against a broker advertising FLAG_BINARY_PUBLISH_IDEMPOTENT the
// batches go out as binary frames, numbered as before, and a lost answer
// is sent again the same way.
func TestIdempotentProducerSendsBinaryFrames(t *testing.T) {
	lose := loseOnce(1)
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags | wire.FlagBinaryPublishIdempotent, features: idemFakeFeatures, window: 4, loseAnswer: lose})
	c := connect(t, fb)
	p := newProducer(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var batches [][][]byte
	for i := range 5 {
		batches = append(batches, [][]byte{fmt.Appendf(nil, "bin-%d", i)})
	}
	if _, err := p.PublishBatches(ctx, "ns", "s", batches); err != nil {
		t.Fatal(err)
	}
	recs := fb.records("ns", "s")
	if len(recs) != 5 {
		t.Fatalf("%d records, want 5", len(recs))
	}
	fb.mu.Lock()
	binary, sends := fb.idem.binary, fb.idem.sends
	fb.mu.Unlock()
	// Sequence 1 and whatever was in flight behind it went out twice.
	if binary != sends || sends < 6 {
		t.Fatalf("%d of %d sends binary, want all of at least 6", binary, sends)
	}
}

// TestADroppedPublishLeavesTheProducerUsable ports the spec's
// `a_dropped_publish_leaves_the_producer_usable`: a call whose context
// ends while its batch waits for the broker returns at once, the batch
// still lands (once), and the producer's next call works and lands after
// it; Close waits for what was handed over.
func TestADroppedPublishLeavesTheProducerUsable(t *testing.T) {
	hold := make(chan struct{})
	fb := newFakeBroker(t, fakeOpts{features: idemFakeFeatures, window: 8, hold: hold})
	c := connect(t, fb)
	p := newProducer(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := p.Publish(ctx, "ns", "hold", []byte("dropped"))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dropped publish: %v", err)
	}
	close(hold)
	off, err := p.Publish(context.Background(), "ns", "hold", []byte("next"))
	if err != nil || off != 1 {
		t.Fatalf("publish after the dropped one: %d %v", off, err)
	}
	// Dropped again, then Close: it waits for the batch to land.
	hctx, hcancel := context.WithCancel(context.Background())
	hcancel()
	if _, err := p.Publish(hctx, "ns", "hold", []byte("late")); !errors.Is(err, context.Canceled) {
		// A call whose context is already over may also fail before
		// handing the batch over; then it is not sent at all.
		t.Logf("cancelled publish: %v", err)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	if err := p.Close(cctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	recs := fb.records("ns", "hold")
	if len(recs) < 2 || string(recs[0].payload) != "dropped" || string(recs[1].payload) != "next" {
		t.Fatalf("records %+v", recs)
	}
	if _, err := p.Publish(context.Background(), "ns", "hold", []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("publish after close: %v", err)
	}
}

// A batch whose answer is lost with the connection is sent again, under
// the same producer id and sequence, on a new connection, and lands once;
// the batches behind it follow in order.
func TestIdempotentProducerResendsAfterAReconnect(t *testing.T) {
	lose := loseOnce(2)
	fb := newFakeBroker(t, fakeOpts{features: idemFakeFeatures, window: 4, loseAnswer: lose})
	c := connect(t, fb)
	p := newProducer(t, c)
	var batches [][][]byte
	for i := range 10 {
		batches = append(batches, [][]byte{fmt.Appendf(nil, "r-%d", i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	offs, err := p.PublishBatches(ctx, "ns", "s", batches)
	if err != nil {
		t.Fatalf("publish_batches through a lost answer: %v", err)
	}
	recs := fb.records("ns", "s")
	if len(recs) != 10 {
		t.Fatalf("%d records, want 10 (each once)", len(recs))
	}
	for i, r := range recs {
		if string(r.payload) != fmt.Sprintf("r-%d", i) || offs[i] != uint64(i) {
			t.Fatalf("record %d: %q, offset %d", i, r.payload, offs[i])
		}
	}
	resent := 0
	for _, s := range fb.idemSends() {
		if s.seq == 2 {
			resent++
		}
		if s.id != p.ProducerID() {
			t.Fatalf("a re-send went out under producer %d, want %d", s.id, p.ProducerID())
		}
	}
	if resent != 2 {
		t.Fatalf("sequence 2 sent %d times, want 2", resent)
	}
}

// A refusal is a *PublishRefusedError with its reason, unwrapping to a
// *BrokerError; the producer then takes a fresh id for the stream, and
// its next batch starts at sequence 0 under it.
func TestIdempotentProducerRefusalIsTyped(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: idemFakeFeatures})
	c := connect(t, fb)
	p := newProducer(t, c)
	ctx := context.Background()
	if _, err := p.Publish(ctx, "ns", "s", []byte("a")); err != nil {
		t.Fatal(err)
	}
	first := p.ProducerID()
	// Make the fake forget the producer, as a restarted in-memory leader would.
	fb.mu.Lock()
	fb.idem.seqs = nil
	fb.mu.Unlock()
	_, err := p.Publish(ctx, "ns", "s", []byte("b"))
	var pe *PublishRefusedError
	if !errors.As(err, &pe) || pe.Reason != wire.ReasonUnknownProducer || pe.Sequence != 1 || pe.ProducerID != first {
		t.Fatalf("publish to a forgetful broker: %v", err)
	}
	var be *BrokerError
	if !errors.As(err, &be) || be.Code != wire.CodeInvalidRequest || be.Retry != wire.RetryFatal {
		t.Fatalf("refusal does not unwrap to a fatal BrokerError: %v", err)
	}
	if off, err := p.Publish(ctx, "ns", "s", []byte("c")); err != nil || off != 1 {
		t.Fatalf("publish after the refusal: %d %v", off, err)
	}
	if id := p.ProducerIDFor("ns", "s"); id == first || p.ProducerID() != first {
		t.Fatalf("after the refusal the stream's id is %d (first %d, ProducerID %d)", id, first, p.ProducerID())
	}
	sends := fb.idemSends()
	if last := sends[len(sends)-1]; last.seq != 0 || last.id == first {
		t.Fatalf("the batch after the refusal went out as %+v", last)
	}
}

// Keyed batches are numbered per shard, on the shard the key picks from
// the stream's width (asked once), sent with that shard named.
func TestIdempotentProducerSequencesPerShard(t *testing.T) {
	cl := newFakeCluster(t, 1, fakeOpts{features: idemFakeFeatures | wire.FeatureExplicitShard, window: 8})
	cl.place(KindStream, "ns", "wide", 0, 0, 0, 0)
	fb := cl.node(0)
	c := connect(t, fb)
	p := newProducer(t, c)
	ctx := context.Background()
	want := map[uint32]uint64{}
	for i := range 40 {
		key := fmt.Appendf(nil, "key-%d", i)
		if _, err := p.PublishKeyed(ctx, "ns", "wide", key, []byte("x")); err != nil {
			t.Fatal(err)
		}
		want[wire.ShardForKey(key, 4)]++
	}
	if len(want) < 2 {
		t.Fatalf("40 keys all on one shard: %v", want)
	}
	next := map[uint32]uint64{}
	for _, s := range fb.idemSends() {
		if s.seq != next[s.shard] {
			t.Fatalf("shard %d got sequence %d, want %d", s.shard, s.seq, next[s.shard])
		}
		next[s.shard]++
	}
	for sh, n := range want {
		if next[sh] != n {
			t.Fatalf("shard %d got %d batches, want %d", sh, next[sh], n)
		}
	}
	if _, widths, _ := cl.counts(); widths != 1 {
		t.Fatalf("the stream's width was asked %d times, want once", widths)
	}
}

// A ClusterClient's producer sends each shard's batches to the shard's
// owner; when the shard moves, the old owner's not_leader sends it to the
// new one, where the same producer's sequences go on (the fake cluster
// keeps one producer table, as a replicated log would).
func TestClusterIdempotentProducerFollowsTheOwner(t *testing.T) {
	cl := newFakeCluster(t, 2, fakeOpts{features: idemFakeFeatures, window: 4})
	cl.place(KindStream, "ns", "s", 0, 1)
	cc := connectClusterTest(t, cl, 0)
	learnOwners(t, cc, KindStream, "ns", "s")
	p, err := cc.IdempotentProducer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Keys on both shards: shard 0 is node 0's, shard 1 node 1's.
	var keys [2][]byte
	for i := 0; keys[0] == nil || keys[1] == nil; i++ {
		k := fmt.Appendf(nil, "key-%d", i)
		if sh := wire.ShardForKey(k, 2); keys[sh] == nil {
			keys[sh] = k
		}
	}
	for i := range 4 {
		for sh := range 2 {
			if _, err := p.PublishKeyed(ctx, "ns", "s", keys[sh], fmt.Appendf(nil, "before-%d-%d", sh, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cl.place(KindStream, "ns", "s", 1, 1) // shard 0 moves to node 1
	for i := range 4 {
		if _, err := p.PublishKeyed(ctx, "ns", "s", keys[0], fmt.Appendf(nil, "after-%d", i)); err != nil {
			t.Fatalf("publish after the move: %v", err)
		}
	}
	next := map[uint32]uint64{}
	tookAfterMove := map[int]int{}
	for _, s := range cl.node(0).idemSends() {
		if s.id != p.ProducerID() {
			t.Fatalf("batch under producer %d, want %d", s.id, p.ProducerID())
		}
		if s.seq != next[s.shard] {
			t.Fatalf("shard %d took sequence %d, want %d", s.shard, s.seq, next[s.shard])
		}
		next[s.shard]++
		if s.shard == 0 && s.seq >= 4 {
			tookAfterMove[s.node]++
		}
		if s.shard == 1 && s.node != 1 {
			t.Fatalf("shard 1's batch %d went to node %d", s.seq, s.node)
		}
	}
	if next[0] != 8 || next[1] != 4 || tookAfterMove[1] != 4 || tookAfterMove[0] != 0 {
		t.Fatalf("sequences %v; after the move node 0 took %d, node 1 %d", next, tookAfterMove[0], tookAfterMove[1])
	}
	if recs := cl.node(0).records("ns", "s"); len(recs) != 12 {
		t.Fatalf("%d records, want 12", len(recs))
	}
}

// loseOnce is a fake broker's loseAnswer that loses the answer to the
// first publish of sequence seq, once.
func loseOnce(seq uint64) func(*wire.PublishIdempotent) bool {
	var once sync.Once
	return func(m *wire.PublishIdempotent) bool {
		lost := false
		if *m.Sequence == seq {
			once.Do(func() { lost = true })
		}
		return lost
	}
}

// PublishBatches made again after it failed sends nothing twice: the
// batches of the failed call that were handed over are waited for rather
// than sent under new sequences, so each lands once, and the call made
// again returns every batch's offset. A call with other batches is a new
// call.
func TestPublishBatchesMadeAgainSkipsWhatWasHandedOver(t *testing.T) {
	hold := make(chan struct{})
	fb := newFakeBroker(t, fakeOpts{features: idemFakeFeatures, window: 8, hold: hold})
	c := connect(t, fb)
	p := newProducer(t, c)
	var batches [][][]byte
	for i := range 5 {
		batches = append(batches, [][]byte{fmt.Appendf(nil, "b-%d", i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	offs, err := p.PublishBatches(ctx, "ns", "hold", batches)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || len(offs) != 0 {
		t.Fatalf("the held call: %v %v", offs, err)
	}
	close(hold)
	offs, err = p.PublishBatches(context.Background(), "ns", "hold", batches)
	if err != nil || fmt.Sprint(offs) != "[0 1 2 3 4]" {
		t.Fatalf("the call made again: %v %v", offs, err)
	}
	// Made a third time after it succeeded, it is a new call.
	if offs, err = p.PublishBatches(context.Background(), "ns", "hold", batches[:2]); err != nil || fmt.Sprint(offs) != "[5 6]" {
		t.Fatalf("a new call: %v %v", offs, err)
	}
	recs := fb.records("ns", "hold")
	if len(recs) != 7 {
		t.Fatalf("%d records, want 7 (each batch of the failed call once, then 2)", len(recs))
	}
	for i, r := range recs {
		if want := fmt.Sprintf("b-%d", i%5); i < 5 && string(r.payload) != want {
			t.Fatalf("record %d: %q, want %q", i, r.payload, want)
		}
	}
	if n := len(fb.idemSends()); n != 7 {
		t.Fatalf("%d publish_idempotent sends, want 7", n)
	}
}

// A failed call is matched byte for byte: the same batches with one byte
// changed are another call, and the producer keeps only the newest
// maxFailedCalls failed calls.
func TestAFailedBatchesCallIsMatchedExactly(t *testing.T) {
	b := [][][]byte{{[]byte("a"), []byte("b")}, {[]byte("c")}}
	c := newBatchesCall("ns/s", 2)
	for i := range b {
		c.slots[i].payloads = ownPayloads(b[i])
	}
	for _, tc := range []struct {
		name    string
		batches [][][]byte
		want    bool
	}{
		{"ns/s", [][][]byte{{[]byte("a"), []byte("b")}, {[]byte("c")}}, true},
		{"ns/t", b, false},
		{"ns/s", [][][]byte{{[]byte("a"), []byte("x")}, {[]byte("c")}}, false},
		{"ns/s", [][][]byte{{[]byte("a"), []byte("b")}}, false},
		{"ns/s", [][][]byte{{[]byte("a")}, {[]byte("b"), []byte("c")}}, false},
	} {
		if got := c.same(tc.name, tc.batches); got != tc.want {
			t.Errorf("same(%s, %q) = %v, want %v", tc.name, tc.batches, got, tc.want)
		}
	}
	b[0][0][0] = 'z' // the call kept its own copy
	if !c.same("ns/s", [][][]byte{{[]byte("a"), []byte("b")}, {[]byte("c")}}) {
		t.Error("the kept call changed with the caller's slices")
	}
	p := &IdempotentProducer{}
	for i := range maxFailedCalls + 1 {
		p.keepFailedCall(newBatchesCall(fmt.Sprint(i), 0))
	}
	if len(p.failedCalls) != maxFailedCalls || p.failedCalls[0].name != "1" {
		t.Fatalf("kept %d calls, oldest %q", len(p.failedCalls), p.failedCalls[0].name)
	}
	if p.takeFailedCall("1", nil) == nil || p.takeFailedCall("1", nil) != nil || len(p.failedCalls) != maxFailedCalls-1 {
		t.Fatal("a taken call was not removed")
	}
}
