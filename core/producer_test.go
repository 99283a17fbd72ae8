package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/felixmq/felix/wire"
)

// producerShard returns shard 0 of a fresh stream: durable under dir, or
// in memory when dir is empty.
func producerShard(t *testing.T, dir string, cfg Config) (*Broker, *Shard) {
	t.Helper()
	var b *Broker
	var st *Stream
	if dir != "" {
		b, st = newDurableStream(t, dir, cfg, wire.StreamSpec{})
	} else {
		b = NewBroker(cfg)
		t.Cleanup(b.Close)
		if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s"}); err != nil {
			t.Fatal(err)
		}
		st, _ = b.Stream(StreamKey{"t", "ns", "s"})
	}
	sh, err := st.Shard(0)
	if err != nil {
		t.Fatal(err)
	}
	return b, sh
}

func batchOf(seq uint64, tag string) [][]byte {
	return [][]byte{fmt.Appendf(nil, "%s-%d-a", tag, seq), fmt.Appendf(nil, "%s-%d-b", tag, seq)}
}

// wantRefusal checks err is a producer refusal with reason (and, for a
// gap, expected).
func wantRefusal(t *testing.T, err error, reason string, expected uint64) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) {
		t.Fatalf("err %v, want a %s refusal", err, reason)
	}
	r, ok := we.ProducerRefusalOf()
	if !ok || r.Reason != reason {
		t.Fatalf("err %v (detail %v), want a %s refusal", err, we.Detail, reason)
	}
	if reason == wire.ReasonSequenceGap && (r.Expected == nil || *r.Expected != expected) {
		t.Fatalf("gap refusal expects %v, want %d", r.Expected, expected)
	}
	if we.Retry != wire.RetryFatal {
		t.Fatalf("retry class %s, want fatal", we.Retry)
	}
}

// Every answer of the producer table, on an in-memory shard and on a
// durable one: appends in sequence, a re-send answered from memory with
// the first copy's offset and not appended, each refusal writing nothing.
func TestIdempotentPublishAnswers(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			dir := ""
			if durable {
				dir = t.TempDir()
			}
			_, sh := producerShard(t, dir, Config{})
			ctx := context.Background()
			pub := func(id, seq uint64, b [][]byte) (uint64, error) {
				return sh.PublishIdempotent(ctx, b, "", id, seq)
			}
			const id = 77
			// An unknown producer may start only at 0.
			_, err := pub(id, 3, batchOf(3, "x"))
			wantRefusal(t, err, wire.ReasonUnknownProducer, 0)
			for seq := range uint64(70) {
				off, err := pub(id, seq, batchOf(seq, "x"))
				if err != nil || off != seq*2 {
					t.Fatalf("seq %d: offset %d, %v; want %d", seq, off, err, seq*2)
				}
			}
			next := sh.NextOffset()
			// A re-send of a held sequence: the first copy's offset, nothing appended.
			for _, seq := range []uint64{69, 40, 6} {
				off, err := pub(id, seq, batchOf(seq, "x"))
				if err != nil || off != seq*2 {
					t.Fatalf("re-send of %d: offset %d, %v; want %d", seq, off, err, seq*2)
				}
			}
			// A different batch under a held sequence.
			_, err = pub(id, 69, batchOf(69, "other"))
			wantRefusal(t, err, wire.ReasonSequenceReused, 0)
			_, err = pub(id, 69, batchOf(69, "x")[:1])
			wantRefusal(t, err, wire.ReasonSequenceReused, 0)
			// Older than the 64 remembered (70 appended: 0..5 are gone).
			_, err = pub(id, 5, batchOf(5, "x"))
			wantRefusal(t, err, wire.ReasonSequenceExpired, 0)
			// Beyond the next.
			_, err = pub(id, 72, batchOf(72, "x"))
			wantRefusal(t, err, wire.ReasonSequenceGap, 70)
			if got := sh.NextOffset(); got != next {
				t.Fatalf("refusals and re-sends moved the shard from %d to %d", next, got)
			}
			// Another producer is independent of the first.
			if off, err := pub(78, 0, batchOf(0, "y")); err != nil || off != next {
				t.Fatalf("second producer: %d %v", off, err)
			}
			if off, err := pub(id, 70, batchOf(70, "x")); err != nil || off != next+2 {
				t.Fatalf("seq 70: %d %v", off, err)
			}
			if durable {
				recs, _, err := sh.Read(0, sh.NextOffset(), 1000, 1<<20)
				if err != nil || len(recs) != int(sh.NextOffset()) {
					t.Fatalf("log holds %d records (%v), want %d", len(recs), err, sh.NextOffset())
				}
				for i := range 70 {
					if string(recs[2*i].Payload) != fmt.Sprintf("x-%d-a", i) {
						t.Fatalf("offset %d: %q", 2*i, recs[2*i].Payload)
					}
				}
			}
		})
	}
}

