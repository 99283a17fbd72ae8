package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func u64p(v uint64) *uint64 { return &v }
func u32p(v uint32) *uint32 { return &v }

// sampleMessages returns one or more values of every JSON message type,
// with every optional field both set and unset somewhere in the list.
func sampleMessages() []Message {
	return append([]Message{
		&Auth{TenantID: "acme", Token: "header.claims.sig", ClientFlags: FlagBinaryEventBatchShared | FlagEventBatchOffsets, Features: FeatureErrorCodes | FeatureUnsupported},
		&Auth{TenantID: "acme", Token: "t"},
		&AuthOK{ServerFlags: 0x00db, ServerFeatures: 0x1b, PublishWindow: u32p(256)},
		&AuthOK{},
		&Publish{TenantID: "acme", Namespace: "prod", Stream: "events", Payload: []byte("hello"), Key: []byte("user-7"), RequestID: 7, Ack: AckPerMessage},
		&Publish{TenantID: "acme", Namespace: "prod", Stream: "events", Payload: []byte{}},
		&Publish{TenantID: "acme", Namespace: "city", Stream: "ticks", Payload: []byte("t"), RequestID: 8, Ack: AckPerMessage, Shard: u32p(2)},
		&PublishBatch{TenantID: "acme", Namespace: "prod", Stream: "events", Payloads: [][]byte{[]byte("a"), {}, {0, 0xff, 0x10}}, Key: []byte{1, 2}, RequestID: 9, Ack: AckPerBatch},
		&PublishBatch{TenantID: "acme", Namespace: "prod", Stream: "events", Payloads: [][]byte{}, Ack: AckNone},
		&PublishBatch{TenantID: "acme", Namespace: "city", Stream: "ticks", Payloads: [][]byte{[]byte("t")}, RequestID: 10, Ack: AckPerBatch, Shard: u32p(0)},
		&PublishOK{RequestID: 7, Offset: u64p(100)},
		&PublishOK{RequestID: 0},
		&PublishError{RequestID: 7, Message: "stream not found", Code: CodeNotFound, Retry: RetryRetryAfter, Detail: json.RawMessage(`{"reason":"unknown_stream"}`)},
		&PublishError{RequestID: 8, Message: "forbidden"},
		&Subscribe{TenantID: "acme", Namespace: "prod", Stream: "events", SubscriptionID: u64p(7), Start: &StartPosition{Kind: StartOffset, Offset: 1200}, Shard: u32p(3)},
		&Subscribe{TenantID: "acme", Namespace: "prod", Stream: "events", Start: &StartPosition{Kind: StartEarliest}},
		&Subscribe{TenantID: "acme", Namespace: "prod", Stream: "events", Start: &StartPosition{Kind: StartLatest}},
		&Subscribe{TenantID: "acme", Namespace: "prod", Stream: "events"},
		&Subscribed{SubscriptionID: 7, StartOffset: u64p(1200), LiveOffset: u64p(1350)},
		&Subscribed{SubscriptionID: 8},
		&EventStreamHello{SubscriptionID: 1<<64 - 1},
		&Event{TenantID: "acme", Namespace: "prod", Stream: "events", Payload: []byte("e"), Offset: u64p(3)},
		&Event{TenantID: "acme", Namespace: "prod", Stream: "events", Payload: []byte{}},
		&EventBatch{TenantID: "acme", Namespace: "prod", Stream: "events", Payloads: [][]byte{[]byte("x"), []byte("y")}, BaseOffset: u64p(10), SkippedBefore: u64p(2)},
		&EventBatch{TenantID: "acme", Namespace: "prod", Stream: "events", Payloads: [][]byte{[]byte("x")}},
		&CachePut{TenantID: "acme", Namespace: "prod", Cache: "sessions", Key: "s-1", Value: []byte("v"), TTLMs: u64p(3_600_000), RequestID: 1},
		&CachePut{TenantID: "acme", Namespace: "prod", Cache: "sessions", Key: "s-1", Value: []byte{}, RequestID: 2},
		&CacheGet{TenantID: "acme", Namespace: "prod", Cache: "sessions", Key: "s-1", RequestID: 3},
		&CacheDelete{TenantID: "acme", Namespace: "prod", Cache: "sessions", Key: "s-1", RequestID: 4},
		&CacheOK{RequestID: 1},
		&CacheValue{RequestID: 3, Key: "s-1", Value: []byte("v")},
		&CacheValue{RequestID: 3, Key: "s-1", Value: nil},
		&CacheValue{RequestID: 3, Key: "s-1", Value: []byte{}},
		&CacheValue{RequestID: 3, Key: "s-1", Value: []byte("v"), Version: u64p(41)},
		&CachePutIf{TenantID: "acme", Namespace: "prod", Cache: "leases", Key: "endpoint-7", Value: []byte("me"), TTLMs: u64p(30_000), Condition: &CacheCondition{Absent: true}, RequestID: 7},
		&CachePutIf{TenantID: "acme", Namespace: "prod", Cache: "leases", Key: "endpoint-7", Value: []byte{}, Condition: &CacheCondition{Version: 41}, RequestID: 8},
		&CacheDeleteIf{TenantID: "acme", Namespace: "prod", Cache: "leases", Key: "endpoint-7", Version: u64p(41), RequestID: 9},
		&CacheConditionResult{Applied: false, Version: u64p(41), RequestID: 7},
		&CacheConditionResult{Applied: true, Version: u64p(1 << 62), RequestID: 8},
		&CacheConditionResult{RequestID: 9},
		&CacheGetVersioned{TenantID: "acme", Namespace: "prod", Cache: "config", Key: "endpoints", RequestID: 10},
		&PublishIf{TenantID: "acme", Namespace: "games", Stream: "match-7", Payloads: [][]byte{[]byte("tick")}, ExpectedOffset: u64p(120), RequestID: 9},
		&Commit{TenantID: "acme", Namespace: "orders", Stream: "order-events", EntityKey: []byte("order-42"), Ops: []CommitOp{
			{Op: CommitOpEnqueue, Stream: "order-events", Payload: []byte(`{"type":"placed"}`)},
			{Op: CommitOpPut, Key: "order-42", Value: []byte(`{"status":"placed"}`)}, {Op: CommitOpDelete, Key: "cart-42"}}, RequestID: 12},
		&Commit{TenantID: "acme", Namespace: "city", Stream: "ticks", Shard: u32p(2), Ops: []CommitOp{{Op: CommitOpPublish, Payload: []byte("t")}}, ExpectedOffset: u64p(7), RequestID: 13},
		&StateGet{TenantID: "acme", Namespace: "orders", Stream: "order-events", EntityKey: []byte("order-42"), Key: "order-42", RequestID: 14},
		&StateGet{TenantID: "acme", Namespace: "city", Stream: "ticks", Shard: u32p(2), Key: "district", RequestID: 15},
		&StateValue{RequestID: 14, Key: "order-42", Value: []byte("v"), Version: u64p(41)},
		&StateValue{RequestID: 15, Key: "district"},
		&PublishIf{TenantID: "acme", Namespace: "games", Stream: "match-7", Payloads: [][]byte{{}, {0xff}}, Key: []byte("k"), ExpectedOffset: u64p(0), RequestID: 10},
		&PublishIf{TenantID: "acme", Namespace: "games", Stream: "match-7", Payloads: [][]byte{[]byte("t")}, Shard: u32p(3), ExpectedOffset: u64p(1 << 40), RequestID: 11},
		&PublishRefused{RequestID: 9, OffsetMismatch: &OffsetMismatch{Tail: 121}},
		&PublishRefused{RequestID: 10},
		&PublishRefused{RequestID: 11, Producer: &ProducerRefusal{Reason: ReasonSequenceGap, Expected: u64p(12)}},
		&PublishRefused{RequestID: 12, Producer: &ProducerRefusal{Reason: ReasonUnknownProducer}},
		&ProducerInit{TenantID: "acme", Namespace: "prod", Stream: "orders", RequestID: 13},
		&ProducerInitOK{ProducerID: 1<<63 + 5, RequestID: 13},
		&PublishIdempotent{TenantID: "acme", Namespace: "prod", Stream: "orders", Payloads: [][]byte{[]byte("o1"), {}}, ProducerID: 77, Sequence: u64p(0), RequestID: 14},
		&PublishIdempotent{TenantID: "acme", Namespace: "prod", Stream: "orders", Payloads: [][]byte{[]byte("o2")}, Key: []byte("c-42"), ProducerID: 77, Sequence: u64p(1 << 40), RequestID: 15},
		&PublishIdempotent{TenantID: "acme", Namespace: "prod", Stream: "orders", Payloads: [][]byte{[]byte("o3")}, Shard: u32p(2), ProducerID: 78, Sequence: u64p(3), RequestID: 16},
		&ErrorMsg{Message: "publish queue full", Code: CodeOverloaded, Retry: RetryRetryAfter, Detail: json.RawMessage(`{"reason":"publish_queue_full","retry_after_ms":10}`), RequestID: u64p(4)},
		&ErrorMsg{Message: "auth required"},
		&Unsupported{RequestType: "topology", RequestID: u64p(3)},
		&Unsupported{RequestType: "topology"},
		&SubscribeCursorError{Reason: CursorTooOld, Requested: 5, Available: 1200, Message: "offset 5 is older than the oldest retained offset 1200"},
		&SubscribeCursorError{Reason: CursorInFuture, Requested: 9000, Available: 1350, RequestID: u64p(10)},
		&SubscriptionLagged{SubscriptionID: 7, ResumeFrom: 48210},
		&StreamRead{TenantID: "acme", Namespace: "prod", Stream: "events", Shard: 1, From: 48210, End: u64p(48300), MaxRecords: 50, RequestID: 10},
		&StreamRead{TenantID: "acme", Namespace: "prod", Stream: "events", From: 0, RequestID: 11},
		&StreamRecords{Records: []StreamRecord{{Offset: 48210, Payload: []byte("x"), TimestampMicros: 1767225600000000, Publisher: "svc"}, {Offset: 48211, Payload: []byte{}}}, NextOffset: 48212, RequestID: 10},
		&StreamRecords{Records: []StreamRecord{}, NextOffset: 3, RequestID: 11},
		&OffsetForTime{TenantID: "acme", Namespace: "prod", Stream: "events", Shard: 0, AtMicros: 1767225600000000, RequestID: 9},
		&OffsetValue{Offset: u64p(48210), RequestID: 9},
		&OffsetValue{RequestID: 9},
	}, groupSamples()...)
}

