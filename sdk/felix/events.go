package felix

import (
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/wire"
)

// readFrame reads one event frame and appends its events to dst.
func (s *Subscription) readFrame(fr *wire.FrameReader, dst []Event) ([]Event, error) {
	f, err := fr.NextOwned() // events alias this frame's buffer
	if err != nil {
		return dst, err
	}
	b, err := decodeEventFrame(f)
	if err != nil {
		// The broker's last frame (lagged, or an error such as draining)
		// is a clean end.
		var lagged *SubscriptionLagged
		var be *BrokerError
		var moved *ShardMovedError
		return dst, &streamEnd{err: err, clean: errors.As(err, &lagged) || errors.As(err, &be) || errors.As(err, &moved)}
	}
	for i, p := range b.payloads {
		ev := b.event(i, p)
		ev.Namespace, ev.Stream, ev.Shard = s.namespace, s.stream, s.shard
		dst = append(dst, ev)
	}
	eventsReceived.Add(len(b.payloads))
	return dst, nil
}

// eventBatch is one decoded event frame.
type eventBatch struct {
	payloads      [][]byte
	baseOffset    uint64
	hasOffset     bool
	skippedBefore uint64
	timestamps    []uint64 // one per payload, or nil
	publisher     string
}

// event builds the i-th event of the batch. The skip count belongs to the
// gap before the batch, so only the first event carries it.
func (b *eventBatch) event(i int, payload []byte) Event {
	ev := Event{Payload: payload, Publisher: b.publisher}
	if b.hasOffset {
		ev.Offset, ev.HasOffset = b.baseOffset+uint64(i), true
	}
	if i == 0 {
		ev.SkippedBefore = b.skippedBefore
	}
	if i < len(b.timestamps) && b.timestamps[i] != 0 {
		ev.TimestampMicros = b.timestamps[i]
		ev.Timestamp = time.UnixMicro(int64(b.timestamps[i]))
	}
	return ev
}

// decodeEventFrame decodes a shared binary batch, a binary batch with id,
// or a JSON event_batch / event. A JSON error message is returned as a
// *BrokerError that ends the subscription, subscription_lagged as a
// *SubscriptionLagged; JSON messages of other types
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
			hasOffset: f.Flags&wire.FlagEventBatchOffsets != 0, skippedBefore: b.SkippedBefore,
			timestamps: b.Timestamps, publisher: b.Publisher}, nil
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
		if m.SkippedBefore != nil {
			b.skippedBefore = *m.SkippedBefore
		}
		return b, nil
	case *wire.Event:
		b := eventBatch{payloads: [][]byte{m.Payload}}
		if m.Offset != nil {
			b.baseOffset, b.hasOffset = *m.Offset, true
		}
		return b, nil
	case *wire.ErrorMsg:
		if m.Code == wire.CodeDraining {
			// The broker is shutting down: the subscription is lost (a
			// ClusterSubscription resumes elsewhere) and says why.
			return eventBatch{}, fmt.Errorf("%w: %w", ErrSubscriptionLost, fromWire(m.Err()))
		}
		return eventBatch{}, fromWire(m.Err())
	case *wire.SubscriptionLagged:
		return eventBatch{}, &SubscriptionLagged{SubscriptionID: m.SubscriptionID, ResumeFrom: m.ResumeFrom}
	case *wire.ShardMoved:
		return eventBatch{}, shardMovedError(m)
	}
	return eventBatch{}, nil
}

func badFrame(err error) error {
	return fmt.Errorf("%w: bad event frame: %v", ErrSubscriptionLost, err)
}
