package felix

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/felixmq/felix/wire"
)

// pubReq is one unit of work for a publish writer: an encoded frame, or a
// flush marker (flushC != nil, no frame).
type pubReq struct {
	frame  []byte
	id     uint64          // request id of an acked publish, else 0
	ctx    context.Context // an acked publish whose ctx ended is not written
	weight int64           // budget bytes, released after the write
	flushC chan error      // flush marker: receives the failures since the last flush
}

// pendingAck is an acked publish waiting for its answer. st is the stream
// it was written on (nil until written).
type pendingAck struct {
	resC chan error // buffered 1; receives exactly one result
	st   *pubStream
	// offset is what publish_ok reported (durable streams, with
	// FLAG_BINARY_PUBLISH_ACK_OFFSET). Written before a nil result is sent
	// on resC, read by the caller after receiving it.
	offset *uint64
}

// pubStream is one incarnation of a worker's authenticated QUIC stream.
// It ends when the broker ends it, when the connection dies, or after a
// flush closed its send half; the worker then opens a fresh one for the
// next request.
type pubStream struct {
	cs        *ctrlStream
	dead      bool          // guarded by pubWorker.mu
	deadC     chan struct{} // closed when dead is set
	finSent   bool          // guarded by pubWorker.mu: send half closed by a flush
	waiters   []chan error  // guarded by pubWorker.mu: flush markers waiting for the broker's end
	refusal   error         // guarded by pubWorker.mu: an error the broker sent naming no request
	unflushed atomic.Bool   // fire-and-forget frames were written on this stream
}

// pubWorker owns one publish stream at a time: run is its only writer and
// readAnswers its only reader.
type pubWorker struct {
	c    *Client
	pool *publishPool
	reqC chan *pubReq

	mu      sync.Mutex
	pending map[uint64]*pendingAck
	fafErr  error // failures of fire-and-forget frames since the last flush

	cur *pubStream // owned by run
}

func newPubWorker(c *Client, p *publishPool) *pubWorker {
	return &pubWorker{c: c, pool: p, reqC: make(chan *pubReq, publishQueueLen), pending: map[uint64]*pendingAck{}}
}

func (w *pubWorker) addPending(id uint64) *pendingAck {
	p := &pendingAck{resC: make(chan error, 1)}
	w.mu.Lock()
	w.pending[id] = p
	w.mu.Unlock()
	return p
}

func (w *pubWorker) removePending(id uint64) {
	if id == 0 {
		return
	}
	w.mu.Lock()
	delete(w.pending, id)
	w.mu.Unlock()
}

// resolve delivers the answer for id, if anyone still waits for it.
func (w *pubWorker) resolve(id uint64, err error) { w.resolveOffset(id, nil, err) }

// resolveOffset is resolve for a publish_ok that may carry an offset.
func (w *pubWorker) resolveOffset(id uint64, offset *uint64, err error) {
	w.mu.Lock()
	p := w.pending[id]
	delete(w.pending, id)
	w.mu.Unlock()
	if p != nil {
		p.offset = offset
		p.resC <- err
	}
}

func (w *pubWorker) noteFAF(err error) {
	w.mu.Lock()
	w.fafErr = errors.Join(w.fafErr, err)
	w.mu.Unlock()
}

func (w *pubWorker) takeFAF() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.fafErr
	w.fafErr = nil
	return err
}

// run is the writer loop: take one request, drain what else is queued (up
// to maxCoalesceBytes) and write it all with one Write call.
func (w *pubWorker) run() {
	var buf []byte
	var batch []*pubReq
	defer func() {
		if w.cur != nil {
			w.kill(w.cur, w.c.failure(ErrClosed))
		}
	}()
	frameLen := func(r *pubReq) int { return len(r.frame) }
	for {
		var ok bool
		if batch, ok = takeBatch(w.c.ctx, w.reqC, batch, frameLen, maxCoalesceBytes); !ok {
			return
		}
		buf = w.process(batch, buf[:0])
		if cap(buf) > 4*maxCoalesceBytes {
			buf = nil
		}
		clear(batch)
	}
}

