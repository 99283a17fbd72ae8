package felix

import (
	"fmt"

	"github.com/felixmq/felix/wire"
)

// read is the subscription's reader: it decodes event frames into the
// queue until the stream ends. A full queue blocks it, so QUIC flow control
// pushes back on the broker.
func (s *Subscription) read(es eventStream) {
	for {
		f, err := es.fr.NextOwned() // events alias this frame's buffer
		if err != nil {
			s.end(s.lostReason(err))
			return
		}
		batch, err := decodeEventFrame(f)
		if err != nil {
			s.end(err)
			es.rs.CancelRead(streamErrBadHead)
			return
		}
		if !s.deliver(batch) {
			return
		}
	}
}

// deliver queues a batch's events in order. It returns false when the
// subscription or client ended while it waited for room.
func (s *Subscription) deliver(b eventBatch) bool {
	for i, p := range b.payloads {
		ev := Event{Payload: p, Namespace: s.namespace, Stream: s.stream}
		if b.hasOffset {
			ev.Offset, ev.HasOffset = b.baseOffset+uint64(i), true
		}
		w := s.weight(&ev)
		if err := s.bytes.Acquire(s.ctx, w); err != nil {
			s.end(s.lostReason(ErrClosed))
			return false
		}
		select {
		case s.queue <- ev:
			eventsReceived.Inc()
		case <-s.ctx.Done():
			s.bytes.Release(w)
			s.end(s.lostReason(ErrClosed))
			return false
		}
	}
	return true
}

// eventBatch is one decoded event frame.
type eventBatch struct {
	payloads   [][]byte
	baseOffset uint64
	hasOffset  bool
}

// decodeEventFrame decodes a shared binary batch, a binary batch with id,
// or a JSON event_batch / event. A JSON error message is returned as a
// *BrokerError that ends the subscription; JSON messages of other types
// are skipped (an empty batch). Malformed frames end the subscription with
// ErrSubscriptionLost.
func decodeEventFrame(f wire.Frame) (eventBatch, error) {
	switch {
	case f.Flags&wire.FlagBinaryEventBatchShared != 0:
		b, err := wire.ParseSharedEventBatch(f.Flags, f.Payload)
		if err != nil {
			return eventBatch{}, badFrame(err)
		}
		return eventBatch{payloads: b.Payloads, baseOffset: b.BaseOffset,
			hasOffset: f.Flags&wire.FlagEventBatchOffsets != 0}, nil
	case f.Flags&wire.FlagBinaryEventBatch != 0:
		_, payloads, err := wire.ParseEventBatchWithID(f.Payload)
		if err != nil {
			return eventBatch{}, badFrame(err)
		}
		return eventBatch{payloads: payloads}, nil
	case f.Flags != 0:
		return eventBatch{}, badFrame(fmt.Errorf("unknown frame flags %#04x", f.Flags))
	}
	msg, err := wire.ParseMessage(f.Payload)
	if err != nil {
		return eventBatch{}, badFrame(err)
	}
	switch m := msg.(type) {
	case *wire.EventBatch:
		b := eventBatch{payloads: m.Payloads}
		if m.BaseOffset != nil {
			b.baseOffset, b.hasOffset = *m.BaseOffset, true
		}
		return b, nil
	case *wire.Event:
		b := eventBatch{payloads: [][]byte{m.Payload}}
		if m.Offset != nil {
			b.baseOffset, b.hasOffset = *m.Offset, true
		}
		return b, nil
	case *wire.ErrorMsg:
		return eventBatch{}, fromWire(m.Err())
	}
	return eventBatch{}, nil
}

func badFrame(err error) error {
	return fmt.Errorf("%w: bad event frame: %v", ErrSubscriptionLost, err)
}
