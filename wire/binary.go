package wire

import (
	"encoding/binary"
	"math"
)

func malformed(what string) error {
	return &Error{Code: CodeInvalidRequest, Retry: RetryFatal, Message: "malformed binary frame: " + what}
}

// BinaryPublish is a binary publish batch (FLAG_BINARY_PUBLISH_BATCH).
//
// Body layout, in order:
//
//	request_id u64            when FLAG_BINARY_PUBLISH_ACKED
//	producer_id u64           when FLAG_BINARY_PUBLISH_IDEMPOTENT (which
//	sequence u64              needs FLAG_BINARY_PUBLISH_ACKED)
//	key_len u16, key          when FLAG_BINARY_PUBLISH_KEYED
//	tenant_len u16, tenant
//	namespace_len u16, namespace
//	stream_len u16, stream
//	count u32
//	count × (len u32, payload)
type BinaryPublish struct {
	RequestID uint64
	// ProducerID and Sequence number an idempotent producer's batch
	// (FLAG_BINARY_PUBLISH_IDEMPOTENT).
	ProducerID uint64
	Sequence   uint64
	Key        []byte
	TenantID   string
	Namespace  string
	Stream     string
	Payloads   [][]byte
}

// PublishFlags returns the frame flags for a binary publish with the given
// options.
func PublishFlags(acked, keyed bool) uint16 {
	f := FlagBinaryPublishBatch
	if acked {
		f |= FlagBinaryPublishAcked
	}
	if keyed {
		f |= FlagBinaryPublishKeyed
	}
	return f
}

// BodyLen returns the encoded body length under flags.
func (p *BinaryPublish) BodyLen(flags uint16) int {
	n := 6 + len(p.TenantID) + len(p.Namespace) + len(p.Stream) + 4
	if flags&FlagBinaryPublishAcked != 0 {
		n += 8
	}
	if flags&FlagBinaryPublishIdempotent != 0 {
		n += 16
	}
	if flags&FlagBinaryPublishKeyed != 0 {
		n += 2 + len(p.Key)
	}
	for _, pl := range p.Payloads {
		n += 4 + len(pl)
	}
	return n
}

// AppendFrame appends a whole frame (header and body) for p under flags.
// Names longer than 65535 bytes or keys longer than 65535 bytes are the
// caller's error; Validate catches them.
func (p *BinaryPublish) AppendFrame(dst []byte, flags uint16) []byte {
	dst = FrameHeader{Flags: flags, Length: uint32(p.BodyLen(flags))}.Append(dst)
	if flags&FlagBinaryPublishAcked != 0 {
		dst = binary.BigEndian.AppendUint64(dst, p.RequestID)
	}
	if flags&FlagBinaryPublishIdempotent != 0 {
		dst = binary.BigEndian.AppendUint64(dst, p.ProducerID)
		dst = binary.BigEndian.AppendUint64(dst, p.Sequence)
	}
	if flags&FlagBinaryPublishKeyed != 0 {
		dst = appendBytes16(dst, p.Key)
	}
	dst = appendString16(dst, p.TenantID)
	dst = appendString16(dst, p.Namespace)
	dst = appendString16(dst, p.Stream)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(p.Payloads)))
	for _, pl := range p.Payloads {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(pl)))
		dst = append(dst, pl...)
	}
	return dst
}

// Validate checks that every name and the key fit their u16 length prefix
// and that the whole body fits a frame's u32 length. It does not apply a
// FrameReader limit; that is the sender's to check against what it
// negotiated.
func (p *BinaryPublish) Validate() error {
	for _, s := range []string{p.TenantID, p.Namespace, p.Stream} {
		if len(s) > math.MaxUint16 {
			return NewError(CodeInvalidRequest, "name longer than 65535 bytes")
		}
	}
	if len(p.Key) > math.MaxUint16 {
		return NewError(CodeInvalidRequest, "key longer than 65535 bytes")
	}
	if uint64(len(p.Payloads)) > math.MaxUint32 {
		return NewError(CodeInvalidRequest, "too many payloads")
	}
	if uint64(p.BodyLen(PublishFlags(true, true)|FlagBinaryPublishIdempotent)) > math.MaxUint32 {
		return NewError(CodeInvalidRequest, "publish batch longer than a frame can declare")
	}
	return nil
}

