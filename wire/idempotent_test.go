package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sampleIdempotentPublishes() []BinaryPublish {
	return []BinaryPublish{
		{RequestID: 7, ProducerID: 1<<64 - 1, Sequence: 0, Key: []byte("k"), TenantID: "acme", Namespace: "prod", Stream: "orders",
			Payloads: [][]byte{[]byte("a"), {}}},
		{RequestID: 8, ProducerID: 42, Sequence: 1 << 50, TenantID: "t", Namespace: "n", Stream: "s", Payloads: [][]byte{[]byte("x")}},
	}
}

// The idempotent binary publish carries the producer id and sequence
// after the request id, and decodes back to the same batch.
func TestBinaryIdempotentPublishRoundTrip(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		flags := PublishFlags(true, keyed) | FlagBinaryPublishIdempotent
		for i, p := range sampleIdempotentPublishes() {
			if !keyed {
				p.Key = nil
			}
			frame := p.AppendFrame(nil, flags)
			h, err := ParseFrameHeader(frame)
			if err != nil || int(h.Length) != p.BodyLen(flags) || h.Flags != flags {
				t.Fatalf("#%d: header %+v %v", i, h, err)
			}
			body := frame[HeaderLen:]
			if got := body[8:24]; !bytes.Equal(got[:8], be64(p.ProducerID)) || !bytes.Equal(got[8:], be64(p.Sequence)) {
				t.Fatalf("#%d: producer block % x", i, got)
			}
			back, err := ParseBinaryPublish(flags, body)
			if err != nil || !reflect.DeepEqual(back, p) {
				t.Fatalf("#%d: decoded %+v %v, want %+v", i, back, err, p)
			}
		}
	}
}

func be64(v uint64) []byte {
	var b [8]byte
	for i := range b {
		b[7-i] = byte(v >> (8 * i))
	}
	return b[:]
}

// An idempotent frame must be acked: every numbered batch is answered.
func TestBinaryIdempotentNeedsAcked(t *testing.T) {
	p := sampleIdempotentPublishes()[1]
	flags := FlagBinaryPublishBatch | FlagBinaryPublishIdempotent
	_, err := ParseBinaryPublish(flags, p.AppendFrame(nil, flags|FlagBinaryPublishAcked)[HeaderLen:])
	var we *Error
	if !errors.As(err, &we) || we.Code != CodeInvalidRequest || !strings.Contains(we.Message, "ACKED") {
		t.Fatalf("idempotent without acked: %v", err)
	}
}

// The JSON shapes of producer_init, producer_init_ok, publish_idempotent
// and the producer refusals of publish_refused.
func TestIdempotentMessageShapes(t *testing.T) {
	seq := uint64(3)
	exp := uint64(2)
	for _, c := range []struct {
		m    Message
		want string
	}{
		{&ProducerInit{TenantID: "a", Namespace: "b", Stream: "c", RequestID: 1}, `{"type":"producer_init","tenant_id":"a","namespace":"b","stream":"c","request_id":1}`},
		{&ProducerInitOK{ProducerID: 99, RequestID: 1}, `{"type":"producer_init_ok","producer_id":99,"request_id":1}`},
		{&PublishIdempotent{TenantID: "a", Namespace: "b", Stream: "c", Payloads: [][]byte{[]byte("hi")}, ProducerID: 99, Sequence: &seq, RequestID: 2},
			`{"type":"publish_idempotent","tenant_id":"a","namespace":"b","stream":"c","payloads":["aGk="],"producer_id":99,"sequence":3,"request_id":2}`},
		{&PublishRefused{RequestID: 2, Producer: &ProducerRefusal{Reason: ReasonSequenceGap, Expected: &exp}},
			`{"type":"publish_refused","request_id":2,"producer":{"reason":"sequence_gap","expected":2}}`},
		{&PublishRefused{RequestID: 2, Producer: &ProducerRefusal{Reason: ReasonSequenceReused}},
			`{"type":"publish_refused","request_id":2,"producer":{"reason":"sequence_reused"}}`},
	} {
		b, err := MarshalMessage(c.m)
		if err != nil || string(b) != c.want {
			t.Fatalf("%T: %s %v\nwant %s", c.m, b, err, c.want)
		}
		back, err := ParseMessage(b)
		if err != nil || !reflect.DeepEqual(back, c.m) {
			t.Fatalf("%T: parsed %#v %v", c.m, back, err)
		}
	}
}