// The table is bounded: past ProducersPerShard the least recently used
// producer is forgotten, its next batch refused unknown_producer, and the
// eviction counted.
func TestIdempotentProducerTableEvictsLeastRecentlyUsed(t *testing.T) {
	b, sh := producerShard(t, "", Config{ProducersPerShard: 3})
	ctx := context.Background()
	for id := uint64(1); id <= 3; id++ {
		if _, err := sh.PublishIdempotent(ctx, batchOf(0, "p"), "", id, 0); err != nil {
			t.Fatal(err)
		}
	}
	// Producer 1 is used again, so 2 is now the least recently used.
	if _, err := sh.PublishIdempotent(ctx, batchOf(1, "p"), "", 1, 1); err != nil {
		t.Fatal(err)
	}
	evicted := b.cfg.metrics.producers.evicted.Get()
	if _, err := sh.PublishIdempotent(ctx, batchOf(0, "p"), "", 4, 0); err != nil {
		t.Fatal(err)
	}
	if got := b.cfg.metrics.producers.evicted.Get(); got != evicted+1 {
		t.Fatalf("evictions %d, want %d", got, evicted+1)
	}
	if n := sh.ProducerCount(); n != 3 {
		t.Fatalf("table holds %d producers, want 3", n)
	}
	_, err := sh.PublishIdempotent(ctx, batchOf(1, "p"), "", 2, 1)
	wantRefusal(t, err, wire.ReasonUnknownProducer, 0)
	for _, id := range []uint64{1, 3, 4} {
		if _, err := sh.PublishIdempotent(ctx, batchOf(0, "p"), "", id, 0); err != nil {
			t.Fatalf("producer %d kept: re-send of 0: %v", id, err)
		}
	}
}

// A durable shard rebuilds its producer table from the log when it opens:
// after a restart a re-send is answered with the first copy's offset and
// not appended, a reused sequence is still refused, and the producer goes
// on from its next sequence.
func TestIdempotentTableRebuiltFromTheLog(t *testing.T) {
	dir := t.TempDir()
	b, sh := producerShard(t, dir, Config{})
	ctx := context.Background()
	for seq := range uint64(10) {
		if _, err := sh.PublishIdempotent(ctx, batchOf(seq, "x"), "", 9, seq); err != nil {
			t.Fatal(err)
		}
		// Plain publishes in between carry no producer block.
		if _, err := sh.Publish(ctx, [][]byte{[]byte("plain")}, ""); err != nil {
			t.Fatal(err)
		}
	}
	next := sh.NextOffset()
	b.Close()

	_, sh = producerShard(t, dir, Config{})
	if sh.NextOffset() != next {
		t.Fatalf("reopened at %d, want %d", sh.NextOffset(), next)
	}
	if off, err := sh.PublishIdempotent(ctx, batchOf(9, "x"), "", 9, 9); err != nil || off != 27 {
		t.Fatalf("re-send after restart: %d %v, want 27", off, err)
	}
	_, err := sh.PublishIdempotent(ctx, batchOf(4, "y"), "", 9, 4)
	wantRefusal(t, err, wire.ReasonSequenceReused, 0)
	_, err = sh.PublishIdempotent(ctx, batchOf(11, "x"), "", 9, 11)
	wantRefusal(t, err, wire.ReasonSequenceGap, 10)
	if sh.NextOffset() != next {
		t.Fatalf("re-send appended: next %d, want %d", sh.NextOffset(), next)
	}
	if off, err := sh.PublishIdempotent(ctx, batchOf(10, "x"), "", 9, 10); err != nil || off != next {
		t.Fatalf("next sequence after restart: %d %v, want %d", off, err, next)
	}
}

