package core

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/wire"
)

// Envelope is one published batch as every subscriber of its shard sees
// it. A single Envelope is shared by all subscribers (and by the replay
// ring); nothing in it may be modified once it has been published.
type Envelope struct {
	// Key names the stream; it points at the stream's own key.
	Key *StreamKey
	// Payloads are the batch's records, in order. They are shared, not
	// copied: treat them as read-only.
	Payloads [][]byte
	// BaseOffset is the offset of Payloads[0]; record i is at
	// BaseOffset+i. In-memory streams keep offsets internally; the wire
	// shows them only where the frame flags ask for them.
	BaseOffset uint64
	// SkippedBefore is the number of offsets before BaseOffset that hold
	// no deliverable record (always 0 on in-memory streams).
	SkippedBefore uint64
	// Publisher names who published the batch (may be empty).
	Publisher string
	// EnqueuedAt is when the batch was claimed; it also supplies the
	// per-record timestamps of FLAG_EVENT_BATCH_TIMESTAMPS unless Times is
	// set.
	EnqueuedAt time.Time
	// Times, when set, holds each record's own append time (µs); batches
	// read back from a log carry them.
	Times []uint64

	// size caches the payload byte count for envelopes built by core;
	// zero means "compute on demand".
	size int
	// frames is a prepend-only list of encoded frames, one per distinct
	// flags value. Invariant: no two slots share a flags value.
	frames atomic.Pointer[frameSlot]
	// encodes counts the frames encoded, in the metrics of the broker
	// that built the envelope; nil (an envelope built elsewhere) counts
	// nothing.
	encodes *metrics.Counter
}

// frameSlot holds the frame encoded for one flags value.
type frameSlot struct {
	flags uint16
	once  sync.Once
	b     []byte
	next  *frameSlot
}

func newEnvelope(key *StreamKey, payloads [][]byte, base uint64, publisher string, at time.Time) *Envelope {
	return &Envelope{
		Key: key, Payloads: payloads, BaseOffset: base, Publisher: publisher,
		EnqueuedAt: at, size: payloadBytes(payloads),
	}
}

// envelope builds an envelope of the shard's stream whose encodes count
// in the shard's broker.
func (sh *Shard) envelope(payloads [][]byte, base uint64, publisher string, at time.Time) *Envelope {
	e := newEnvelope(&sh.stream.key, payloads, base, publisher, at)
	e.encodes = sh.metrics().framesEncoded
	return e
}

func payloadBytes(payloads [][]byte) int {
	return BatchBytes(payloads)
}

// PayloadOverhead is what one record costs in memory beyond its bytes (its
// slice header). Byte bounds count it so that a batch of many empty
// payloads cannot slip past them.
const PayloadOverhead = 24

// BatchBytes is the memory a batch of payloads is charged for: their bytes
// plus PayloadOverhead each.
func BatchBytes(payloads [][]byte) int {
	n := 0
	for _, p := range payloads {
		n += len(p) + PayloadOverhead
	}
	return n
}

// Size returns the bytes the batch is charged for (BatchBytes).
func (e *Envelope) Size() int {
	if e.size > 0 {
		return e.size
	}
	return payloadBytes(e.Payloads)
}

// Len returns the number of records in the batch.
func (e *Envelope) Len() int { return len(e.Payloads) }

// EndOffset returns the offset just past the batch's last record.
func (e *Envelope) EndOffset() uint64 { return e.BaseOffset + uint64(len(e.Payloads)) }

// Frame returns the complete encoded event frame (header included) for
// this envelope under flags, encoding it at most once per distinct flags
// value; every caller with the same flags shares the returned bytes, which
// must not be modified.
//
// Without wire.FlagBinaryEventBatchShared the frame is a JSON event_batch
// (frame flags 0): flags 0 leaves offsets out, and wire.FlagEventBatchOffsets
// (optionally with wire.FlagEventBatchSkipped) adds base_offset (and
// skipped_before when it is non-zero). With wire.FlagBinaryEventBatchShared
// the frame is a shared binary event batch carrying the option flags given.
func (e *Envelope) Frame(flags uint16) []byte {
	s := e.slot(flags)
	s.once.Do(func() {
		s.b = e.encode(flags)
		if e.encodes != nil {
			e.encodes.Inc()
		}
	})
	return s.b
}

// slot finds or adds the frame slot for flags without taking a lock:
// slots are only ever prepended, so a reader walking an old head sees a
// consistent suffix of the list.
func (e *Envelope) slot(flags uint16) *frameSlot {
	var fresh *frameSlot
	for {
		head := e.frames.Load()
		for s := head; s != nil; s = s.next {
			if s.flags == flags {
				return s
			}
		}
		if fresh == nil {
			fresh = &frameSlot{flags: flags}
		}
		fresh.next = head
		if e.frames.CompareAndSwap(head, fresh) {
			return fresh
		}
	}
}

func (e *Envelope) encode(flags uint16) []byte {
	if flags&wire.FlagBinaryEventBatchShared == 0 {
		return e.encodeJSON(flags)
	}
	h := wire.EventBatchHeader{
		BaseOffset:    e.BaseOffset,
		SkippedBefore: e.SkippedBefore,
		Publisher:     e.Publisher,
	}
	if flags&wire.FlagEventBatchTimestamps != 0 {
		h.Timestamps = e.timestamps()
	}
	size := wire.HeaderLen + wire.SharedEventBatchLen(flags, &h, e.Payloads)
	return wire.AppendSharedEventBatchFrame(make([]byte, 0, size), flags, &h, e.Payloads)
}

func (e *Envelope) encodeJSON(flags uint16) []byte {
	m := &wire.EventBatch{Payloads: e.Payloads}
	if e.Key != nil {
		m.TenantID, m.Namespace, m.Stream = e.Key.Tenant, e.Key.Namespace, e.Key.Stream
	}
	if m.Payloads == nil {
		m.Payloads = [][]byte{}
	}
	if flags&wire.FlagEventBatchOffsets != 0 {
		base := e.BaseOffset
		m.BaseOffset = &base
		if flags&wire.FlagEventBatchSkipped != 0 && e.SkippedBefore > 0 {
			skipped := e.SkippedBefore
			m.SkippedBefore = &skipped
		}
	}
	b, err := wire.AppendMessageFrame(nil, m)
	if err != nil {
		// Marshalling strings and byte slices cannot fail.
		panic(fmt.Sprintf("core: encoding event_batch of %d payloads: %v", len(e.Payloads), err))
	}
	return b
}

// timestamps gives every record the batch's claim time in microseconds.
func (e *Envelope) timestamps() []uint64 {
	if len(e.Times) == len(e.Payloads) {
		return e.Times
	}
	ts := make([]uint64, len(e.Payloads))
	if e.EnqueuedAt.IsZero() {
		return ts
	}
	us := uint64(e.EnqueuedAt.UnixMicro())
	for i := range ts {
		ts[i] = us
	}
	return ts
}

// suffixFrom returns an envelope holding the records of e from offset n
// on; e itself when n is its base offset. n must lie inside e.
func (e *Envelope) suffixFrom(n uint64) *Envelope {
	if n <= e.BaseOffset {
		return e
	}
	rest := e.Payloads[n-e.BaseOffset:]
	s := newEnvelope(e.Key, rest, n, e.Publisher, e.EnqueuedAt)
	s.encodes = e.encodes
	if len(e.Times) == len(e.Payloads) {
		s.Times = e.Times[n-e.BaseOffset:]
	}
	return s
}
