package core

import (
	"context"
	"sync"
)

// pushResult is what an enqueue attempt did.
type pushResult uint8

const (
	pushed pushResult = iota // queued
	full                     // no room under the bounds
	ended                    // the subscriber is over; nothing queued
)

// queue is a subscriber's bounded FIFO of envelopes: a ring buffer under a
// mutex, a one-slot ready channel for the consumer and a broadcast channel
// for publishers waiting for room (Block policy).
type queue struct {
	// readyC gets a token whenever an envelope is queued or the queue ends.
	readyC chan struct{}
	// doneC is closed when the queue ends.
	doneC chan struct{}

	mu sync.Mutex
	// buf is a ring of len(buf) slots; items live at buf[head:head+n] modulo
	// len(buf). Invariant: n <= len(buf).
	buf  []*Envelope
	head int
	n    int
	// bytes is the payload bytes queued. Invariant: bytes == sum of Size().
	bytes int64
	// capItems and capBytes are the live bounds. Invariant: a push that
	// would exceed them is refused, except that an empty queue admits one
	// envelope of any size.
	capItems int
	capBytes int64
	// backlogItems/backlogBytes are the replay backlog still at the front of
	// the queue; the backlog is admitted above the bounds and the bounds
	// stretch by it until it has been consumed.
	backlogItems int
	backlogBytes int64
	// spaceC, when non-nil, is closed on the next pop or end, waking every
	// publisher waiting for room.
	spaceC chan struct{}
	// err is the reason the queue ended; nil while it is live.
	err error
	// notify, when set, is called after every signal; set at construction.
	notify func()
}

func newQueue(capItems int, capBytes int64, notify func()) *queue {
	return &queue{
		readyC:   make(chan struct{}, 1),
		doneC:    make(chan struct{}),
		capItems: capItems,
		capBytes: capBytes,
		notify:   notify,
	}
}

// preload queues the replay backlog ahead of any live envelope, beyond the
// bounds. Called before the subscriber is visible to publishers.
func (q *queue) preload(backlog []*Envelope) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range backlog {
		q.append(e)
		q.backlogItems++
		q.backlogBytes += int64(e.Size())
	}
	if q.n > 0 {
		q.signal()
	}
}

// tryPush queues e if there is room.
func (q *queue) tryPush(e *Envelope) pushResult {
	q.mu.Lock()
	r := q.pushLocked(e)
	q.mu.Unlock()
	if r == pushed {
		q.signal()
	}
	return r
}

// pushWait queues e, waiting for room until ctx is done or the queue ends.
func (q *queue) pushWait(ctx context.Context, e *Envelope) (pushResult, error) {
	for {
		q.mu.Lock()
		r := q.pushLocked(e)
		if r != full {
			q.mu.Unlock()
			if r == pushed {
				q.signal()
			}
			return r, nil
		}
		if q.spaceC == nil {
			q.spaceC = make(chan struct{})
		}
		spaceC := q.spaceC
		q.mu.Unlock()
		select {
		case <-spaceC:
		case <-ctx.Done():
			return full, ctx.Err()
		}
	}
}

func (q *queue) pushLocked(e *Envelope) pushResult {
	if q.err != nil {
		return ended
	}
	size := int64(e.Size())
	if q.n > 0 {
		if q.n >= q.capItems+q.backlogItems || q.bytes+size > q.capBytes+q.backlogBytes {
			return full
		}
	}
	q.append(e)
	return pushed
}

// append adds e at the tail, growing the ring when it is full.
func (q *queue) append(e *Envelope) {
	if q.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.n)%len(q.buf)] = e
	q.n++
	q.bytes += int64(e.Size())
}

func (q *queue) grow() {
	size := 2 * len(q.buf)
	if size < 8 {
		size = 8
	}
	nb := make([]*Envelope, size)
	for i := 0; i < q.n; i++ {
		nb[i] = q.buf[(q.head+i)%len(q.buf)]
	}
	q.buf, q.head = nb, 0
}

// pop removes the oldest envelope, waking publishers waiting for room.
func (q *queue) pop() (*Envelope, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.popLocked()
}

// popOrErr removes the oldest envelope or, when the queue is empty,
// returns why it ended (nil while live). Checking both under one lock
// keeps an envelope queued just before the end from being missed.
func (q *queue) popOrErr() (*Envelope, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e, ok := q.popLocked(); ok {
		return e, nil
	}
	return nil, q.err
}

func (q *queue) popLocked() (*Envelope, bool) {
	if q.n == 0 {
		return nil, false
	}
	e := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	size := int64(e.Size())
	q.bytes -= size
	if q.backlogItems > 0 {
		q.backlogItems--
		q.backlogBytes -= size
	}
	if q.n == 0 {
		q.head = 0
	}
	q.wakeWaitersLocked()
	return e, true
}

func (q *queue) wakeWaitersLocked() {
	if q.spaceC != nil {
		close(q.spaceC)
		q.spaceC = nil
	}
}

// signal leaves a token for the consumer without ever blocking, and calls
// notify.
func (q *queue) signal() {
	select {
	case q.readyC <- struct{}{}:
	default:
	}
	if q.notify != nil {
		q.notify()
	}
}

// end stops the queue with reason err; with discard the queued envelopes
// are released too. It returns false if the queue had already ended.
func (q *queue) end(err error, discard bool) bool {
	q.mu.Lock()
	first := q.err == nil
	if first {
		q.err = err
		close(q.doneC)
	}
	if discard {
		clear(q.buf)
		q.buf, q.head, q.n, q.bytes = nil, 0, 0, 0
		q.backlogItems, q.backlogBytes = 0, 0
	}
	q.wakeWaitersLocked()
	q.mu.Unlock()
	q.signal()
	return first
}

// endErr returns why the queue ended, or nil.
func (q *queue) endErr() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// depth returns the queued envelopes and their payload bytes.
func (q *queue) depth() (int, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n, q.bytes
}
