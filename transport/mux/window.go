package mux

import "time"

// recvWindow is the receive side of flow control for one stream or for
// the whole connection: what we allowed the peer to send, what arrived
// and what the reader consumed.
//
// Invariant: consumed <= received <= limit, and limit - consumed <= maxSize,
// so unread bytes never exceed maxSize.
type recvWindow struct {
	limit    uint64 // the highest offset the peer may send up to (advertised)
	received uint64 // bytes arrived
	consumed uint64 // bytes read by the application or discarded
	size     uint64 // current window size; grows up to maxSize
	maxSize  uint64

	epochStart    time.Time // when the window was last advertised
	epochConsumed uint64    // consumed at epochStart
}

func newRecvWindow(initial, max uint64) recvWindow {
	return recvWindow{limit: initial, size: initial, maxSize: max}
}

// onData accounts n arriving bytes; it reports false when they exceed
// the advertised limit (a flow control violation).
func (w *recvWindow) onData(n uint64) bool {
	if w.received+n > w.limit || w.received+n < w.received {
		return false
	}
	w.received += n
	return true
}

// onConsumed accounts n bytes read or discarded and returns the new limit
// to advertise, when one is due: once less than half the window is left.
// The window doubles (up to maxSize) when the reader went through the
// last one in less than about two round trips, as quic-go's auto-tuning
// does.
func (w *recvWindow) onConsumed(n uint64, now time.Time, rtt time.Duration) (uint64, bool) {
	w.consumed += n
	if w.limit-w.consumed > w.size/2 {
		return 0, false
	}
	if rtt > 0 && !w.epochStart.IsZero() && w.size < w.maxSize {
		fraction := float64(w.consumed-w.epochConsumed) / float64(w.size)
		if now.Sub(w.epochStart) < time.Duration(4*fraction*float64(rtt)) {
			w.size = min(2*w.size, w.maxSize)
		}
	}
	w.epochStart, w.epochConsumed = now, w.consumed
	w.limit = w.consumed + w.size
	return w.limit, true
}

// atLeast grows the window to size (capped at maxSize); the connection
// window keeps ahead of its streams' windows this way.
func (w *recvWindow) atLeast(size uint64) {
	w.size = max(w.size, min(size, w.maxSize))
}
