package felix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/felixmq/felix/wire"
)

// streamLife is what a Subscription and a CacheWatch share: the control
// stream their request went out on, the event stream the router hands
// over, the bounded queue its reader fills, and how it all ends. The
// owner registers the streamLife itself with the router and trackSub.
type streamLife[T any] struct {
	c    *Client
	id   uint64 // the id the event stream's hello names
	ctrl *ctrlStream

	read      func(eventStream) // the owner's reader: decodes frames and calls deliver
	size      func(*T) int      // bytes an item holds
	eofReason string            // why the stream ended when the broker closed it cleanly

	queue    *itemQueue[T]       // filled by read
	bytes    *semaphore.Weighted // item bytes in queue
	maxBytes int64
	ctx      context.Context // ends on Close or client shutdown
	stop     context.CancelFunc

	endOnce sync.Once
	endErr  error         // set before endC is closed
	endC    chan struct{} // closed when no more items will be queued

	mu         sync.Mutex
	closed     bool          // Close was called
	es         *eventStream  // set by attach
	readerDone chan struct{} // closed when the reader exits (nil until attached)
	closeC     chan struct{} // closed by Close
}

func (l *streamLife[T]) init(c *Client, id uint64, ctrl *ctrlStream, queue int, maxBytes int64) {
	l.c, l.id, l.ctrl = c, id, ctrl
	l.queue, l.bytes, l.maxBytes = newItemQueue[T](queue), semaphore.NewWeighted(maxBytes), maxBytes
	l.ctx, l.stop = context.WithCancel(c.ctx)
	l.endC, l.closeC = make(chan struct{}), make(chan struct{})
}

// weight is what an item counts against the byte bound.
func (l *streamLife[T]) weight(it *T) int64 { return min(int64(l.size(it)), l.maxBytes) }

// next returns the next item, releasing its bytes. It is cancel-safe;
// after the end it returns the items already queued, then why.
func (l *streamLife[T]) next(ctx context.Context) (T, error) {
	var zero T
	select {
	case <-l.closeC:
		return zero, ErrClosed
	default:
	}
	for {
		if it, ok := l.queue.tryPop(); ok {
			return l.take(it)
		}
		select {
		case <-l.queue.readyC:
		case <-l.endC:
			if it, ok := l.queue.tryPop(); ok {
				return l.take(it)
			}
			return zero, l.endErr
		case <-l.closeC:
			return zero, ErrClosed
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}

func (l *streamLife[T]) take(it T) (T, error) {
	l.bytes.Release(l.weight(&it))
	return it, nil
}

// deliver queues one item. It returns false when the owner or client
// ended while it waited for room.
func (l *streamLife[T]) deliver(it T) bool {
	n := l.weight(&it)
	if err := l.bytes.Acquire(l.ctx, n); err != nil {
		l.end(l.lostReason(ErrClosed))
		return false
	}
	for !l.queue.tryPush(it) {
		select {
		case <-l.queue.roomC:
		case <-l.ctx.Done():
			l.bytes.Release(n)
			l.end(l.lostReason(ErrClosed))
			return false
		}
	}
	return true
}

// endBadFrame ends the reader on a frame that decoded to err: the stream
// is reset as broken unless the frame was the broker's clean last word.
func (l *streamLife[T]) endBadFrame(es eventStream, err error, clean bool) {
	l.end(err)
	code := streamErrBadHead
	if clean {
		code = 0
	}
	es.rs.CancelRead(code)
}

// close stops the event stream, so the broker drops it, and waits for the
// reader. Next returns ErrClosed afterwards.
func (l *streamLife[T]) close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.closeC)
	l.stop()
	es, done := l.es, l.readerDone
	l.mu.Unlock()
	l.c.router.unregister(l)
	l.c.untrackSub(l)
	if es != nil {
		es.rs.CancelRead(0)
	}
	l.ctrl.abort()
	l.end(ErrClosed)
	if done != nil {
		<-done
	}
	return nil
}

// abort ends the streams because the client is shutting down: Next
// returns the items already received, then the client's shutdown reason.
// The client's shutdown waits for the reader.
func (l *streamLife[T]) abort() {
	l.stop()
	es := l.eventStream()
	l.c.router.unregister(l)
	if es != nil {
		es.rs.CancelRead(0)
	}
	l.ctrl.abort()
	l.end(l.lostReason(ErrClosed))
}

// eventStream is the attached event stream, nil until it came.
func (l *streamLife[T]) eventStream() *eventStream {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.es
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

// attach binds the event stream and starts the reader.
func (l *streamLife[T]) attach(es eventStream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		es.rs.CancelRead(0)
		return
	}
	done := make(chan struct{})
	started := l.c.spawn(func() {
		defer close(done)
		l.read(es)
	})
	if !started {
		es.rs.CancelRead(0)
		l.end(l.lostReason(ErrConnectionLost))
		return
	}
	l.es, l.readerDone = &es, done
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
				es.rs.CancelRead(0)
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
