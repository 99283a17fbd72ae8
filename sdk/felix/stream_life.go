package felix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/felixmq/felix/wire"
)

// streamLife is what a Subscription and a CacheWatch share: the control
// stream their request went out on, the event stream the router hands
// over, and how it all ends. Next reads the event stream itself, one frame
// at a time, so a delivery wakes only the caller of Next: no goroutine
// stands between QUIC and the caller. What is buffered on the client is
// what QUIC's stream window holds plus the rest of the last frame read;
// a caller that stops calling Next stops reading, and flow control pushes
// back on the broker, whose policy then decides. The owner registers the
// streamLife with the router and trackSub through start.
type streamLife[T any] struct {
	c    *Client
	id   uint64 // the id the event stream's hello names
	ctrl *ctrlStream

	// readFrame reads the next frame of the event stream and appends its
	// items to dst: none for a frame to skip, several for a batch. A read
	// error is returned as is; a frame that ends the stream is a
	// *streamEnd.
	readFrame func(fr *wire.FrameReader, dst []T) ([]T, error)
	eofReason string // why the stream ended when the broker closed it cleanly

	endOnce sync.Once
	endErr  error         // set before endC is closed
	endC    chan struct{} // closed when no more items will be read

	mu      sync.Mutex
	closed  bool          // Close was called
	es      *eventStream  // set by attach
	attachC chan struct{} // closed by attach
	closeC  chan struct{} // closed by Close
	intr    interrupt     // the caller's ctx's hold on the read

	// Owned by the caller of Next: the items of the last frame read that
	// Next has not returned yet, pending[head:].
	pending []T
	head    int
}

// streamEnd is a frame that ends the event stream: err is how, and clean
// says it was the broker's last word rather than a broken frame.
type streamEnd struct {
	err   error
	clean bool
}

func (e *streamEnd) Error() string { return e.err.Error() }

// interrupt wakes a read blocked in Next when the caller's ctx ends, by
// setting a read deadline that has passed. It stays armed from one Next to
// the next while the ctx stays the same (the same Done channel), since
// arming costs more than reading a small frame.
type interrupt struct {
	done  <-chan struct{} // the Done channel it watches; nil when unarmed
	stop  func() bool
	fired chan struct{} // closed once the deadline is set
}

func (l *streamLife[T]) init(c *Client, id uint64, ctrl *ctrlStream) {
	l.c, l.id, l.ctrl = c, id, ctrl
	l.endC, l.attachC, l.closeC = make(chan struct{}), make(chan struct{}), make(chan struct{})
}

// next returns the next item, reading a frame when none is left. It is
// cancel-safe: a ctx that ends interrupts the read, and the frame it was
// in the middle of is resumed by the next call. After the end it returns
// the items already read, then why.
func (l *streamLife[T]) next(ctx context.Context) (T, error) {
	var zero T
	for {
		select {
		case <-l.closeC:
			return zero, ErrClosed
		default:
		}
		if l.head < len(l.pending) {
			it := l.pending[l.head]
			l.pending[l.head] = zero
			l.head++
			return it, nil
		}
		select {
		case <-l.endC:
			l.mu.Lock()
			l.disarm()
			l.mu.Unlock()
			return zero, l.endErr
		default:
		}
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		es, err := l.waitStream(ctx)
		if err != nil {
			return zero, err
		}
		if err := l.fill(ctx, es); err != nil {
			return zero, err
		}
	}
}