// ParseBinaryPublish decodes a binary publish body under flags. Payloads
// and key alias b. A keyed frame with key_len 0 decodes with a nil Key.
// The whole body must be consumed: trailing bytes are malformed.
func ParseBinaryPublish(flags uint16, b []byte) (BinaryPublish, error) {
	var p BinaryPublish
	r := reader{b: b}
	if flags&FlagBinaryPublishIdempotent != 0 && flags&FlagBinaryPublishAcked == 0 {
		return BinaryPublish{}, malformed("FLAG_BINARY_PUBLISH_IDEMPOTENT without FLAG_BINARY_PUBLISH_ACKED (every idempotent batch is answered)")
	}
	if flags&FlagBinaryPublishAcked != 0 {
		p.RequestID = r.u64()
	}
	if flags&FlagBinaryPublishIdempotent != 0 {
		p.ProducerID = r.u64()
		p.Sequence = r.u64()
	}
	if flags&FlagBinaryPublishKeyed != 0 {
		// An empty key is no key, as in the JSON publish, where an empty
		// key is left out.
		if k := r.bytes16(); len(k) > 0 {
			p.Key = k
		}
	}
	p.TenantID = string(r.bytes16())
	p.Namespace = string(r.bytes16())
	p.Stream = string(r.bytes16())
	p.Payloads = r.payloads()
	if r.err != nil {
		return BinaryPublish{}, r.err
	}
	if len(r.b) != 0 {
		return BinaryPublish{}, malformed("trailing bytes after publish batch")
	}
	return p, nil
}

// EventBatchHeader carries the optional parts of a binary event batch. Which
// parts are encoded is decided by the flags passed with it.
type EventBatchHeader struct {
	BaseOffset    uint64   // FLAG_EVENT_BATCH_OFFSETS
	SkippedBefore uint64   // FLAG_EVENT_BATCH_SKIPPED
	Timestamps    []uint64 // FLAG_EVENT_BATCH_TIMESTAMPS, one per payload (µs)
	Publisher     string   // FLAG_EVENT_BATCH_PUBLISHER
}

// EventBatchOptionFlags are the flags that add optional parts to an event
// batch.
const EventBatchOptionFlags = FlagEventBatchOffsets | FlagEventBatchSkipped | FlagEventBatchTimestamps | FlagEventBatchPublisher

// SharedEventBatchLen returns the body length of a shared event batch.
func SharedEventBatchLen(flags uint16, h *EventBatchHeader, payloads [][]byte) int {
	n := 4
	if flags&FlagEventBatchOffsets != 0 {
		n += 8
	}
	if flags&FlagEventBatchSkipped != 0 {
		n += 8
	}
	for _, pl := range payloads {
		n += 4 + len(pl)
	}
	if flags&FlagEventBatchTimestamps != 0 {
		n += 8 * len(payloads)
	}
	if flags&FlagEventBatchPublisher != 0 {
		n += 2 + len(h.Publisher)
	}
	return n
}

// AppendSharedEventBatchFrame appends a whole shared event batch frame.
// flags must include FLAG_BINARY_EVENT_BATCH_SHARED plus any option flags.
// Timestamps missing for a payload are encoded as 0.
//
// Body: [base_offset u64] [skipped_before u64] count u32, count × (len u32,
// bytes), [count × timestamp u64], [publisher_len u16, publisher].
func AppendSharedEventBatchFrame(dst []byte, flags uint16, h *EventBatchHeader, payloads [][]byte) []byte {
	if h == nil {
		h = &EventBatchHeader{}
	}
	dst = FrameHeader{Flags: flags, Length: uint32(SharedEventBatchLen(flags, h, payloads))}.Append(dst)
	if flags&FlagEventBatchOffsets != 0 {
		dst = binary.BigEndian.AppendUint64(dst, h.BaseOffset)
	}
	if flags&FlagEventBatchSkipped != 0 {
		dst = binary.BigEndian.AppendUint64(dst, h.SkippedBefore)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payloads)))
	for _, pl := range payloads {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(pl)))
		dst = append(dst, pl...)
	}
	if flags&FlagEventBatchTimestamps != 0 {
		for i := range payloads {
			var ts uint64
			if i < len(h.Timestamps) {
				ts = h.Timestamps[i]
			}
			dst = binary.BigEndian.AppendUint64(dst, ts)
		}
	}
	if flags&FlagEventBatchPublisher != 0 {
		dst = appendString16(dst, h.Publisher)
	}
	return dst
}