// wantInvalid fails unless err is an *Error with code invalid_request.
func wantInvalid(t *testing.T, err error) {
	t.Helper()
	var we *Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not a *wire.Error", err, err)
	}
	if we.Code != CodeInvalidRequest || we.Retry != RetryFatal {
		t.Fatalf("error %v: code %q retry %q, want invalid_request fatal", err, we.Code, we.Retry)
	}
}

// canonicalMessage returns m with every json.RawMessage field replaced by
// a canonical encoding, so messages that differ only in how their detail's
// JSON was spelled compare equal.
func canonicalMessage(t testing.TB, m Message) Message {
	t.Helper()
	switch v := m.(type) {
	case *ErrorMsg:
		c := *v
		c.Detail = canonicalJSON(t, c.Detail)
		return &c
	case *PublishError:
		c := *v
		c.Detail = canonicalJSON(t, c.Detail)
		return &c
	case *Commit:
		// An empty entity key, event payload or value is the same as
		// none (encoded, each is left out).
		c := *v
		c.EntityKey = emptyAsNil(c.EntityKey)
		c.Ops = make([]CommitOp, len(v.Ops))
		for i, op := range v.Ops {
			op.Payload, op.Value = emptyAsNil(op.Payload), emptyAsNil(op.Value)
			c.Ops[i] = op
		}
		return &c
	case *StateGet:
		c := *v
		c.EntityKey = emptyAsNil(c.EntityKey)
		return &c
	}
	return m
}

func emptyAsNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func canonicalJSON(t testing.TB, raw json.RawMessage) json.RawMessage {
	t.Helper()
	if raw == nil {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("detail %q does not decode: %v", raw, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("detail %q does not re-encode: %v", raw, err)
	}
	return out
}

func sameMessage(t testing.TB, a, b Message) bool {
	t.Helper()
	return reflect.DeepEqual(canonicalMessage(t, a), canonicalMessage(t, b))
}
