package mux

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/felixmq/felix/transport"
)

// stream is one stream of a session, both directions; a unidirectional
// stream has one of them over from the start. Every field is guarded by
// the session's mu.
type stream struct {
	s  *Session
	id uint64

	// Send direction.
	sendOver   bool   // FIN or RESET queued (or no send direction): nothing more goes out
	sendErr    error  // why writes fail: a *transport.StreamError, or errReceiveOnly
	sendOffset uint64 // payload bytes queued
	sendMax    uint64 // the peer allows sendOffset up to this; Invariant: sendOffset <= sendMax
	writing    bool   // a Write is in progress
	closeReq   bool   // Close was called; the FIN follows the Write in progress
	wDeadline  time.Time
	writeC     chan struct{} // one slot: stream credit, a stop-sending, a cancel or a new deadline
	refDoneC   chan struct{} // one slot: our large payload was written
	ctx        context.Context
	cancelCtx  context.CancelCauseFunc
	ctxCause   error // the cause the send context gets (nil: a clean FIN)

	// Receive direction.
	recvOver      bool // all read, reset by the peer, or cancelled by us (or no receive direction)
	rw            recvWindow
	chunks        [][]byte // received, unread; chunks[0][chunkOff:] is next
	chunkOff      int
	unread        uint64
	fin           bool  // the peer's FIN arrived; the stream is rw.received bytes long
	recvErr       error // a *transport.StreamError: the peer's reset or our CancelRead
	readCancelled bool  // CancelRead was called: later data is dropped
	rDeadline     time.Time
	readC         chan struct{} // one slot: data, FIN, reset or a new deadline
	removed       bool          // deleted from the session's map
}

var _ transport.Stream = (*stream)(nil)

// errReceiveOnly is what a write on the peer's unidirectional stream gets.
var errReceiveOnly = fmt.Errorf("mux: write on a receive-only stream")

// newStreamLocked creates and registers a stream. local says we opened it.
func (s *Session) newStreamLocked(id uint64, local bool) *stream {
	st := &stream{
		s:       s,
		id:      id,
		sendMax: s.peerWindow,
		rw:      newRecvWindow(s.cfg.InitialStreamReceiveWindow, s.cfg.MaxStreamReceiveWindow),
		writeC:  make(chan struct{}, 1),
		readC:   make(chan struct{}, 1),
	}
	if id&2 != 0 { // unidirectional
		if local {
			st.recvOver = true
		} else {
			st.sendOver, st.sendErr = true, errReceiveOnly
		}
	}
	s.streams[id] = st
	return st
}

// signal puts a token in a one-slot channel without waiting.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// deadlineError is a Read or Write past its deadline; errors.Is matches
// os.ErrDeadlineExceeded, as with net.Conn and quic-go.
type deadlineError struct{}

func (deadlineError) Error() string   { return "mux: deadline exceeded" }
func (deadlineError) Timeout() bool   { return true }
func (deadlineError) Temporary() bool { return true }
func (deadlineError) Unwrap() error   { return os.ErrDeadlineExceeded }

// wait unlocks the session, waits for c, the session's end or the
// deadline, and locks again. It reports false when the deadline passed.
func (s *Session) wait(c, c2 <-chan struct{}, deadline time.Time) bool {
	var timeC <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return false
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timeC = t.C
	}
	s.mu.Unlock()
	defer s.mu.Lock()
	select {
	case <-c:
	case <-c2:
	case <-s.done:
	case <-timeC:
		return false
	}
	return true
}

// maybeRemoveLocked forgets a stream whose directions are both over and,
// for a stream the peer opened, lets it open another.
func (s *Session) maybeRemoveLocked(st *stream) {
	if st.removed || !st.sendOver || !st.recvOver {
		return
	}
	st.removed = true
	delete(s.streams, st.id)
	if s.isLocal(st.id) {
		return
	}
	k := int(st.id>>1) & 1
	rk := &s.remote[k]
	if rk.limit == 0 {
		return
	}
	rk.max++
	var flags uint8
	if k == uni {
		flags = flagUni
	}
	s.q.add(func(b []byte) []byte { return appendU64Frame(b, frameMaxStreams, flags, 0, rk.max) })
}

// isLocal reports whether we opened the stream id.
func (s *Session) isLocal(id uint64) bool {
	return (id&1 == 0) == s.isClient
}

// endSendLocked marks the send direction over with cause for its context.
func (st *stream) endSendLocked(cause error) {
	st.sendOver = true
	st.ctxCause = cause
	if st.cancelCtx != nil {
		st.cancelCtx(cause)
	}
	signal(st.writeC)
	st.s.maybeRemoveLocked(st)
}

// writeErrLocked is why a write cannot go on, or nil.
func (st *stream) writeErrLocked() error {
	if st.sendErr != nil {
		return st.sendErr
	}
	return st.s.closeErr
}