// The rebuild reads at most ProducerScanRecords records: a producer whose
// batches all lie before them is unknown after the restart (the safe
// answer), one inside them is known.
func TestIdempotentRebuildScanIsBounded(t *testing.T) {
	dir := t.TempDir()
	b, sh := producerShard(t, dir, Config{})
	ctx := context.Background()
	if _, err := sh.PublishIdempotent(ctx, batchOf(0, "old"), "", 1, 0); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := sh.Publish(ctx, [][]byte{[]byte("plain")}, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sh.PublishIdempotent(ctx, batchOf(0, "new"), "", 2, 0); err != nil {
		t.Fatal(err)
	}
	b.Close()
	_, sh = producerShard(t, dir, Config{ProducerScanRecords: 10})
	_, err := sh.PublishIdempotent(ctx, batchOf(1, "old"), "", 1, 1)
	wantRefusal(t, err, wire.ReasonUnknownProducer, 0)
	if _, err := sh.PublishIdempotent(ctx, batchOf(0, "new"), "", 2, 0); err != nil {
		t.Fatalf("producer inside the scan: %v", err)
	}
	if n := sh.ProducerCount(); n != 1 {
		t.Fatalf("rebuilt %d producers, want 1", n)
	}
}

// A re-send claimed while the first copy is still finishing waits for it:
// its Finish returns the first copy's outcome, and it is not a claim of
// its own (the next plain claim follows the first copy directly).
func TestIdempotentDuplicateClaimWaitsForTheFirstCopy(t *testing.T) {
	_, sh := producerShard(t, t.TempDir(), Config{})
	first, err := sh.ClaimIdempotent(batchOf(0, "x"), "", 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	dup, err := sh.ClaimIdempotent(batchOf(0, "x"), "", 5, 0)
	if err != nil || !dup.Duplicate() || dup.BaseOffset() != first.BaseOffset() {
		t.Fatalf("re-send: %v %+v", err, dup)
	}
	done := make(chan error, 1)
	go func() { done <- dup.Finish(context.Background()) }()
	if err := first.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("duplicate's finish: %v", err)
	}
	c, err := sh.Claim([][]byte{[]byte("p")}, "")
	if err != nil || c.BaseOffset() != 2 {
		t.Fatalf("next claim at %d %v, want 2", c.BaseOffset(), err)
	}
	if err := c.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Copies of one batch racing under one sequence (a re-send crossing its
// first copy on another connection) land once: every copy is answered
// with the same offset, and the shard holds the batch once.
func TestIdempotentCopiesRacingLandOnce(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			dir := ""
			if durable {
				dir = t.TempDir()
			}
			_, sh := producerShard(t, dir, Config{})
			const copies, rounds = 8, 20
			for seq := range uint64(rounds) {
				offs := make(chan uint64, copies)
				var wg sync.WaitGroup
				for range copies {
					wg.Add(1)
					go func() {
						defer wg.Done()
						off, err := sh.PublishIdempotent(context.Background(), batchOf(seq, "r"), "", 3, seq)
						if err != nil {
							t.Errorf("seq %d: %v", seq, err)
							return
						}
						offs <- off
					}()
				}
				wg.Wait()
				close(offs)
				for off := range offs {
					if off != seq*2 {
						t.Fatalf("seq %d answered at %d, want %d", seq, off, seq*2)
					}
				}
			}
			if got := sh.NextOffset(); got != 2*rounds {
				t.Fatalf("the shard took %d offsets for %d batches of 2", got, rounds)
			}
		})
	}
}
