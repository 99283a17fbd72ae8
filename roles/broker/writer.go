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

// reserveOwed takes a slot for an answer that will be sent later with
// sendOwed. It waits until a slot is free or ctx ends.
func (sw *streamWriter) reserveOwed(ctx context.Context) error {
	select {
	case sw.owedC <- struct{}{}:
		sw.owed.Inc()
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// sendOwed queues an answer whose slot reserveOwed took. It never blocks.
func (sw *streamWriter) sendOwed(b []byte) {
	sw.ansMu.Lock()
	sw.ans = append(sw.ans, b)
	sw.ansMu.Unlock()
	select {
	case sw.ansC <- struct{}{}:
	default:
	}
}

// cancelOwed frees a slot that will not be used.
func (sw *streamWriter) cancelOwed() {
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
