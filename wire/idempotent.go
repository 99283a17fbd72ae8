package wire

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"strconv"
)

// Idempotent producers (FEATURE_IDEMPOTENT_PRODUCER).
//
// producer_init takes a producer id for a stream; publish_idempotent
// sends a batch under (producer id, sequence), the sequence counted per
// shard from 0. The shard's owner remembers the last ProducerWindow
// sequences of each producer with where each batch landed: the next
// sequence is appended, a held one re-sent with the same batch is answered
// from memory with the first copy's offset, and everything else is
// refused with publish_refused naming the reason (below). Nothing refused
// is written.

// ProducerWindow is how many of a producer's latest sequences a shard's
// owner remembers per shard; a sequence older than that is refused as
// sequence_expired.
const ProducerWindow = 64

// ProducerInit asks for a producer id for a stream. It needs
// stream.publish on the stream.
type ProducerInit struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
	RequestID uint64 `json:"request_id"`
}

// ProducerInitOK answers producer_init with a fresh producer id (never 0).
type ProducerInitOK struct {
	ProducerID uint64 `json:"producer_id"`
	RequestID  uint64 `json:"request_id"`
}

// PublishIdempotent is a batch publish under a producer's sequence on the
// batch's shard. Key routes the batch as in publish_batch; Shard names the
// shard outright (FEATURE_EXPLICIT_SHARD), never with Key. Every
// publish_idempotent is answered: publish_ok with the batch's first offset
// (the first copy's, for a re-send), publish_refused with a producer
// refusal, or publish_error.
type PublishIdempotent struct {
	TenantID   string   `json:"tenant_id"`
	Namespace  string   `json:"namespace"`
	Stream     string   `json:"stream"`
	Payloads   [][]byte `json:"payloads"`
	Key        []byte   `json:"key,omitempty"`
	Shard      *uint32  `json:"shard,omitempty"`
	ProducerID uint64   `json:"producer_id"`
	Sequence   *uint64  `json:"sequence"`
	RequestID  uint64   `json:"request_id"`
}

func (*ProducerInit) MessageType() string      { return "producer_init" }
func (*ProducerInitOK) MessageType() string    { return "producer_init_ok" }
func (*PublishIdempotent) MessageType() string { return "publish_idempotent" }

// newIdempotentMessage returns an empty idempotent-producer message of
// type t, or nil.
func newIdempotentMessage(t string) Message {
	switch t {
	case "producer_init":
		return &ProducerInit{}
	case "producer_init_ok":
		return &ProducerInitOK{}
	case "publish_idempotent":
		return &PublishIdempotent{}
	}
	return nil
}

// Validate checks producer_init's names.
func (m *ProducerInit) Validate() error {
	return requireNames("producer_init", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"stream", m.Stream})
}

// Validate checks the required fields of a publish_idempotent: the names,
// at least one payload, a producer id other than 0, a sequence, and not
// both shard and key.
func (m *PublishIdempotent) Validate() error {
	if err := requireNames("publish_idempotent", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"stream", m.Stream}); err != nil {
		return err
	}
	if m.Payloads == nil {
		return NewError(CodeInvalidRequest, "publish_idempotent: missing field payloads")
	}
	if len(m.Payloads) == 0 {
		return NewError(CodeInvalidRequest, "publish_idempotent: payloads is empty; a numbered batch holds at least one record")
	}
	if m.ProducerID == 0 {
		return NewError(CodeInvalidRequest, "publish_idempotent: missing field producer_id (0 is no producer; take one with producer_init)")
	}
	if m.Sequence == nil {
		return NewError(CodeInvalidRequest, "publish_idempotent: missing field sequence")
	}
	if *m.Sequence == math.MaxUint64 {
		return NewError(CodeInvalidRequest, "publish_idempotent: sequence %d leaves no next sequence", *m.Sequence)
	}
	return validShardOrKey("publish_idempotent", m.Shard, m.Key)
}

