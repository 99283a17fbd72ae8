package broker

import (
	"context"
	"io"
	"runtime"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// streamWriter is the only goroutine writing a control stream's send
// half. The control loop hands it encoded frames on outC (bounded; the
// loop waits for room). Answers to acked publishes are handed over in ans:
// each takes a token of owedC before the publish is queued, so ans never
// holds more than the tokens, and a publish completion never blocks on a
// slow client. Each write carries every frame already queued.
type streamWriter struct {
	w      io.Writer
	outC   chan []byte
	owedC  chan struct{} // one token per answer owed
	stopC  chan struct{}
	failed context.CancelCauseFunc // called when a write fails
	owed   *metrics.Gauge          // the broker's count of answers owed
	wg     sync.WaitGroup
	buf    []byte

	ansMu sync.Mutex
	ans   [][]byte      // answers handed over, not yet written
	ansC  chan struct{} // signalled when ans gains an answer
	spare [][]byte      // the writer's: storage for the next swap of ans

	// ordered (a stream that negotiated FEATURE_PUBLISH_PIPELINE): answers
	// are written in the order their slots were reserved. Slot t's answer
	// waits in ring[t%len(ring)] until every earlier one is written. Set
	// by pipeline before any slot is reserved.
	ordered   bool
	ring      []ansSlot // guarded by ansMu
	reserved  uint64    // the next slot's ticket; guarded by ansMu
	nextWrite uint64    // the ticket written next; the writer's
}

// ansSlot is one ordered answer: set once it was handed over (b empty for
// a slot given back unused).
type ansSlot struct {
	b   []byte
	set bool
}

// controlQueue bounds the frames the control loop may queue ahead of the
// writer.
const controlQueue = 64

func newStreamWriter(w io.Writer, maxOwed int, owed *metrics.Gauge, failed context.CancelCauseFunc) *streamWriter {
	sw := &streamWriter{
		w:      w,
		outC:   make(chan []byte, controlQueue),
		ansC:   make(chan struct{}, 1),
		owedC:  make(chan struct{}, maxOwed),
		stopC:  make(chan struct{}),
		failed: failed,
		owed:   owed,
	}
	sw.wg.Add(1)
	go sw.run()
	return sw
}

// send queues a frame, waiting for room until ctx ends.
func (sw *streamWriter) send(ctx context.Context, b []byte) error {
	select {
	case sw.outC <- b:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// pipeline makes the writer answer in reservation order, with window
// slots (the stream's publish_window). It runs once, after auth and
// before any slot is reserved.
func (sw *streamWriter) pipeline(window int) {
	sw.ansMu.Lock()
	defer sw.ansMu.Unlock()
	sw.ordered = true
	sw.owedC = make(chan struct{}, window)
	sw.ring = make([]ansSlot, window)
}

// owedTicket names a reserved slot; on an ordered writer, its place in
// the answer order.
type owedTicket uint64

// reserveOwed takes a slot for an answer that will be sent later with
// sendOwed (or given back with cancelOwed). It waits until a slot is free
// or ctx ends: on a stream's read loop, a full set of slots stops reading.
func (sw *streamWriter) reserveOwed(ctx context.Context) (owedTicket, error) {
	select {
	case sw.owedC <- struct{}{}:
		sw.owed.Inc()
		sw.ansMu.Lock()
		t := sw.reserved
		sw.reserved++
		sw.ansMu.Unlock()
		return owedTicket(t), nil
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
}

// sendOwed queues the answer of slot t. It never blocks.
func (sw *streamWriter) sendOwed(t owedTicket, b []byte) {
	sw.ansMu.Lock()
	if sw.ordered {
		sw.ring[uint64(t)%uint64(len(sw.ring))] = ansSlot{b: b, set: true}
	} else {
		sw.ans = append(sw.ans, b)
	}
	sw.ansMu.Unlock()
	select {
	case sw.ansC <- struct{}{}:
	default:
	}
}

// cancelOwed frees slot t, which will carry no answer. On an ordered
// writer the answers behind it may then go.
func (sw *streamWriter) cancelOwed(t owedTicket) {
	if sw.ordered {
		sw.sendOwed(t, nil)
		return
	}
	<-sw.owedC
	sw.owed.Dec()
}

// waitOwed waits until every reserved answer has been handed to the
// writer, or ctx ends. Nothing may reserve meanwhile (the control loop has
// ended), so the count of owed answers only falls.
func (sw *streamWriter) waitOwed(ctx context.Context) error {
	if len(sw.owedC) == 0 {
		// Nothing owed, as on every stream that carried no acked publish
		// (a subscribe's, a cache watch's): no need to take every slot.
		return nil
	}
	n := 0
	defer func() {
		for ; n > 0; n-- {
			<-sw.owedC
		}
	}()
	for n < cap(sw.owedC) {
		select {
		case sw.owedC <- struct{}{}:
			n++
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// stop writes whatever is queued and ends the writer.
func (sw *streamWriter) stop() {
	close(sw.stopC)
	sw.wg.Wait()
}

func (sw *streamWriter) run() {
	defer sw.wg.Done()
	var err error
	for {
		select {
		case b := <-sw.outC:
			err = sw.flush(append(sw.buf[:0], b...), err)
		case <-sw.ansC:
			// Answers are settled by many goroutines at once (one fsync
			// completes a batch of publishes): let the others queue theirs
			// so that one write carries them all.
			runtime.Gosched()
			err = sw.flush(sw.buf[:0], err)
		case <-sw.stopC:
			err = sw.flush(sw.buf[:0], err)
			return
		}
	}
}

// flush adds every frame already queued to buf and writes it in one
// write. After a failed write it only discards, so owed slots are still
// freed.
func (sw *streamWriter) flush(buf []byte, prevErr error) error {
	for more := true; more; {
		more = sw.takeAnswers(&buf)
		select {
		case b := <-sw.outC:
			buf = append(buf, b...)
			more = true
		default:
		}
	}
	sw.buf = buf
	if cap(sw.buf) > 1<<20 {
		sw.buf = nil
	}
	if prevErr != nil || len(buf) == 0 {
		return prevErr
	}
	if _, err := sw.w.Write(buf); err != nil {
		sw.failed(err)
		return err
	}
	return nil
}

// takeAnswers appends the answers handed over to buf, freeing their
// slots, and reports whether there were any.
func (sw *streamWriter) takeAnswers(buf *[]byte) bool {
	if sw.ordered {
		return sw.takeOrdered(buf)
	}
	sw.ansMu.Lock()
	ans := sw.ans
	sw.ans = sw.spare[:0]
	sw.ansMu.Unlock()
	for i, b := range ans {
		*buf = append(*buf, b...)
		ans[i] = nil
		<-sw.owedC
		sw.owed.Dec()
	}
	if cap(ans) <= controlQueue {
		sw.spare = ans[:0]
	} else {
		sw.spare = nil
	}
	return len(ans) > 0
}

// takeOrdered appends the answers of the slots from nextWrite on that
// have been handed over, stopping at the first still owed, and frees
// their slots.
func (sw *streamWriter) takeOrdered(buf *[]byte) bool {
	sw.ansMu.Lock()
	defer sw.ansMu.Unlock()
	n := uint64(len(sw.ring))
	took := false
	for {
		slot := &sw.ring[sw.nextWrite%n]
		if !slot.set {
			return took
		}
		*buf = append(*buf, slot.b...)
		*slot = ansSlot{}
		sw.nextWrite++
		<-sw.owedC
		sw.owed.Dec()
		took = true
	}
}
