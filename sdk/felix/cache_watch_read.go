package felix

import (
	"fmt"
	"time"

	"github.com/felixmq/felix/wire"
)

// attach binds the event stream and starts the reader.
func (w *CacheWatch) attach(es eventStream) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		es.rs.CancelRead(0)
		return
	}
	done := make(chan struct{})
	started := w.c.spawn(func() {
		defer close(done)
		w.read(es)
	})
	if !started {
		es.rs.CancelRead(0)
		w.end(w.lostReason(ErrConnectionLost))
		return
	}
	w.es, w.readerDone = &es, done
}

// watchControl reads the cache_watch stream to its end, so QUIC can
// retire it. An error the broker sends there ends the watch.
func (w *CacheWatch) watchControl() {
	for {
		msg, err := readMessage(w.ctrl.fr)
		if err != nil {
			return
		}
		if m, ok := msg.(*wire.ErrorMsg); ok {
			w.end(fromWire(m.Err()))
			w.mu.Lock()
			es := w.es
			w.mu.Unlock()
			if es != nil {
				es.rs.CancelRead(0)
			}
			return
		}
	}
}

// read is the watch's reader: it decodes frames into the queue until the
// stream ends. A full queue blocks it, so QUIC flow control pushes back.
func (w *CacheWatch) read(es eventStream) {
	for {
		msg, err := readMessage(es.fr)
		if err != nil {
			w.end(w.lostReason(err))
			return
		}
		it, ok, err := watchItem(w.id, msg)
		if err != nil {
			w.end(err)
			// The broker's last frame is a clean end; anything else is a
			// broken stream.
			code := streamErrBadHead
			if _, last := msg.(*wire.CacheWatchLagged); last {
				code = 0
			} else if _, last := msg.(*wire.ErrorMsg); last {
				code = 0
			}
			es.rs.CancelRead(code)
			return
		}
		if ok && !w.deliver(it) {
			return
		}
	}
}

// deliver queues one item. It returns false when the watch or client ended
// while it waited for room.
func (w *CacheWatch) deliver(it CacheWatchItem) bool {
	n := w.weight(&it)
	if err := w.bytes.Acquire(w.ctx, n); err != nil {
		w.end(w.lostReason(ErrClosed))
		return false
	}
	select {
	case w.queue <- it:
		return true
	case <-w.ctx.Done():
		w.bytes.Release(n)
		w.end(w.lostReason(ErrClosed))
		return false
	}
}

// watchItem converts one event-stream message. ok is false for a message
// to skip (an unknown type); err is how the watch ends: *CacheWatchLagged,
// the *BrokerError of an error frame, or ErrSubscriptionLost for a
// malformed change.
func watchItem(id uint64, msg wire.Message) (it CacheWatchItem, ok bool, err error) {
	switch m := msg.(type) {
	case *wire.CacheChange:
		if err := m.Validate(); err != nil {
			return it, false, badFrame(err)
		}
		it = CacheWatchItem{Offset: m.Offset, Op: string(m.Op), Key: m.Key, Value: m.Value, Retained: m.Retained}
		if m.ExpiresAtMs != nil {
			it.ExpiresAt = time.UnixMilli(int64(*m.ExpiresAtMs))
		}
		return it, true, nil
	case *wire.CacheWatchState:
		return CacheWatchItem{Offset: m.Offset, StateComplete: true, Count: m.Count}, true, nil
	case *wire.CacheWatchLagged:
		return it, false, &CacheWatchLagged{WatchID: id, ResumeFrom: m.ResumeFrom}
	case *wire.ErrorMsg:
		return it, false, fromWire(m.Err())
	}
	return it, false, nil
}

// String renders an item for logs: offset, op, key and value.
func (it CacheWatchItem) String() string {
	switch {
	case it.StateComplete:
		return fmt.Sprintf("%d state-complete (%d values)", it.Offset, it.Count)
	case it.Value != nil:
		return fmt.Sprintf("%d %s %q %q", it.Offset, it.Op, it.Key, it.Value)
	}
	return fmt.Sprintf("%d %s %q", it.Offset, it.Op, it.Key)
}