// process writes one coalesced batch, answers its flush markers and
// returns the buffer for reuse.
func (w *pubWorker) process(batch []*pubReq, buf []byte) []byte {
	defer w.release(batch)
	if hasData(batch) {
		buf = w.write(batch, buf)
	}
	w.flush(batch)
	return buf
}

// write sends the batch's frames with one Write call.
func (w *pubWorker) write(batch []*pubReq, buf []byte) []byte {
	st, err := w.stream()
	if err != nil {
		w.failUnsent(batch, err)
		return buf
	}
	faf := false
	write := func(b []byte) bool {
		if _, err := st.cs.s.Write(b); err != nil {
			w.kill(st, w.c.failure(err))
			return false
		}
		return true
	}
	for _, r := range batch {
		switch {
		case r.frame == nil:
			continue
		case r.id == 0:
			faf = true
		case !w.claim(r, st):
			continue
		}
		if len(r.frame) < directWriteBytes {
			buf = append(buf, r.frame...)
			continue
		}
		// A large frame goes to QUIC as it is: copying it into buf
		// first would only cost a memmove.
		if len(buf) > 0 && !write(buf) {
			return buf[:0]
		}
		buf = buf[:0]
		if !write(r.frame) {
			return buf
		}
	}
	if faf {
		st.unflushed.Store(true)
	}
	if len(buf) > 0 {
		write(buf)
	}
	return buf
}

// directWriteBytes is the frame size from which the writer hands a frame
// to QUIC directly instead of coalescing it with its neighbours.
const directWriteBytes = 32 << 10

// flush answers the batch's flush markers. A fire-and-forget frame only
// counts as delivered once the broker has read it, so when the current
// stream carried any, the writer closes its send half and the markers
// complete when the broker ends the stream, which it does after reading
// everything before the end. The next publish opens a fresh stream.
func (w *pubWorker) flush(batch []*pubReq) {
	var markers []chan error
	for _, r := range batch {
		if r.flushC != nil {
			markers = append(markers, r.flushC)
		}
	}
	if len(markers) == 0 {
		return
	}
	st := w.cur
	if st == nil || !st.unflushed.Load() {
		w.answerMarkers(markers)
		return
	}
	w.cur = nil
	w.mu.Lock()
	if st.dead {
		w.mu.Unlock()
		w.answerMarkers(markers)
		return
	}
	st.finSent = true
	st.waiters = append(st.waiters, markers...)
	w.mu.Unlock()
	_ = st.cs.s.Close()
}

func (w *pubWorker) answerMarkers(markers []chan error) {
	for _, m := range markers {
		m <- w.takeFAF()
	}
}

func hasData(batch []*pubReq) bool {
	for _, r := range batch {
		if r.frame != nil {
			return true
		}
	}
	return false
}

func (w *pubWorker) release(batch []*pubReq) {
	for _, r := range batch {
		if r.weight > 0 {
			w.pool.budget.Release(r.weight)
		}
	}
}

// failUnsent reports err for every request of a batch that never left.
func (w *pubWorker) failUnsent(batch []*pubReq, err error) {
	err = notSent(err)
	for _, r := range batch {
		switch {
		case r.id != 0:
			w.resolve(r.id, err)
		case r.frame != nil:
			w.noteFAF(err)
		}
	}
}

// claim binds an acked request to the stream it is about to be written on.
// It returns false when nobody waits for the answer any more, or the stream
// already died (the caller is told it was not sent).
func (w *pubWorker) claim(r *pubReq, st *pubStream) bool {
	w.mu.Lock()
	p := w.pending[r.id]
	switch {
	case p == nil:
		w.mu.Unlock()
		return false
	case r.ctx.Err() != nil:
		delete(w.pending, r.id)
		w.mu.Unlock()
		p.resC <- notSent(r.ctx.Err())
		return false
	case st.dead:
		delete(w.pending, r.id)
		w.mu.Unlock()
		p.resC <- notSent(errors.New("felix: publish stream failed before the write"))
		return false
	}
	p.st = st
	w.mu.Unlock()
	return true
}

