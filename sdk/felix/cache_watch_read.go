package felix

import (
	"fmt"
	"time"

	"github.com/felixmq/felix/wire"
)

// readFrame reads one frame of the watch's stream and appends its item,
// if it carries one, to dst.
func (w *CacheWatch) readFrame(fr *wire.FrameReader, dst []CacheWatchItem) ([]CacheWatchItem, error) {
	f, err := fr.Next()
	if err != nil {
		return dst, err
	}
	if f.Flags != 0 {
		return dst, &streamEnd{err: badFrame(fmt.Errorf("unexpected binary frame (flags %#04x)", f.Flags))}
	}
	msg, err := wire.ParseMessage(f.Payload)
	if err != nil {
		return dst, &streamEnd{err: badFrame(err)}
	}
	it, ok, err := watchItem(w.life.id, msg)
	if err != nil {
		// The broker's last frame is a clean end; anything else is a
		// broken stream.
		_, lagged := msg.(*wire.CacheWatchLagged)
		_, errMsg := msg.(*wire.ErrorMsg)
		_, moved := msg.(*wire.ShardMoved)
		return dst, &streamEnd{err: err, clean: lagged || errMsg || moved}
	}
	if ok {
		dst = append(dst, it)
	}
	return dst, nil
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
	case *wire.ShardMoved:
		return it, false, shardMovedError(m)
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