// The reasons a shard's owner refuses an idempotent publish.
const (
	// ReasonSequenceGap: the sequence is beyond the next one the owner
	// expects (Expected); something before it never landed.
	ReasonSequenceGap = "sequence_gap"
	// ReasonUnknownProducer: the owner holds no state for the producer on
	// the shard (a new in-memory leader, an evicted producer) and the
	// sequence is not 0.
	ReasonUnknownProducer = "unknown_producer"
	// ReasonSequenceExpired: the sequence is older than the ProducerWindow
	// the owner remembers; whether it landed cannot be told.
	ReasonSequenceExpired = "sequence_expired"
	// ReasonSequenceReused: the owner holds the sequence with a different
	// batch.
	ReasonSequenceReused = "sequence_reused"
)

// ProducerRefusal is why an idempotent publish was refused. Expected, the
// next sequence the owner would take, is set for sequence_gap only.
type ProducerRefusal struct {
	Reason   string  `json:"reason"`
	Expected *uint64 `json:"expected,omitempty"`
}

// NewProducerRefusal is the refusal of an idempotent publish: code
// invalid_request, retry class fatal (sent again as it is, it fails the
// same way), detail {"reason": reason} and, for sequence_gap,
// {"expected": expected}. message says what happened.
func NewProducerRefusal(reason string, expected uint64, message string) *Error {
	e := NewError(CodeInvalidRequest, "%s", message)
	e.Retry = RetryFatal
	e = e.WithDetail(DetailReason, reason)
	if reason == ReasonSequenceGap {
		e = e.WithDetail("expected", expected)
	}
	return e
}

// ProducerRefusalOf returns the producer refusal an error carries, and
// false for any other error. It reads the detail as built locally and as
// decoded from JSON.
func (e *Error) ProducerRefusalOf() (ProducerRefusal, bool) {
	if e == nil || e.Code != CodeInvalidRequest {
		return ProducerRefusal{}, false
	}
	reason, _ := e.Detail[DetailReason].(string)
	switch reason {
	case ReasonUnknownProducer, ReasonSequenceExpired, ReasonSequenceReused:
		return ProducerRefusal{Reason: reason}, true
	case ReasonSequenceGap:
		n, ok := detailUint(e.Detail["expected"])
		if !ok {
			return ProducerRefusal{}, false
		}
		return ProducerRefusal{Reason: reason, Expected: &n}, true
	}
	return ProducerRefusal{}, false
}

// Err returns the refusal as the *Error NewProducerRefusal builds.
func (r ProducerRefusal) Err() *Error {
	switch r.Reason {
	case ReasonSequenceGap:
		var exp uint64
		if r.Expected != nil {
			exp = *r.Expected
		}
		return NewProducerRefusal(r.Reason, exp, "sequence gap: the shard expects sequence "+strconv.FormatUint(exp, 10)+" next; nothing was written")
	case ReasonUnknownProducer:
		return NewProducerRefusal(r.Reason, 0, "unknown producer: the shard's owner holds no sequences for it; take a fresh producer id")
	case ReasonSequenceExpired:
		return NewProducerRefusal(r.Reason, 0, "sequence expired: older than the sequences the shard remembers; whether it landed cannot be told")
	case ReasonSequenceReused:
		return NewProducerRefusal(r.Reason, 0, "sequence reused: the shard holds this sequence with a different batch; nothing was written")
	}
	e := NewError(CodeInvalidRequest, "publish refused for a reason this client does not know (%q)", r.Reason)
	e.Retry = RetryFatal
	return e
}

// BatchDigest is the digest a shard's owner keeps of an idempotent batch
// to tell a re-send (the same batch) from a reused sequence: over the
// record count and each record's length and bytes, CRC-32C in the high
// half and CRC-32 (IEEE) in the low, both computed by the processor's
// CRC instructions where it has them (FNV-1a, a byte at a time, took a
// sixth of the broker's CPU under idempotent publishing). The SDK never
// sends it.
func BatchDigest(payloads [][]byte) uint64 {
	var c, i uint32
	var n [8]byte
	add := func(b []byte) {
		c = crc32.Update(c, castagnoli, b)
		i = crc32.Update(i, crc32.IEEETable, b)
	}
	binary.BigEndian.PutUint64(n[:], uint64(len(payloads)))
	add(n[:])
	for _, p := range payloads {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		add(n[:])
		add(p)
	}
	return uint64(c)<<32 | uint64(i)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)
