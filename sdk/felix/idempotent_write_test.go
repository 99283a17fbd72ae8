package felix

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// writeLog records the Write calls on the producer's lane streams.
type writeLog struct {
	mu   sync.Mutex
	lens []int
}

func (w *writeLog) wrap(s transport.Stream) transport.Stream { return loggedStream{s, w} }

func (w *writeLog) writes() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.lens...)
}

type loggedStream struct {
	transport.Stream
	log *writeLog
}

func (s loggedStream) Write(b []byte) (int, error) {
	s.log.mu.Lock()
	s.log.lens = append(s.log.lens, len(b))
	s.log.mu.Unlock()
	return s.Stream.Write(b)
}

// queuedProducer starts a producer on a fake broker whose producer_init
// waits for gate, and hands it batches with PublishBatches: the sender
// holds the first batch while it takes the producer id, the others queue
// behind it. It returns once all of them are queued, with the call's
// result channel.
func queuedProducer(t *testing.T, batches [][][]byte) (*fakeBroker, *IdempotentProducer, *writeLog, chan struct{}, chan error) {
	t.Helper()
	gate := make(chan struct{})
	fb := newFakeBroker(t, fakeOpts{features: idemFakeFeatures, window: maxIdemInflight, initGate: gate})
	c := connect(t, fb)
	wl := &writeLog{}
	p := newIdempotentProducer(&clientRouter{base: c, cur: c}, c.cfg, wl.wrap)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	res := make(chan error, 1)
	go func() {
		offs, err := p.PublishBatches(ctx, "ns", "s", batches)
		if err == nil && len(offs) != len(batches) {
			err = fmt.Errorf("%d offsets for %d batches", len(offs), len(batches))
		}
		res <- err
	}()
	for len(p.jobs) < len(batches)-1 {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d batches queued", len(p.jobs), len(batches)-1)
		}
		time.Sleep(time.Millisecond)
	}
	return fb, p, wl, gate, res
}

// Batches ready together leave in one write of the producer's stream, as
// plain publishes share writes, numbered in order and each landing once.
func TestIdempotentProducerWritesBatchesReadyTogetherAtOnce(t *testing.T) {
	const n = 32
	var batches [][][]byte
	for i := range n {
		batches = append(batches, [][]byte{fmt.Appendf(nil, "batch-%d", i)})
	}
	fb, p, wl, gate, res := queuedProducer(t, batches)
	close(gate)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if w := wl.writes(); len(w) != 1 {
		t.Fatalf("%d batches ready together went out in %d writes %v, want 1", n, len(w), w)
	}
	for i, s := range fb.idemSends() {
		if s.id != p.ProducerID() || s.seq != uint64(i) {
			t.Fatalf("send %d: %+v", i, s)
		}
	}
	recs := fb.records("ns", "s")
	if len(recs) != n {
		t.Fatalf("%d records, want %d", len(recs), n)
	}
	for i, r := range recs {
		if !bytes.Equal(r.payload, batches[i][0]) {
			t.Fatalf("record %d is %q", i, r.payload)
		}
	}
}

// A write carries at most idemWriteBytes and one batch more: large
// batches ready together are split over several writes.
func TestIdempotentProducerBoundsItsWrites(t *testing.T) {
	const n, size = 8, 100 << 10
	var batches [][][]byte
	for i := range n {
		batches = append(batches, [][]byte{bytes.Repeat([]byte{byte('a' + i)}, size)})
	}
	one, err := wire.AppendMessageFrame(nil, &wire.PublishIdempotent{TenantID: "default", Namespace: "ns", Stream: "s",
		Payloads: batches[0], ProducerID: 1 << 62, Sequence: new(uint64), RequestID: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	fb, _, wl, gate, res := queuedProducer(t, batches)
	close(gate)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	w := wl.writes()
	total := 0
	for _, l := range w {
		total += l
		if l >= idemWriteBytes+len(one)+64 {
			t.Fatalf("a write of %d bytes (bound %d + one batch of about %d): %v", l, idemWriteBytes, len(one), w)
		}
	}
	if len(w) < 2 || len(w) >= n || total < n*len(one)*9/10 {
		t.Fatalf("%d batches of %d bytes went out in writes %v", n, len(one), w)
	}
	if got := len(fb.records("ns", "s")); got != n {
		t.Fatalf("%d records, want %d", got, n)
	}
}
