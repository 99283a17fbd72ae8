package wire

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
)

// The specification's publish_if example parses to what it says, and the
// refusal carries {"offset_mismatch": {"tail": N}} both as publish_refused
// and, converted, as an offset_mismatch error's detail.
func TestPublishIfSpecShapes(t *testing.T) {
	spec := `{
  "type": "publish_if",
  "tenant_id": "acme",
  "namespace": "games",
  "stream": "match-7",
  "payloads": ["dGljaw=="],
  "expected_offset": 120,
  "request_id": 9
}`
	m, err := ParseMessage([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	p, ok := m.(*PublishIf)
	if !ok || p.TenantID != "acme" || p.Namespace != "games" || p.Stream != "match-7" || len(p.Payloads) != 1 ||
		string(p.Payloads[0]) != "tick" || p.ExpectedOffset == nil || *p.ExpectedOffset != 120 || p.RequestID != 9 || p.Key != nil || p.Shard != nil {
		t.Fatalf("publish_if parsed as %#v", m)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("the spec's example does not validate: %v", err)
	}
	for _, c := range []struct {
		m    Message
		want string
	}{
		{p, `{"type":"publish_if","tenant_id":"acme","namespace":"games","stream":"match-7","payloads":["dGljaw=="],"expected_offset":120,"request_id":9}`},
		{&PublishIf{TenantID: "a", Namespace: "b", Stream: "c", Payloads: [][]byte{{}}, Key: []byte("k"), ExpectedOffset: u64p(0), RequestID: 1},
			`{"type":"publish_if","tenant_id":"a","namespace":"b","stream":"c","payloads":[""],"key":"aw==","expected_offset":0,"request_id":1}`},
		{&PublishIf{TenantID: "a", Namespace: "b", Stream: "c", Payloads: [][]byte{{}}, Shard: u32p(2), ExpectedOffset: u64p(5), RequestID: 1},
			`{"type":"publish_if","tenant_id":"a","namespace":"b","stream":"c","payloads":[""],"shard":2,"expected_offset":5,"request_id":1}`},
		{&PublishRefused{RequestID: 9, OffsetMismatch: &OffsetMismatch{Tail: 121}}, `{"type":"publish_refused","request_id":9,"offset_mismatch":{"tail":121}}`},
	} {
		b, err := MarshalMessage(c.m)
		if err != nil || string(b) != c.want {
			t.Errorf("%T encoded as %s (%v), want %s", c.m, b, err, c.want)
		}
	}
}

func TestPublishIfValidate(t *testing.T) {
	ok := func() *PublishIf {
		return &PublishIf{TenantID: "a", Namespace: "b", Stream: "c", Payloads: [][]byte{[]byte("x")}, ExpectedOffset: u64p(3)}
	}
	for name, mut := range map[string]func(*PublishIf){
		"no tenant":          func(m *PublishIf) { m.TenantID = "" },
		"no namespace":       func(m *PublishIf) { m.Namespace = "" },
		"no stream":          func(m *PublishIf) { m.Stream = "" },
		"no payloads":        func(m *PublishIf) { m.Payloads = nil },
		"empty payloads":     func(m *PublishIf) { m.Payloads = [][]byte{} },
		"no expected_offset": func(m *PublishIf) { m.ExpectedOffset = nil },
		"shard and key":      func(m *PublishIf) { m.Shard, m.Key = u32p(1), []byte("k") },
		"offset overflows":   func(m *PublishIf) { m.ExpectedOffset = u64p(math.MaxUint64) },
	} {
		m := ok()
		mut(m)
		if err := m.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			wantInvalid(t, err)
		}
	}
	if err := ok().Validate(); err != nil {
		t.Fatal(err)
	}
	// An empty key is no key, as on publish_batch.
	m, err := ParseMessage([]byte(`{"type":"publish_if","tenant_id":"a","namespace":"b","stream":"c","payloads":["eA=="],"key":"","shard":1,"expected_offset":0,"request_id":1}`))
	if err != nil || m.(*PublishIf).Key != nil || m.(*PublishIf).Validate() != nil {
		t.Fatalf("empty key: %#v %v", m, err)
	}
}

// The refusal converts both ways: an offset_mismatch error built in the
// broker becomes publish_refused, and publish_refused read by a client
// becomes the same error with the tail readable from its detail, also
// after the detail went through JSON.
func TestOffsetMismatchRoundTrip(t *testing.T) {
	e := NewOffsetMismatch(120, 123)
	if e.Code != CodeOffsetMismatch || e.Retry != RetryFatal || e.Retry.Retryable() {
		t.Fatalf("refusal %+v", e)
	}
	if tail, ok := e.OffsetMismatchTail(); !ok || tail != 123 {
		t.Fatalf("tail %d %v", tail, ok)
	}
	pr, ok := PublishRefusedFromError(9, e)
	if !ok || pr.RequestID != 9 || pr.OffsetMismatch == nil || pr.OffsetMismatch.Tail != 123 {
		t.Fatalf("publish_refused %+v %v", pr, ok)
	}
	b, err := MarshalMessage(pr)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	back := m.(*PublishRefused).Err()
	if tail, ok := back.OffsetMismatchTail(); !ok || tail != 123 || back.Code != CodeOffsetMismatch {
		t.Fatalf("after the wire: %+v", back)
	}
	if !errors.Is(back, &Error{Code: CodeOffsetMismatch}) {
		t.Fatal("errors.Is does not match the code")
	}
	// The error form through JSON (as in a publish_error's detail).
	em := e.PublishErrorMessage(9, true)
	if string(em.Detail) != `{"offset_mismatch":{"tail":123}}` {
		t.Fatalf("detail %s", em.Detail)
	}
	if tail, ok := em.Err().OffsetMismatchTail(); !ok || tail != 123 {
		t.Fatalf("tail from JSON detail %d %v", tail, ok)
	}
	// Not an offset_mismatch, or no usable tail: no publish_refused.
	for _, x := range []*Error{
		NewError(CodeOverloaded, "x"),
		NewError(CodeOffsetMismatch, "no detail"),
		NewError(CodeOffsetMismatch, "bad").WithDetail(DetailOffsetMismatch, map[string]any{"tail": -1.0}),
		NewError(CodeOffsetMismatch, "bad").WithDetail(DetailOffsetMismatch, "7"),
	} {
		if _, ok := PublishRefusedFromError(1, x); ok {
			t.Errorf("%+v became a publish_refused", x)
		}
	}
	if e := (&PublishRefused{RequestID: 1}).Err(); e.Retry != RetryFatal {
		t.Fatalf("a refusal without a known reason: %+v", e)
	}
}

// FuzzOffsetMismatchDetail feeds the detail decoder arbitrary JSON: it
// never panics, and a tail it reads is the one the detail's JSON holds.
func FuzzOffsetMismatchDetail(f *testing.F) {
	for _, s := range []string{`{"offset_mismatch":{"tail":121}}`, `{"offset_mismatch":{"tail":1e300}}`,
		`{"offset_mismatch":{"tail":-3}}`, `{"offset_mismatch":{"tail":"x"}}`, `{"offset_mismatch":7}`, `{}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e := ErrorFromFields(CodeOffsetMismatch, "", "m", json.RawMessage(b))
		tail, ok := e.OffsetMismatchTail()
		if !ok {
			return
		}
		var d map[string]any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("read tail %d from %q, which does not decode: %v", tail, b, err)
		}
		om, _ := d[DetailOffsetMismatch].(map[string]any)
		if f, isNum := om["tail"].(float64); !isNum || uint64(f) != tail {
			t.Fatalf("read tail %d from %q, which holds %v", tail, b, om["tail"])
		}
	})
}
