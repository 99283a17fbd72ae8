package core

// replayRing keeps a shard's most recent batches so a subscriber can start
// from a point in the recent past. It is touched only under the shard's
// commit turn.
type replayRing struct {
	maxBatches int
	maxBytes   int64
	// buf holds n envelopes starting at head, oldest first.
	// Invariant: n <= maxBatches, bytes <= maxBytes, bytes == sum of Size().
	// Invariant: the envelopes are contiguous: each starts at the previous
	// one's EndOffset.
	buf   []*Envelope
	head  int
	n     int
	bytes int64
}

func newReplayRing(maxBatches int, maxBytes int64) replayRing {
	return replayRing{maxBatches: maxBatches, maxBytes: maxBytes}
}

// push appends e, evicting the oldest batches until both bounds hold. A
// batch larger than the byte bound evicts everything, itself included.
func (r *replayRing) push(e *Envelope) {
	size := int64(e.Size())
	if size > r.maxBytes {
		r.reset()
		return
	}
	for r.n > 0 && (r.n >= r.maxBatches || r.bytes+size > r.maxBytes) {
		r.evict()
	}
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)%len(r.buf)] = e
	r.n++
	r.bytes += size
}

func (r *replayRing) grow() {
	size := 2 * len(r.buf)
	if size < 8 {
		size = 8
	}
	if size > r.maxBatches {
		size = r.maxBatches
	}
	nb := make([]*Envelope, size)
	for i := 0; i < r.n; i++ {
		nb[i] = r.at(i)
	}
	r.buf, r.head = nb, 0
}

func (r *replayRing) evict() {
	e := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	r.bytes -= int64(e.Size())
}

func (r *replayRing) reset() {
	clear(r.buf)
	r.head, r.n, r.bytes = 0, 0, 0
}

// at returns the i-th oldest batch.
func (r *replayRing) at(i int) *Envelope { return r.buf[(r.head+i)%len(r.buf)] }

// earliest returns the oldest offset the ring holds, or next when empty.
func (r *replayRing) earliest(next uint64) uint64 {
	if r.n == 0 {
		return next
	}
	return r.at(0).BaseOffset
}

// from returns the retained batches covering offsets n and later, the
// first one cut to start exactly at n. n must be within
// [earliest, next).
func (r *replayRing) from(n uint64) []*Envelope {
	i := r.find(n)
	if i < 0 {
		return nil
	}
	out := make([]*Envelope, 0, r.n-i)
	out = append(out, r.at(i).suffixFrom(n))
	for j := i + 1; j < r.n; j++ {
		out = append(out, r.at(j))
	}
	return out
}

// find returns the index of the batch holding offset n, or -1, by binary
// search over the contiguous batches.
func (r *replayRing) find(n uint64) int {
	lo, hi := 0, r.n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if r.at(mid).EndOffset() <= n {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == r.n || r.at(lo).BaseOffset > n {
		return -1
	}
	return lo
}
