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

const widthFakeFeatures = idemFakeFeatures | wire.FeaturePublishWidth | wire.FeatureExplicitShard

// keyOnShard returns a key ShardForKey puts on shard of width, and not on
// shard of other (when other is not 0).
func keyOnShard(shard, width uint32) []byte {
	for i := 0; ; i++ {
		k := fmt.Appendf(nil, "key-%d", i)
		if wire.ShardForKey(k, width) == shard {
			return k
		}
	}
}

// payloadsOf returns the fake's records of ns/stream as strings.
func payloadsOf(fb *fakeBroker, ns, stream string) []string {
	var out []string
	for _, r := range fb.records(ns, stream) {
		out = append(out, string(r.payload))
	}
	return out
}

// A stream whose width changes: the producer's batch declared under the
// old width is refused stale_width (nothing written), the producer asks
// the width again and starts the stream's sequences again under a fresh
// producer id, and the batch lands once. ProducerID keeps the first id.
func TestAnIdempotentProducerStartsAFreshIdUnderANewWidth(t *testing.T) {
	cl := newFakeCluster(t, 1, fakeOpts{features: widthFakeFeatures, window: 8})
	cl.place(KindStream, "ns", "s", 0, 0)
	fb := cl.node(0)
	p := newProducer(t, connect(t, fb))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 6 {
		if _, err := p.PublishKeyed(ctx, "ns", "s", keyOnShard(uint32(i%2), 2), fmt.Appendf(nil, "old-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	first := p.ProducerIDFor("ns", "s")
	cl.place(KindStream, "ns", "s", 0, 0, 0) // the stream now has 3 shards
	for i := range 6 {
		if _, err := p.PublishKeyed(ctx, "ns", "s", keyOnShard(uint32(i%3), 3), fmt.Appendf(nil, "new-%d", i)); err != nil {
			t.Fatalf("publish under the new width: %v", err)
		}
	}
	now := p.ProducerIDFor("ns", "s")
	if now == first || now == 0 || p.ProducerID() != first {
		t.Fatalf("ids: first %d, now %d, ProducerID %d", first, now, p.ProducerID())
	}
	fb.mu.Lock()
	stale := fb.idem.stale
	fb.mu.Unlock()
	if stale != 1 {
		t.Fatalf("%d batches refused stale_width, want 1", stale)
	}
	next := map[uint32]uint64{}
	for _, s := range fb.idemSends() {
		if s.id != now {
			continue
		}
		if s.seq != next[s.shard] {
			t.Fatalf("under the new id shard %d took sequence %d, want %d", s.shard, s.seq, next[s.shard])
		}
		next[s.shard]++
	}
	if next[0] != 2 || next[1] != 2 || next[2] != 2 {
		t.Fatalf("sequences under the new id: %v", next)
	}
	got := payloadsOf(fb, "ns", "s")
	want := []string{"old-0", "old-1", "old-2", "old-3", "old-4", "old-5", "new-0", "new-1", "new-2", "new-3", "new-4", "new-5"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	if _, widths, _ := cl.counts(); widths != 2 {
		t.Fatalf("the width was asked %d times, want twice", widths)
	}
}

// loseAndResize is a loseAnswer that, the first time it sees payload,
// resizes the fake cluster's stream ns/s to width shards and loses the
// answer: the batch is written, and its re-send meets the new width.
func loseAndResize(cl *fakeCluster, payload string, width int) func(*wire.PublishIdempotent) bool {
	var once sync.Once
	return func(m *wire.PublishIdempotent) bool {
		lost := false
		if string(m.Payloads[0]) == payload {
			once.Do(func() {
				cl.place(KindStream, "ns", "s", make([]int, width)...)
				lost = true
			})
		}
		return lost
	}
}

// A batch in doubt when the stream's width changes is not numbered
// afresh: its re-send under the width that numbered it is refused with an
// *InDoubtError (unwrapping to stale_width), later calls on the stream
// fail without sending while it is held, and AbandonInDoubt gives it up
// and numbers the stream afresh under a new id.
func TestABatchInDoubtUnderAGoneWidthIsRefusedUntilAbandoned(t *testing.T) {
	var cl *fakeCluster
	var lose func(*wire.PublishIdempotent) bool
	cl = newFakeCluster(t, 1, fakeOpts{features: widthFakeFeatures, window: 8,
		loseAnswer: func(m *wire.PublishIdempotent) bool { return lose(m) }})
	lose = loseAndResize(cl, "doubt", 3)
	cl.place(KindStream, "ns", "s", 0, 0)
	fb := cl.node(0)
	p := newProducer(t, connect(t, fb))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := keyOnShard(1, 2)
	if _, err := p.PublishKeyed(ctx, "ns", "s", key, []byte("before")); err != nil {
		t.Fatal(err)
	}
	first := p.ProducerIDFor("ns", "s")
	_, err := p.PublishKeyed(ctx, "ns", "s", key, []byte("doubt"))
	var ide *InDoubtError
	if !errors.As(err, &ide) || ide.NotSent || ide.Width != 2 || ide.ProducerID != first || ide.Sequence != 1 || ide.Shard != 1 {
		t.Fatalf("the re-send under the gone width: %#v (%v)", ide, err)
	}
	if be := asBroker(t, err); be.Code != wire.CodeStaleWidth {
		t.Fatalf("unwraps to %v, want stale_width", be)
	}
	// Held: the next call sends it again (refused again) and is not sent.
	fb.mu.Lock()
	staleBefore := fb.idem.stale
	fb.mu.Unlock()
	_, err = p.PublishKeyed(ctx, "ns", "s", keyOnShard(0, 3), []byte("blocked"))
	if !errors.As(err, &ide) || !ide.NotSent || ide.InDoubt != 1 {
		t.Fatalf("a call while a batch is held: %#v (%v)", ide, err)
	}
	fb.mu.Lock()
	resent := fb.idem.stale - staleBefore
	fb.mu.Unlock()
	if resent != 1 {
		t.Fatalf("the held batch was sent again %d times before the call failed, want once", resent)
	}
	if _, err := p.Publish(ctx, "ns", "s", []byte("unkeyed blocked")); !errors.As(err, &ide) || !ide.NotSent {
		t.Fatalf("an unkeyed call while a batch is held: %v", err)
	}
	n, err := p.AbandonInDoubt(ctx, "ns", "s")
	if err != nil || n != 1 {
		t.Fatalf("AbandonInDoubt: %d %v", n, err)
	}
	if id := p.ProducerIDFor("ns", "s"); id != 0 {
		t.Fatalf("ProducerIDFor after AbandonInDoubt, before a batch: %d", id)
	}
	if _, err := p.PublishKeyed(ctx, "ns", "s", keyOnShard(0, 3), []byte("after")); err != nil {
		t.Fatalf("publish after AbandonInDoubt: %v", err)
	}
	if now := p.ProducerIDFor("ns", "s"); now == first || now == 0 || p.ProducerID() != first {
		t.Fatalf("ids after AbandonInDoubt: first %d, now %d, ProducerID %d", first, now, p.ProducerID())
	}
	sends := fb.idemSends()
	if last := sends[len(sends)-1]; last.seq != 0 || last.id == first {
		t.Fatalf("the batch after AbandonInDoubt went out as %+v", last)
	}
	// "doubt" landed once (its first send); nothing blocked was written.
	if got := fmt.Sprint(payloadsOf(fb, "ns", "s")); got != "[before doubt after]" {
		t.Fatalf("records %s", got)
	}
	if n, err := p.AbandonInDoubt(ctx, "ns", "s"); err != nil || n != 0 {
		t.Fatalf("a second AbandonInDoubt: %d %v", n, err)
	}
}

// A held batch settles when the width comes back: the next call sends it
// again under its own width and id, it is answered as the duplicate it
// is, and the stream goes on under the same producer id.
func TestAHeldBatchSettlesWhenTheWidthComesBack(t *testing.T) {
	var cl *fakeCluster
	var lose func(*wire.PublishIdempotent) bool
	cl = newFakeCluster(t, 1, fakeOpts{features: widthFakeFeatures, window: 8,
		loseAnswer: func(m *wire.PublishIdempotent) bool { return lose(m) }})
	lose = loseAndResize(cl, "doubt", 3)
	cl.place(KindStream, "ns", "s", 0, 0)
	fb := cl.node(0)
	p := newProducer(t, connect(t, fb))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := keyOnShard(1, 2)
	_, err := p.PublishKeyed(ctx, "ns", "s", key, []byte("doubt"))
	var ide *InDoubtError
	if !errors.As(err, &ide) || ide.NotSent {
		t.Fatalf("the re-send under the gone width: %v", err)
	}
	first := p.ProducerIDFor("ns", "s")
	cl.place(KindStream, "ns", "s", 0, 0) // back to 2 shards
	if _, err := p.PublishKeyed(ctx, "ns", "s", key, []byte("next")); err != nil {
		t.Fatalf("publish once the width came back: %v", err)
	}
	if id := p.ProducerIDFor("ns", "s"); id != first {
		t.Fatalf("the stream went to producer %d, want %d still", id, first)
	}
	if got := fmt.Sprint(payloadsOf(fb, "ns", "s")); got != "[doubt next]" {
		t.Fatalf("records %s", got)
	}
	sends := fb.idemSends()
	if last := sends[len(sends)-1]; last.id != first || last.seq != 1 || last.shard != 1 {
		t.Fatalf("the next batch went out as %+v", last)
	}
}