// A producer refusal converts to an *Error (code invalid_request, class
// fatal, detail reason and, for a gap, expected), survives the trip
// through JSON, and converts back to the same publish_refused.
func TestProducerRefusalErrorRoundTrip(t *testing.T) {
	exp := uint64(12)
	for _, r := range []ProducerRefusal{
		{Reason: ReasonSequenceGap, Expected: &exp},
		{Reason: ReasonUnknownProducer},
		{Reason: ReasonSequenceExpired},
		{Reason: ReasonSequenceReused},
	} {
		e := r.Err()
		if e.Code != CodeInvalidRequest || e.Retry != RetryFatal || e.Detail[DetailReason] != r.Reason {
			t.Fatalf("%s: %+v", r.Reason, e)
		}
		got, ok := e.ProducerRefusalOf()
		if !ok || !reflect.DeepEqual(got, r) {
			t.Fatalf("%s: back %+v %v", r.Reason, got, ok)
		}
		// Through a publish_error's JSON detail and back.
		b, err := json.Marshal(e.PublishErrorMessage(5, true))
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseMessage(append([]byte(`{"type":"publish_error",`), b[1:]...))
		if err != nil {
			t.Fatal(err)
		}
		pr, ok := PublishRefusedFromError(5, m.(*PublishError).Err())
		if !ok || pr.Producer == nil || !reflect.DeepEqual(*pr.Producer, r) || pr.OffsetMismatch != nil {
			t.Fatalf("%s: publish_refused from JSON %+v %v", r.Reason, pr, ok)
		}
	}
	// Not a producer refusal: another invalid_request, or a gap without expected.
	if _, ok := NewError(CodeInvalidRequest, "x").WithDetail(DetailReason, "not_durable").ProducerRefusalOf(); ok {
		t.Fatal("not_durable read as a producer refusal")
	}
	if _, ok := NewError(CodeInvalidRequest, "x").WithDetail(DetailReason, ReasonSequenceGap).ProducerRefusalOf(); ok {
		t.Fatal("a gap without expected read as a refusal")
	}
	// A reason this version does not know is fatal, not a refusal it invents.
	if e := (&PublishRefused{Producer: &ProducerRefusal{Reason: "made_up"}}).Err(); e.Retry != RetryFatal {
		t.Fatalf("unknown reason: %+v", e)
	}
}

func TestPublishIdempotentValidate(t *testing.T) {
	seq := uint64(0)
	max := uint64(1<<64 - 1)
	ok := PublishIdempotent{TenantID: "a", Namespace: "b", Stream: "c", Payloads: [][]byte{[]byte("x")}, ProducerID: 1, Sequence: &seq}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	shard := uint32(1)
	for name, mut := range map[string]func(*PublishIdempotent){
		"no payloads":    func(m *PublishIdempotent) { m.Payloads = nil },
		"empty batch":    func(m *PublishIdempotent) { m.Payloads = [][]byte{} },
		"no producer":    func(m *PublishIdempotent) { m.ProducerID = 0 },
		"no sequence":    func(m *PublishIdempotent) { m.Sequence = nil },
		"last sequence":  func(m *PublishIdempotent) { m.Sequence = &max },
		"shard and key":  func(m *PublishIdempotent) { m.Shard, m.Key = &shard, []byte("k") },
		"missing stream": func(m *PublishIdempotent) { m.Stream = "" },
	} {
		m := ok
		mut(&m)
		if err := m.Validate(); err == nil {
			t.Errorf("%s: validated", name)
		}
	}
}

// Equal batches have equal digests; a change of a byte, of the record
// boundaries or of the count changes it.
func TestBatchDigest(t *testing.T) {
	a := BatchDigest([][]byte{[]byte("ab"), []byte("c")})
	if a != BatchDigest([][]byte{[]byte("ab"), []byte("c")}) {
		t.Fatal("digest not deterministic")
	}
	for _, other := range [][][]byte{
		{[]byte("a"), []byte("bc")},
		{[]byte("abc")},
		{[]byte("ab"), []byte("d")},
		{[]byte("ab"), []byte("c"), {}},
	} {
		if BatchDigest(other) == a {
			t.Fatalf("%q digests like [ab c]", other)
		}
	}
}
