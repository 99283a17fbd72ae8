package felix

import (
	"context"
	"errors"
	"sync"

	"github.com/felixmq/felix/wire"
)

// cacheReq is one encoded request queued for a stream's writer.
type cacheReq struct {
	ctx   context.Context // a request whose ctx ended is not written
	id    uint64
	frame []byte
}

// cacheResult is one answer: a cache value, or the whole message for
// requests whose answer is richer (stream_records, offset_value).
type cacheResult struct {
	value []byte
	msg   wire.Message
	err   error
}

// cachePending is a caller waiting for the answer to one request.
type cachePending struct {
	resC chan cacheResult // buffered 1; receives exactly one result, from whoever removes the entry
	st   *cacheStream     // the stream the request was written on; nil until the writer claims it
}

// cacheStream is one incarnation of a worker's authenticated stream. It
// dies when the broker ends or resets it, when a frame it sent cannot be
// decoded or is an error naming no request, or when the connection goes;
// the writer then opens a fresh one for the next request.
type cacheStream struct {
	cs    *ctrlStream
	dead  bool          // guarded by cacheWorker.mu
	cause error         // why it died; guarded by cacheWorker.mu
	deadC chan struct{} // closed when dead is set
}

// cacheWorker multiplexes many requests over one cache stream at a time.
// run is the only writer of the stream, readAnswers (one per incarnation)
// its only reader, and the request id correlates the two, so answers may
// arrive in any order.
//
// Invariant: len(pending) <= len(slotC) <= cacheMaxInFlight, equal except
// while a caller sits between taking its slot and adding its entry.
// Whoever deletes an entry (the caller giving up, the reader answering
// it, the writer or a dying stream failing it) gives the slot back in the
// same critical section, and then sends the entry its one result.
type cacheWorker struct {
	c     *Client
	reqC  chan *cacheReq
	slotC chan struct{}

	mu      sync.Mutex
	pending map[uint64]*cachePending

	first *ctrlStream  // Connect's stream, adopted by run on start
	cur   *cacheStream // owned by run
}

func newCacheWorker(c *Client) *cacheWorker {
	return &cacheWorker{
		c:       c,
		reqC:    make(chan *cacheReq, cacheQueueLen),
		slotC:   make(chan struct{}, cacheMaxInFlight),
		pending: make(map[uint64]*cachePending),
	}
}

// enqueue waits for an in-flight slot, registers the caller and queues the
// frame for the writer. Every failure here is before any write.
func (w *cacheWorker) enqueue(ctx context.Context, id uint64, frame []byte) (*cachePending, error) {
	select {
	case w.slotC <- struct{}{}:
	case <-ctx.Done():
		return nil, notSent(ctx.Err())
	case <-w.c.closedC:
		return nil, notSent(w.c.failure(ErrClosed))
	}
	p := &cachePending{resC: make(chan cacheResult, 1)}
	w.mu.Lock()
	w.pending[id] = p
	w.mu.Unlock()
	// Entries the writer dropped unwritten can still sit in the queue after
	// their slot was given back, so this send may briefly wait.
	select {
	case w.reqC <- &cacheReq{ctx: ctx, id: id, frame: frame}:
		return p, nil
	case <-ctx.Done():
		w.abandon(id)
		return nil, notSent(ctx.Err())
	case <-w.c.closedC:
		w.abandon(id)
		return nil, notSent(w.c.failure(ErrClosed))
	}
}

// await waits for the answer. A caller whose ctx ends withdraws its entry;
// an answer arriving later finds nobody and is dropped.
func (w *cacheWorker) await(ctx context.Context, id uint64, p *cachePending) (cacheResult, error) {
	select {
	case res := <-p.resC:
		return res, res.err
	case <-ctx.Done():
		return w.giveUp(id, p, ctx.Err())
	case <-w.c.closedC:
		return w.giveUp(id, p, w.c.failure(ErrClosed))
	}
}

// giveUp withdraws id's entry and returns err, marked not sent when the
// request was never written. If the entry is already gone, its result is
// on the way and wins: a call the broker answered, or one its stream's
// failure already classified, reports that.
func (w *cacheWorker) giveUp(id uint64, p *cachePending, err error) (cacheResult, error) {
	written, ok := w.abandon(id)
	switch {
	case !ok:
		res := <-p.resC
		return res, res.err
	case !written:
		return cacheResult{}, notSent(err)
	default:
		return cacheResult{}, err
	}
}

// abandon removes id's entry if it is still there, reporting whether the
// request had been handed to a stream.
func (w *cacheWorker) abandon(id uint64) (written, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pending[id]
	if p == nil {
		return false, false
	}
	w.removeLocked(id)
	return p.st != nil, true
}

// removeLocked deletes id's entry and frees its slot. Called with mu held.
func (w *cacheWorker) removeLocked(id uint64) {
	delete(w.pending, id)
	<-w.slotC
}

// take removes and returns id's entry when it was written on st; an
// answer for anything else (a caller that gave up) is dropped.
func (w *cacheWorker) take(st *cacheStream, id uint64) *cachePending {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pending[id]
	if p == nil || p.st != st {
		return nil
	}
	w.removeLocked(id)
	return p
}

// resolve delivers an answer read from st.
func (w *cacheWorker) resolve(st *cacheStream, id uint64, res cacheResult) {
	if p := w.take(st, id); p != nil {
		p.resC <- res
	}
}

// claim binds r to st just before the writer sends it. It returns false,
// having failed r as not sent, when its caller's ctx ended or st already
// died; and false without a word when the caller is gone.
func (w *cacheWorker) claim(r *cacheReq, st *cacheStream) bool {
	w.mu.Lock()
	p := w.pending[r.id]
	var err error
	switch {
	case p == nil:
	case r.ctx.Err() != nil:
		err = r.ctx.Err()
	case st.dead:
		err = st.cause
	default:
		p.st = st
		w.mu.Unlock()
		return true
	}
	if p != nil {
		w.removeLocked(r.id)
	}
	w.mu.Unlock()
	if p != nil {
		p.resC <- cacheResult{err: notSent(err)}
	}
	return false
}

// failUnsent fails the batch's requests that were never written.
func (w *cacheWorker) failUnsent(batch []*cacheReq, err error) {
	err = notSent(err)
	for _, r := range batch {
		if p := w.take(nil, r.id); p != nil {
			p.resC <- cacheResult{err: err}
		}
	}
}

// kill marks st dead, aborts it and fails every request written on it
// with cause. Later calls on the worker get a fresh stream.
func (w *cacheWorker) kill(st *cacheStream, cause error) {
	if cause == nil {
		cause = errors.New("felix: cache stream failed")
	}
	w.mu.Lock()
	if st.dead {
		w.mu.Unlock()
		return
	}
	st.dead, st.cause = true, cause
	close(st.deadC)
	var orphans []*cachePending
	for id, p := range w.pending {
		if p.st == st {
			orphans = append(orphans, p)
			w.removeLocked(id)
		}
	}
	w.mu.Unlock()
	st.cs.abort()
	for _, p := range orphans {
		p.resC <- cacheResult{err: cause}
	}
}