// canWriteLocked is why a write cannot start now (nil when it can): the
// stream was reset or stopped, the session ended, or the stream was
// closed.
func (st *stream) canWriteLocked() error {
	if err := st.writeErrLocked(); err != nil {
		return err
	}
	if st.sendOver || st.closeReq {
		return fmt.Errorf("mux: write on closed stream %d", st.id)
	}
	return nil
}

// Write writes p, waiting for flow control credit and room in the
// connection's write queue until the write deadline.
func (st *stream) Write(p []byte) (int, error) {
	s := st.s
	s.mu.Lock()
	if err := st.canWriteLocked(); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	st.writing = true
	s.mu.Unlock()

	n, err := st.write(p)

	s.mu.Lock()
	st.writing = false
	fin := st.closeReq && !st.sendOver
	if fin {
		st.queueFinLocked()
	}
	s.mu.Unlock()
	if fin {
		s.flush()
	}
	return n, err
}

func (st *stream) write(p []byte) (int, error) {
	s := st.s
	total := 0
	for len(p) > 0 {
		s.mu.Lock()
		var credit uint64
		for {
			if err := st.writeErrLocked(); err != nil {
				s.mu.Unlock()
				return total, err
			}
			credit = min(st.sendMax-st.sendOffset, s.connSendMax-s.connSent)
			roomC := s.q.roomC()
			if credit > 0 && roomC == nil {
				break
			}
			c := roomC
			if c == nil {
				c = s.creditC
			}
			if !s.wait(st.writeC, c, st.wDeadline) {
				s.mu.Unlock()
				return total, deadlineError{}
			}
		}
		n := int(min(credit, uint64(len(p)), maxDataPayload))
		st.sendOffset += uint64(n)
		s.connSent += uint64(n)
		ok := st.queueDataLocked(p[:n])
		s.mu.Unlock()
		s.flush()
		if !ok {
			return total, st.closedErr()
		}
		if n > copyLimit {
			<-st.refDoneC
			if s.writeFailed.Load() {
				return total, st.closedErr()
			}
		}
		total += n
		p = p[n:]
	}
	return total, nil
}

// closedErr is the session's end error (the write queue closes only then).
func (st *stream) closedErr() error {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	if err := st.writeErrLocked(); err != nil {
		return err
	}
	return lost("session closed")
}

// queueDataLocked queues one DATA frame with p (a copy when small, the
// caller's slice otherwise); it reports false when the queue is closed.
func (st *stream) queueDataLocked(p []byte) bool {
	if len(p) > copyLimit {
		if st.refDoneC == nil {
			st.refDoneC = make(chan struct{}, 1)
		}
		return st.s.q.addRef(st.id, p, st.refDoneC)
	}
	return st.s.q.add(func(b []byte) []byte {
		b = appendHeader(b, frameData, 0, st.id, len(p))
		return append(b, p...)
	})
}

// TryWriteAll writes all of p if stream and connection credit and the
// write queue allow it now; otherwise it writes nothing and returns
// transport.ErrWouldBlock.
func (st *stream) TryWriteAll(p []byte) error {
	s := st.s
	s.mu.Lock()
	if err := st.canWriteLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	n := uint64(len(p))
	if st.sendMax-st.sendOffset < n || s.connSendMax-s.connSent < n || s.q.roomC() != nil {
		s.mu.Unlock()
		return transport.ErrWouldBlock
	}
	for len(p) > 0 { // copies: all of p is queued at once, under the lock
		c := p[:min(len(p), maxDataPayload)]
		p = p[len(c):]
		st.sendOffset += uint64(len(c))
		s.connSent += uint64(len(c))
		s.q.add(func(b []byte) []byte {
			b = appendHeader(b, frameData, 0, st.id, len(c))
			return append(b, c...)
		})
	}
	s.mu.Unlock()
	s.flush()
	return nil
}

// queueFinLocked queues the FIN and ends the send direction.
func (st *stream) queueFinLocked() {
	st.s.q.add(func(b []byte) []byte { return appendHeader(b, frameData, flagFIN, st.id, 0) })
	st.endSendLocked(nil)
}

// Close sends a FIN after what was written (after the Write in progress,
// if one is).
func (st *stream) Close() error {
	s := st.s
	s.mu.Lock()
	if st.sendOver || st.closeReq || s.closeErr != nil {
		s.mu.Unlock()
		return nil
	}
	st.closeReq = true
	queued := !st.writing
	if queued {
		st.queueFinLocked()
	}
	s.mu.Unlock()
	if queued {
		s.flush()
	}
	return nil
}

// CancelWrite resets the send direction with code; it does nothing once
// the direction is over (after a FIN, a reset or the peer's stop-sending).
func (st *stream) CancelWrite(code transport.StreamErrorCode) {
	s := st.s
	s.mu.Lock()
	if st.sendOver || s.closeErr != nil {
		s.mu.Unlock()
		return
	}
	st.sendErr = &transport.StreamError{Code: code}
	s.q.add(func(b []byte) []byte { return appendU64Frame(b, frameReset, 0, st.id, uint64(code)) })
	st.endSendLocked(st.sendErr)
	s.mu.Unlock()
	s.flush()
}