// stream returns the live stream, opening and authenticating a new one
// when there is none.
func (w *pubWorker) stream() (*pubStream, error) {
	if st := w.cur; st != nil && !closed(st.deadC) {
		return st, nil
	}
	w.cur = nil
	cs, err := w.c.openStream(w.c.ctx)
	if err != nil {
		return nil, err
	}
	st := &pubStream{cs: cs, deadC: make(chan struct{})}
	if !w.c.spawn(func() { w.readAnswers(st) }) {
		cs.abort()
		return nil, notSent(ErrClosed)
	}
	w.cur = st
	return st, nil
}

// kill marks st dead and aborts it. Acked publishes still waiting on it
// fail (their outcome is unknown), unflushed fire-and-forget frames are
// reported as possibly lost, and flush markers waiting on it complete.
// A nil cause is the clean end the broker gives a stream after a flush.
func (w *pubWorker) kill(st *pubStream, cause error) {
	w.mu.Lock()
	if st.dead {
		w.mu.Unlock()
		return
	}
	st.dead = true
	close(st.deadC)
	var orphans []*pendingAck
	for id, p := range w.pending {
		if p.st == st {
			orphans = append(orphans, p)
			delete(w.pending, id)
		}
	}
	waiters := st.waiters
	st.waiters = nil
	w.mu.Unlock()
	st.cs.abort()
	if cause != nil && st.unflushed.Load() {
		w.noteFAF(cause)
	}
	var refused *BrokerError
	for _, p := range orphans {
		switch {
		case errors.Is(cause, ErrClosed):
			p.resC <- ErrClosed
		case errors.As(cause, &refused) && refused.cause == nil:
			// The broker refused the stream (revoked, token expired): it
			// answers what it read before that first, so a publish still
			// unanswered was never read.
			p.resC <- cause
		case cause == nil:
			p.resC <- outcomeUnknown(errors.New("felix: the broker ended the publish stream"))
		default:
			p.resC <- outcomeUnknown(cause)
		}
	}
	w.answerMarkers(waiters)
}

// readAnswers is st's reader: it routes publish_ok / publish_error /
// error answers to their waiting callers until the stream ends.
func (w *pubWorker) readAnswers(st *pubStream) {
	for {
		msg, err := readMessage(st.cs.fr)
		if err != nil {
			if errors.Is(err, io.EOF) {
				w.mu.Lock()
				flushed := st.finSent
				w.mu.Unlock()
				if flushed {
					w.kill(st, nil)
					return
				}
				err = errors.New("felix: the broker ended the publish stream")
			}
			w.mu.Lock()
			refusal := st.refusal
			w.mu.Unlock()
			if refusal != nil && !w.c.dead() {
				err = refusal // what ended the stream: a revocation, an expired token
			}
			w.kill(st, w.c.failure(err))
			return
		}
		switch m := msg.(type) {
		case *wire.PublishOK:
			w.resolveOffset(m.RequestID, m.Offset, nil)
		case *wire.PublishError:
			w.resolve(m.RequestID, fromWire(m.Err()))
		case *wire.ErrorMsg:
			w.onError(st, m)
		case *wire.Unsupported:
			if m.RequestID != nil {
				w.resolve(*m.RequestID, unsupported(m.RequestType))
			}
		}
	}
}

// onError handles an error message on a publish stream. One naming a
// request answers it; one without refers to a fire-and-forget frame (acked
// publishes are refused with publish_error) and is reported by Finish. If
// the broker also ends the stream, the reader sees that next.
func (w *pubWorker) onError(st *pubStream, m *wire.ErrorMsg) {
	be := fromWire(m.Err())
	if m.RequestID != nil {
		w.resolve(*m.RequestID, be)
		return
	}
	w.mu.Lock()
	if st.refusal == nil {
		st.refusal = be
	}
	w.mu.Unlock()
	w.noteFAF(be)
}