// waitStream returns the event stream once the router has handed it over.
func (l *streamLife[T]) waitStream(ctx context.Context) (*eventStream, error) {
	select {
	case <-l.attachC:
		return l.es, nil
	default:
	}
	select {
	case <-l.attachC:
		return l.es, nil
	case <-l.endC:
		return nil, l.endErr
	case <-l.closeC:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// longAgo is a read deadline that has passed: it wakes a blocked read.
var longAgo = time.Unix(1, 0)

// fill reads one frame into pending. It returns an error only when ctx
// ended first; an end of the stream is recorded with end, for next to
// return once pending is drained.
func (l *streamLife[T]) fill(ctx context.Context, es *eventStream) error {
	l.arm(ctx, es)
	dst := l.pending[:0]
	if cap(dst) > keptItems {
		dst = nil // let a burst's storage go
	}
	items, err := l.readFrame(es.fr, dst)
	l.pending, l.head = items, 0
	if err == nil {
		return nil
	}
	var se *streamEnd
	switch {
	case errors.As(err, &se):
		l.endBadFrame(*es, se.err, se.clean)
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
		return ctx.Err() // the frame resumes on the next call
	default:
		l.end(l.lostReason(err))
	}
	return nil
}

// arm makes ctx's end wake a blocked read of es.
func (l *streamLife[T]) arm(ctx context.Context, es *eventStream) {
	done := ctx.Done()
	l.mu.Lock()
	defer l.mu.Unlock()
	if done == l.intr.done || l.closed {
		return
	}
	l.disarm()
	if done == nil {
		return
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = es.rs.SetReadDeadline(longAgo)
		close(fired)
	})
	l.intr = interrupt{done: done, stop: stop, fired: fired}
}

// disarm lets the caller's ctx go, clearing the deadline it set. l.mu is
// held.
func (l *streamLife[T]) disarm() {
	in := l.intr
	l.intr = interrupt{}
	if in.stop == nil || in.stop() {
		return
	}
	<-in.fired
	if l.es != nil {
		_ = l.es.rs.SetReadDeadline(time.Time{})
	}
}

// endBadFrame ends the owner on a frame that decoded to err: the stream is
// reset as broken unless the frame was the broker's clean last word.
func (l *streamLife[T]) endBadFrame(es eventStream, err error, clean bool) {
	l.end(err)
	code := wire.CloseBadStream
	if clean {
		code = wire.CloseNoError
	}
	es.stop(code)
}

// keptItems is the largest pending storage kept for the next frame.
const keptItems = 64

// close stops the event stream, so the broker drops it. Next returns
// ErrClosed afterwards.
func (l *streamLife[T]) close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.closeC)
	l.disarm()
	es := l.es
	l.mu.Unlock()
	l.c.router.unregister(l)
	l.c.untrackSub(l)
	if es != nil {
		es.stop(wire.CloseNoError)
	}
	l.ctrl.abort()
	l.end(ErrClosed)
	return nil
}

// abort ends the streams because the client is shutting down: Next
// returns the items already read, then the client's shutdown reason.
func (l *streamLife[T]) abort() {
	l.end(l.lostReason(ErrClosed)) // first: a stream attached from now on is refused
	l.mu.Lock()
	es := l.es
	l.disarm()
	l.mu.Unlock()
	l.c.router.unregister(l)
	if es != nil {
		es.stop(wire.CloseNoError)
	}
	l.ctrl.abort()
}

// eventStream is the attached event stream, nil until it came.
func (l *streamLife[T]) eventStream() *eventStream {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.es
}

// ended reports whether end was called.
func (l *streamLife[T]) ended() bool {
	select {
	case <-l.endC:
		return true
	default:
		return false
	}
}

// end records why no more items will come; the first reason wins.
func (l *streamLife[T]) end(err error) {
	l.endOnce.Do(func() {
		l.endErr = err
		close(l.endC)
	})
}

// lostReason is what the owner reports when its stream failed with err:
// ErrClosed after Close, the client's shutdown reason, otherwise
// ErrSubscriptionLost wrapping the cause.
func (l *streamLife[T]) lostReason(err error) error {
	select {
	case <-l.closeC:
		return ErrClosed
	default:
	}
	if reason := l.c.shutdownReason(); reason != nil {
		return reason
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %s", ErrSubscriptionLost, l.eofReason)
	}
	return fmt.Errorf("%w: %v", ErrSubscriptionLost, l.c.failure(err))
}

func (l *streamLife[T]) streamID() uint64 { return l.id }

// connectionEnded ends an owner whose event stream never came.
func (l *streamLife[T]) connectionEnded() { l.end(l.lostReason(ErrConnectionLost)) }

// attach binds the event stream; the next call of Next reads it. A stream
// that comes after the owner was closed or ended (the router hands it over
// outside its lock) is cancelled, so the broker lets it go.
func (l *streamLife[T]) attach(es eventStream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.es != nil || l.ended() {
		es.stop(wire.CloseNoError)
		return
	}
	l.es = &es
	close(l.attachC)
}

// watchControl reads the control stream to its end, so QUIC can retire
// it. An error the broker sends there ends the owner.
func (l *streamLife[T]) watchControl() {
	for {
		msg, err := readMessage(l.ctrl.fr)
		if err != nil {
			return
		}
		if m, ok := msg.(*wire.ErrorMsg); ok {
			l.end(fromWire(m.Err()))
			if es := l.eventStream(); es != nil {
				es.stop(wire.CloseNoError)
			}
			return
		}
	}
}

// start registers a new owner with the handle and the router and starts
// watching its control stream; on failure it closes it.
func (l *streamLife[T]) start() error {
	if !l.c.trackSub(l) {
		_ = l.close()
		return l.c.failure(ErrClosed)
	}
	if err := l.c.router.register(l); err != nil {
		_ = l.close()
		return err
	}
	l.c.spawn(l.watchControl)
	return nil
}