// SetWriteDeadline bounds Write and Close-free waits for credit.
func (st *stream) SetWriteDeadline(t time.Time) error {
	st.s.mu.Lock()
	st.wDeadline = t
	signal(st.writeC)
	st.s.mu.Unlock()
	return nil
}

// Context is done once the send direction is over; its cause is nil
// (context.Canceled) after a FIN, a *transport.StreamError after a reset
// or stop-sending, or the session's end error.
func (st *stream) Context() context.Context {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.ctx == nil {
		st.ctx, st.cancelCtx = context.WithCancelCause(s.ctx)
		if st.sendOver {
			st.cancelCtx(st.ctxCause)
		}
	}
	return st.ctx
}

// Read reads in order. It returns io.EOF after the FIN,
// *transport.StreamError{Remote: true} after the peer's reset (what was
// unread is dropped), Remote: false after CancelRead.
func (st *stream) Read(p []byte) (int, error) {
	s := st.s
	s.mu.Lock()
	for {
		if st.recvErr != nil {
			err := st.recvErr
			s.mu.Unlock()
			return 0, err
		}
		if st.unread > 0 {
			n := st.readLocked(p)
			s.mu.Unlock()
			s.flush() // window updates, if any
			return n, nil
		}
		if st.fin {
			s.mu.Unlock()
			return 0, io.EOF
		}
		if s.closeErr != nil {
			err := s.closeErr
			s.mu.Unlock()
			return 0, err
		}
		if len(p) == 0 {
			s.mu.Unlock()
			return 0, nil
		}
		if !s.wait(st.readC, nil, st.rDeadline) {
			s.mu.Unlock()
			return 0, deadlineError{}
		}
	}
}

// readLocked copies unread bytes into p and queues window updates.
func (st *stream) readLocked(p []byte) int {
	n := 0
	for n < len(p) && len(st.chunks) > 0 {
		c := copy(p[n:], st.chunks[0][st.chunkOff:])
		n += c
		st.chunkOff += c
		if st.chunkOff == len(st.chunks[0]) {
			putData(st.chunks[0])
			st.chunks[0] = nil
			st.chunks = st.chunks[1:]
			st.chunkOff = 0
		}
	}
	if len(st.chunks) == 0 {
		st.chunks = nil
	}
	st.unread -= uint64(n)
	st.consumedLocked(uint64(n))
	if st.fin && st.unread == 0 {
		st.recvOver = true
		st.s.maybeRemoveLocked(st)
	}
	return n
}

// consumedLocked returns credit for n bytes read or dropped: to the
// stream while it may still receive, and to the connection.
func (st *stream) consumedLocked(n uint64) {
	s := st.s
	now := time.Now()
	rtt := time.Duration(s.rtt.Load())
	if !st.fin && st.recvErr == nil {
		if limit, ok := st.rw.onConsumed(n, now, rtt); ok {
			s.q.add(func(b []byte) []byte { return appendU64Frame(b, frameWindow, 0, st.id, limit) })
			s.connRecv.atLeast(st.rw.size * 3 / 2)
		}
	}
	s.connConsumedLocked(n, now, rtt)
}

// connConsumedLocked returns n bytes of connection credit.
func (s *Session) connConsumedLocked(n uint64, now time.Time, rtt time.Duration) {
	if limit, ok := s.connRecv.onConsumed(n, now, rtt); ok {
		s.q.add(func(b []byte) []byte { return appendU64Frame(b, frameConnWindow, 0, 0, limit) })
	}
}

// CancelRead asks the peer to stop sending, with code, and drops what
// is unread and what arrives later. It does nothing once the receive
// direction is over.
func (st *stream) CancelRead(code transport.StreamErrorCode) {
	s := st.s
	s.mu.Lock()
	if st.recvOver || s.closeErr != nil {
		s.mu.Unlock()
		return
	}
	st.recvErr = &transport.StreamError{Code: code}
	st.readCancelled = true
	st.dropUnreadLocked()
	if !st.fin {
		s.q.add(func(b []byte) []byte { return appendU64Frame(b, frameStopSending, 0, st.id, uint64(code)) })
	}
	st.recvOver = true
	signal(st.readC)
	s.maybeRemoveLocked(st)
	s.mu.Unlock()
	s.flush()
}

// dropUnreadLocked discards unread data, giving its connection credit back.
func (st *stream) dropUnreadLocked() {
	n := st.unread
	for _, c := range st.chunks {
		putData(c)
	}
	st.chunks, st.chunkOff, st.unread = nil, 0, 0
	st.rw.consumed += n
	st.s.connConsumedLocked(n, time.Now(), time.Duration(st.s.rtt.Load()))
}

// SetReadDeadline bounds Read's wait for data.
func (st *stream) SetReadDeadline(t time.Time) error {
	st.s.mu.Lock()
	st.rDeadline = t
	signal(st.readC)
	st.s.mu.Unlock()
	return nil
}

// SetDeadline sets both deadlines.
func (st *stream) SetDeadline(t time.Time) error {
	st.SetReadDeadline(t)
	return st.SetWriteDeadline(t)
}
