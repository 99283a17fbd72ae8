package mux

import (
	"sync"
	"time"
)

const (
	// copyLimit is the largest DATA payload copied into the write queue;
	// a larger one is written from the caller's slice while the caller
	// waits, so bulk writes cost no payload copy.
	copyLimit = 8 << 10
	// queueSoftLimit is the queued bytes above which a stream writer
	// waits for the queue to drain before adding more.
	queueSoftLimit = 256 << 10
	// ctrlLimit bounds the bytes of frames the read loop queues (answers
	// to pings and stop-sendings, stream credit) between two drains of
	// the queue: it never waits, so past this the session ends. The
	// peer sends us frames but does not read ours.
	ctrlLimit = 1 << 20
	// closeFlushTimeout bounds how long closing waits to write its CLOSE
	// frame.
	closeFlushTimeout = time.Second
)

// payloadRef is a large DATA payload written straight from a writer's
// slice, after the queued bytes before it.
type payloadRef struct {
	at    int           // offset in writeQueue.buf where it goes
	p     []byte        // the payload (the header is already in buf)
	doneC chan struct{} // signalled once p was written or dropped
}

// writeQueue holds frames waiting for the connection. Whoever holds the
// session's write lock writes everything queued, the frames of other
// goroutines included (flat combining): small frames from many streams
// leave in one underlying write, and a writer rarely hands off to
// another goroutine.
type writeQueue struct {
	mu     sync.Mutex
	buf    []byte        // encoded frames, in order; guarded by mu
	refs   []payloadRef  // large payloads between them, in order; guarded by mu
	closed bool          // no more frames are taken; guarded by mu
	added  uint64        // bytes ever added; guarded by mu
	ctrl   uint64        // bytes the read loop added since the last take; guarded by mu
	spaceC chan struct{} // closed and replaced each time the queue drains; guarded by mu

	// Used only by the write lock's holder.
	spareBuf  []byte
	spareRefs []payloadRef
}

// add appends frames built by fill; it reports false once the queue is
// closed.
func (q *writeQueue) add(fill func([]byte) []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	n := len(q.buf)
	q.buf = fill(q.buf)
	q.added += uint64(len(q.buf) - n)
	return true
}

// addedBytes is how many bytes were ever added.
func (q *writeQueue) addedBytes() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.added
}

// chargeCtrl counts the bytes added since addedBytes returned since as
// the read loop's and reports whether they passed ctrlLimit. The read
// loop calls both under the session lock, which every other adder
// holds too, so the difference is its own.
func (q *writeQueue) chargeCtrl(since uint64) (over bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ctrl += q.added - since
	return q.ctrl > ctrlLimit
}

// addRef appends a DATA frame header and the payload p to be written
// from the caller's slice; doneC is signalled once it was written.
func (q *writeQueue) addRef(stream uint64, p []byte, doneC chan struct{}) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	n := len(q.buf)
	q.buf = appendHeader(q.buf, frameData, 0, stream, len(p))
	q.added += uint64(len(q.buf) - n)
	q.refs = append(q.refs, payloadRef{at: len(q.buf), p: p, doneC: doneC})
	return true
}

// pending reports whether anything waits to be written.
func (q *writeQueue) pending() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.buf) > 0 || len(q.refs) > 0
}

// roomC returns nil when the queue is below queueSoftLimit, otherwise a
// channel closed when it next drains.
func (q *writeQueue) roomC() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.buf) < queueSoftLimit || q.closed {
		return nil
	}
	if q.spaceC == nil {
		q.spaceC = make(chan struct{})
	}
	return q.spaceC
}

// take swaps out everything queued for the spare buffers.
func (q *writeQueue) take() ([]byte, []payloadRef) {
	q.mu.Lock()
	defer q.mu.Unlock()
	buf, refs := q.buf, q.refs
	if len(buf) == 0 && len(refs) == 0 {
		return nil, nil
	}
	q.buf, q.refs = q.spareBuf[:0], q.spareRefs[:0]
	q.spareBuf, q.spareRefs = nil, nil
	q.ctrl = 0
	return buf, refs
}

// give returns written buffers for reuse and wakes writers waiting for room.
func (q *writeQueue) give(buf []byte, refs []payloadRef) {
	clear(refs)
	q.mu.Lock()
	defer q.mu.Unlock()
	if cap(buf) <= 2*queueSoftLimit {
		q.spareBuf = buf[:0]
	}
	q.spareRefs = refs[:0]
	if q.spaceC != nil {
		close(q.spaceC)
		q.spaceC = nil
	}
}

// flush writes what is queued if no other goroutine is writing; one
// that is will write it before it lets go of the write lock.
func (s *Session) flush() {
	for {
		select {
		case s.wlock <- struct{}{}:
		default:
			return
		}
		s.flushLocked()
		<-s.wlock
		if !s.q.pending() {
			return
		}
	}
}

// flushLocked writes until the queue is empty; the caller holds wlock.
func (s *Session) flushLocked() {
	for {
		buf, refs := s.q.take()
		if buf == nil && refs == nil {
			return
		}
		err := s.writeOut(buf, refs)
		for _, r := range refs {
			select {
			case r.doneC <- struct{}{}:
			default:
			}
		}
		s.q.give(buf, refs)
		if err != nil {
			s.writeFailed.Store(true)
			s.closeWith(lostBy("write", err), false)
		}
	}
}

// writeOut writes queued frames and the large payloads between them.
func (s *Session) writeOut(buf []byte, refs []payloadRef) error {
	if s.writeFailed.Load() {
		return nil // the session is over; drop
	}
	prev := 0
	for _, r := range refs {
		if r.at > prev {
			if err := s.write(buf[prev:r.at]); err != nil {
				return err
			}
		}
		if err := s.write(r.p); err != nil {
			return err
		}
		prev = r.at
	}
	if len(buf) > prev {
		return s.write(buf[prev:])
	}
	return nil
}

// write writes b to the connection and counts it.
func (s *Session) write(b []byte) error {
	n, err := s.conn.Write(b)
	s.bytesSent.Add(uint64(n))
	return err
}

// kick asks the writer goroutine to flush: the read loop never writes
// itself, so it cannot stall on a peer that is not reading.
func (s *Session) kick() {
	select {
	case s.flushC <- struct{}{}:
	default:
	}
}

// writeLoop flushes for the read loop and the keep-alive timer.
func (s *Session) writeLoop() {
	for {
		select {
		case <-s.flushC:
			s.flush()
		case <-s.done:
			return
		}
	}
}