// SharedEventBatch is a decoded shared event batch. Payloads alias the
// input.
type SharedEventBatch struct {
	EventBatchHeader
	Payloads [][]byte
}

// ParseSharedEventBatch decodes the body of a FLAG_BINARY_EVENT_BATCH_SHARED
// frame with the given flags.
func ParseSharedEventBatch(flags uint16, b []byte) (SharedEventBatch, error) {
	var e SharedEventBatch
	r := reader{b: b}
	if flags&FlagEventBatchOffsets != 0 {
		e.BaseOffset = r.u64()
	}
	if flags&FlagEventBatchSkipped != 0 {
		e.SkippedBefore = r.u64()
	}
	e.Payloads = r.payloads()
	if flags&FlagEventBatchTimestamps != 0 && r.err == nil {
		if len(r.b) < 8*len(e.Payloads) {
			r.fail("timestamps")
		} else {
			e.Timestamps = make([]uint64, len(e.Payloads))
			for i := range e.Timestamps {
				e.Timestamps[i] = r.u64()
			}
		}
	}
	if flags&FlagEventBatchPublisher != 0 {
		e.Publisher = string(r.bytes16())
	}
	if r.err != nil {
		return SharedEventBatch{}, r.err
	}
	if len(r.b) != 0 {
		return SharedEventBatch{}, malformed("trailing bytes after event batch")
	}
	return e, nil
}

// ParseEventBatchWithID decodes the body of a FLAG_BINARY_EVENT_BATCH
// frame: subscription_id u64, count u32, count × (len u32, bytes).
func ParseEventBatchWithID(b []byte) (subscriptionID uint64, payloads [][]byte, err error) {
	r := reader{b: b}
	subscriptionID = r.u64()
	payloads = r.payloads()
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes after event batch")
	}
	if r.err != nil {
		return 0, nil, r.err
	}
	return subscriptionID, payloads, nil
}

// AppendEventBatchWithIDFrame appends a FLAG_BINARY_EVENT_BATCH frame.
func AppendEventBatchWithIDFrame(dst []byte, subscriptionID uint64, payloads [][]byte) []byte {
	n := 12
	for _, pl := range payloads {
		n += 4 + len(pl)
	}
	dst = FrameHeader{Flags: FlagBinaryEventBatch, Length: uint32(n)}.Append(dst)
	dst = binary.BigEndian.AppendUint64(dst, subscriptionID)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payloads)))
	for _, pl := range payloads {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(pl)))
		dst = append(dst, pl...)
	}
	return dst
}

func appendString16(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func appendBytes16(dst []byte, s []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// reader decodes big-endian fields, remembering the first error; after an
// error every read returns zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = malformed(what)
	}
	r.b = nil
}

func (r *reader) u16() uint16 {
	if len(r.b) < 2 {
		r.fail("short u16")
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *reader) u32() uint32 {
	if len(r.b) < 4 {
		r.fail("short u32")
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64() uint64 {
	if len(r.b) < 8 {
		r.fail("short u64")
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) take(n int) []byte {
	if n < 0 || len(r.b) < n {
		r.fail("length prefix past the end")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes16() []byte { return r.take(int(r.u16())) }

// payloads reads count u32 then count length-prefixed payloads, checking
// the count against the bytes present before allocating.
func (r *reader) payloads() [][]byte {
	count := r.u32()
	if r.err != nil {
		return nil
	}
	if uint64(count)*4 > uint64(len(r.b)) {
		r.fail("payload count larger than the frame")
		return nil
	}
	out := make([][]byte, count)
	for i := range out {
		out[i] = r.take(int(r.u32()))
		if r.err != nil {
			return nil
		}
	}
	return out
}
