package wire

import (
	"encoding/json"
	"math"
	"strconv"
)

// The conditional publish (FEATURE_PUBLISH_CONDITIONAL).
//
// publish_if appends its batch only if the batch would start at
// expected_offset, the shard's next offset. Written, it is answered with
// publish_ok carrying the batch's first offset once the batch is durable.
// Refused, it is answered with publish_refused naming the shard's tail
// (its next offset now), and nothing was written. A refusal is an answer,
// not an error: it is sent whatever the client offered, and in Go it
// converts to an *Error of code offset_mismatch (Err) whose detail has the
// same {"offset_mismatch": {"tail": N}} member.

// PublishIf is a batch publish with a precondition on the shard's next
// offset. Key routes the batch as in publish_batch; Shard names the shard
// outright (FEATURE_EXPLICIT_SHARD), never with Key. There is no ack
// member: every publish_if is answered.
type PublishIf struct {
	TenantID       string   `json:"tenant_id"`
	Namespace      string   `json:"namespace"`
	Stream         string   `json:"stream"`
	Payloads       [][]byte `json:"payloads"`
	Key            []byte   `json:"key,omitempty"`
	Shard          *uint32  `json:"shard,omitempty"`
	ExpectedOffset *uint64  `json:"expected_offset"`
	RequestID      uint64   `json:"request_id"`
}

// OffsetMismatch is why a publish_if was refused: the shard's next offset
// was Tail, not the expected one.
type OffsetMismatch struct {
	Tail uint64 `json:"tail"`
}

// PublishRefused answers a publish_if whose condition did not hold.
// OffsetMismatch is its one reason today; a client that finds no reason it
// knows treats the refusal as fatal.
type PublishRefused struct {
	RequestID      uint64          `json:"request_id"`
	OffsetMismatch *OffsetMismatch `json:"offset_mismatch,omitempty"`
	// Producer is why an idempotent publish was refused
	// (publish_idempotent, idempotent.go).
	Producer *ProducerRefusal `json:"producer,omitempty"`
}

func (*PublishIf) MessageType() string      { return "publish_if" }
func (*PublishRefused) MessageType() string { return "publish_refused" }

// newPublishIfMessage returns an empty conditional-publish message of
// type t, or nil.
func newPublishIfMessage(t string) Message {
	switch t {
	case "publish_if":
		return &PublishIf{}
	case "publish_refused":
		return &PublishRefused{}
	}
	return nil
}

// Validate checks the required fields of a publish_if: the names, at
// least one payload (an empty batch would take no offset, so its
// condition would mean nothing), expected_offset, and not both shard and
// key.
func (m *PublishIf) Validate() error {
	if err := requireNames("publish_if", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"stream", m.Stream}); err != nil {
		return err
	}
	if m.Payloads == nil {
		return NewError(CodeInvalidRequest, "publish_if: missing field payloads")
	}
	if len(m.Payloads) == 0 {
		return NewError(CodeInvalidRequest, "publish_if: payloads is empty; a conditional publish writes at least one record")
	}
	if m.ExpectedOffset == nil {
		return NewError(CodeInvalidRequest, "publish_if: missing field expected_offset")
	}
	if *m.ExpectedOffset > math.MaxUint64-uint64(len(m.Payloads)) {
		return NewError(CodeInvalidRequest, "publish_if: expected_offset %d leaves no room for %d records", *m.ExpectedOffset, len(m.Payloads))
	}
	return validShardOrKey("publish_if", m.Shard, m.Key)
}

// DetailOffsetMismatch is the detail member of an offset_mismatch error,
// {"tail": N}, the same object publish_refused carries.
const DetailOffsetMismatch = "offset_mismatch"

// NewOffsetMismatch is the refusal of a conditional write whose expected
// offset was not the shard's next one, tail: code offset_mismatch, retry
// class fatal (sending it again as it is fails the same way), detail
// {"offset_mismatch": {"tail": tail}}.
func NewOffsetMismatch(expected, tail uint64) *Error {
	e := NewError(CodeOffsetMismatch, "expected the shard's next offset to be %d, it is %d; nothing was written", expected, tail)
	e.Retry = RetryFatal
	return e.WithDetail(DetailOffsetMismatch, map[string]any{"tail": tail})
}

// Err returns the refusal as an *Error of code offset_mismatch (or, for a
// refusal naming no reason this version knows, invalid_request), retry
// class fatal.
func (m *PublishRefused) Err() *Error {
	if m.OffsetMismatch == nil && m.Producer != nil {
		return m.Producer.Err()
	}
	if m.OffsetMismatch == nil {
		e := NewError(CodeInvalidRequest, "publish_if refused for a reason this client does not know")
		e.Retry = RetryFatal
		return e
	}
	e := NewError(CodeOffsetMismatch, "the shard's next offset is %d; nothing was written", m.OffsetMismatch.Tail)
	e.Retry = RetryFatal
	return e.WithDetail(DetailOffsetMismatch, map[string]any{"tail": m.OffsetMismatch.Tail})
}

// OffsetMismatchTail returns the tail an offset_mismatch error names, from
// its detail; ok is false for any other error or a detail without a
// usable tail. It reads the detail as built locally (Go integers) and as
// decoded from JSON (float64 or json.Number).
func (e *Error) OffsetMismatchTail() (tail uint64, ok bool) {
	if e == nil || e.Code != CodeOffsetMismatch {
		return 0, false
	}
	var v any
	switch d := e.Detail[DetailOffsetMismatch].(type) {
	case map[string]any:
		v = d["tail"]
	case map[string]uint64:
		t, ok := d["tail"]
		return t, ok
	default:
		return 0, false
	}
	switch n := v.(type) {
	case uint64:
		return n, true
	case int:
		return uint64(n), n >= 0
	case int64:
		return uint64(n), n >= 0
	case json.Number:
		u, err := strconv.ParseUint(n.String(), 10, 64)
		return u, err == nil
	case float64:
		// JSON numbers decode to float64, exact up to 2^53: offsets that
		// large are out of reach of any real log.
		if n < 0 || n != math.Trunc(n) || n >= math.MaxUint64 {
			return 0, false
		}
		return uint64(n), true
	}
	return 0, false
}

// PublishRefusedFromError returns the publish_refused answer for request
// id when e is an offset_mismatch with a tail, and false otherwise.
func PublishRefusedFromError(requestID uint64, e *Error) (*PublishRefused, bool) {
	if r, ok := e.ProducerRefusalOf(); ok {
		return &PublishRefused{RequestID: requestID, Producer: &r}, true
	}
	tail, ok := e.OffsetMismatchTail()
	if !ok {
		return nil, false
	}
	return &PublishRefused{RequestID: requestID, OffsetMismatch: &OffsetMismatch{Tail: tail}}, true
}
