package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		b, err := MarshalMessage(m)
		if err != nil {
			t.Fatalf("%s: marshal: %v", m.MessageType(), err)
		}
		prefix := `{"type":"` + m.MessageType() + `"`
		if !bytes.HasPrefix(b, []byte(prefix)) {
			t.Errorf("%s: encoding %s does not start with %s", m.MessageType(), b, prefix)
		}
		if !json.Valid(b) {
			t.Fatalf("%s: encoding %s is not valid JSON", m.MessageType(), b)
		}
		got, err := ParseMessage(b)
		if err != nil {
			t.Fatalf("%s: parse %s: %v", m.MessageType(), b, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s: round trip of %s\n got  %#v\n want %#v", m.MessageType(), b, got, m)
		}
	}
}

func TestMessageFrameRoundTrip(t *testing.T) {
	msgs := sampleMessages()
	var buf []byte
	for _, m := range msgs {
		var err error
		if buf, err = AppendMessageFrame(buf, m); err != nil {
			t.Fatalf("%s: %v", m.MessageType(), err)
		}
	}
	fr := NewFrameReader(bytes.NewReader(buf), 0)
	for _, want := range msgs {
		f, err := fr.Next()
		if err != nil {
			t.Fatalf("%s: next: %v", want.MessageType(), err)
		}
		if f.Flags != 0 {
			t.Fatalf("%s: JSON frame has flags %#x", want.MessageType(), f.Flags)
		}
		got, err := ParseMessage(f.Payload)
		if err != nil {
			t.Fatalf("%s: parse: %v", want.MessageType(), err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %#v want %#v", want.MessageType(), got, want)
		}
	}
	if _, err := fr.Next(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestEveryMessageTypeIsSampled(t *testing.T) {
	types := []string{"auth", "auth_ok", "publish", "publish_batch", "publish_ok", "publish_error",
		"subscribe", "subscribed", "event_stream_hello", "event", "event_batch", "cache_put",
		"cache_get", "cache_delete", "cache_ok", "cache_value", "error", "unsupported",
		"subscribe_cursor_error", "subscription_lagged", "stream_read", "stream_records",
		"offset_for_time", "offset_value", "cache_put_if", "cache_delete_if",
		"cache_condition_result", "cache_get_versioned", "publish_if", "publish_refused",
		"commit", "state_get", "state_value",
		"producer_init", "producer_init_ok", "publish_idempotent",
		"group_poll", "group_records", "group_ack", "group_nack", "group_extend", "group_extended",
		"group_dead_letter", "group_dead_letters", "group_dead_letter_list", "group_discard", "group_redrive",
		"group_seek", "group_position", "group_describe", "group_info", "group_delete", "group_deleted"}
	seen := map[string]bool{}
	for _, m := range sampleMessages() {
		seen[m.MessageType()] = true
	}
	for _, typ := range types {
		if !seen[typ] {
			t.Errorf("no sample of %q", typ)
		}
		if m := newMessage(typ); m == nil || m.MessageType() != typ {
			t.Errorf("newMessage(%q) = %v", typ, m)
		}
	}
	if len(seen) != len(types) {
		t.Errorf("sampled %d types, the list has %d", len(seen), len(types))
	}
}

func TestStartPositionForms(t *testing.T) {
	cases := []struct {
		pos  StartPosition
		json string
	}{
		{StartPosition{Kind: StartLatest}, `"latest"`},
		{StartPosition{Kind: StartEarliest}, `"earliest"`},
		{StartPosition{Kind: StartOffset, Offset: 0}, `{"offset":0}`},
		{StartPosition{Kind: StartOffset, Offset: 1200}, `{"offset":1200}`},
		{StartPosition{Kind: StartOffset, Offset: 1<<64 - 1}, `{"offset":18446744073709551615}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.pos)
		if err != nil || string(b) != c.json {
			t.Errorf("marshal %+v = %s, %v; want %s", c.pos, b, err, c.json)
		}
		var got StartPosition
		if err := json.Unmarshal([]byte(c.json), &got); err != nil || got != c.pos {
			t.Errorf("unmarshal %s = %+v, %v; want %+v", c.json, got, err, c.pos)
		}
	}
	// Spacing and unknown members in the offset form are accepted.
	var got StartPosition
	if err := json.Unmarshal([]byte(`{ "offset" : 5, "note": "x" }`), &got); err != nil || got != (StartPosition{Kind: StartOffset, Offset: 5}) {
		t.Errorf("offset with spacing: %+v, %v", got, err)
	}
	for _, bad := range []string{`"middle"`, `""`, `{}`, `{"offset":null}`, `{"offset":-1}`, `{"offset":"5"}`, `{"offset":1.5}`, `5`, `true`, `[]`} {
		msg := `{"type":"subscribe","tenant_id":"a","namespace":"b","stream":"c","start":` + bad + `}`
		if _, err := ParseMessage([]byte(msg)); err == nil {
			t.Errorf("start %s accepted", bad)
		} else {
			wantInvalid(t, err)
		}
	}
	// No start at all means the default (latest), left as nil.
	m, err := ParseMessage([]byte(`{"type":"subscribe","tenant_id":"a","namespace":"b","stream":"c"}`))
	if err != nil || m.(*Subscribe).Start != nil {
		t.Errorf("subscribe without start: %+v, %v", m, err)
	}
	// An unknown kind encodes as the default.
	if b, _ := json.Marshal(StartPosition{Kind: 9}); string(b) != `"latest"` {
		t.Errorf("unknown kind encodes as %s", b)
	}
}

func TestCacheValueNullSemantics(t *testing.T) {
	absent, err := MarshalMessage(&CacheValue{RequestID: 1, Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"cache_value","request_id":1,"key":"k","value":null}`; string(absent) != want {
		t.Errorf("absent value encodes as %s, want %s", absent, want)
	}
	m, err := ParseMessage(absent)
	if err != nil {
		t.Fatal(err)
	}
	if v := m.(*CacheValue).Value; v != nil {
		t.Errorf("null value decodes as %#v, want nil", v)
	}

	empty, err := MarshalMessage(&CacheValue{RequestID: 1, Key: "k", Value: []byte{}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"cache_value","request_id":1,"key":"k","value":""}`; string(empty) != want {
		t.Errorf("empty value encodes as %s, want %s", empty, want)
	}
	m, err = ParseMessage(empty)
	if err != nil {
		t.Fatal(err)
	}
	if v := m.(*CacheValue).Value; v == nil || len(v) != 0 {
		t.Errorf("empty value decodes as %#v, want empty and not nil", v)
	}

	// A missing value field is the same as null.
	m, err = ParseMessage([]byte(`{"type":"cache_value","request_id":1,"key":"k"}`))
	if err != nil || m.(*CacheValue).Value != nil {
		t.Errorf("missing value: %#v, %v", m, err)
	}
}

func TestEmptyKeyIsNoKey(t *testing.T) {
	for _, msg := range []string{
		`{"type":"publish","tenant_id":"a","namespace":"b","stream":"c","payload":"","key":""}`,
		`{"type":"publish_batch","tenant_id":"a","namespace":"b","stream":"c","payloads":[],"key":""}`,
	} {
		m, err := ParseMessage([]byte(msg))
		if err != nil {
			t.Fatal(err)
		}
		var key []byte
		switch v := m.(type) {
		case *Publish:
			key = v.Key
		case *PublishBatch:
			key = v.Key
		}
		if key != nil {
			t.Errorf("%s: key %#v, want nil", msg, key)
		}
	}
	b, _ := MarshalMessage(&Publish{TenantID: "a", Namespace: "b", Stream: "c", Payload: []byte{}, Key: []byte{}})
	if strings.Contains(string(b), `"key"`) {
		t.Errorf("empty key is sent: %s", b)
	}
}

func TestUnknownMessage(t *testing.T) {
	raw := []byte(`{"type":"frobnicate","extra":[1,2,{"x":null}]}`)
	m, err := ParseMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	u, ok := m.(*Unknown)
	if !ok {
		t.Fatalf("got %T, want *Unknown", m)
	}
	if u.Type != "frobnicate" || u.MessageType() != "frobnicate" || !bytes.Equal(u.Raw, raw) {
		t.Errorf("unknown = %+v", u)
	}
	raw[2] = 'X' // Raw is a copy, not an alias of the input.
	if u.Raw[2] != 't' {
		t.Error("Unknown.Raw aliases the input buffer")
	}
	raw[2] = 't'
	b, err := MarshalMessage(u)
	if err != nil || !bytes.Equal(b, raw) {
		t.Errorf("marshal unknown = %s, %v; want the original object", b, err)
	}
	frame, err := AppendMessageFrame(nil, u)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFrameReader(bytes.NewReader(frame), 0).Next()
	if err != nil || f.Flags != 0 || !bytes.Equal(f.Payload, raw) {
		t.Errorf("unknown frame = %+v, %v", f, err)
	}
}

func TestParseMessageInvalid(t *testing.T) {
	cases := map[string]string{
		"not JSON":             `not json`,
		"empty input":          ``,
		"truncated":            `{"type":"auth","tenant_id":"a"`,
		"trailing garbage":     `{"type":"auth"} x`,
		"null":                 `null`,
		"array":                `[{"type":"auth"}]`,
		"string":               `"auth"`,
		"missing type":         `{"tenant_id":"a"}`,
		"empty type":           `{"type":""}`,
		"null type":            `{"type":null}`,
		"numeric type":         `{"type":5}`,
		"bad base64 payload":   `{"type":"publish","tenant_id":"a","namespace":"b","stream":"c","payload":"!!!"}`,
		"unpadded base64":      `{"type":"publish","tenant_id":"a","namespace":"b","stream":"c","payload":"aGk"}`,
		"bad base64 in batch":  `{"type":"publish_batch","tenant_id":"a","namespace":"b","stream":"c","payloads":["aGk=","%%"]}`,
		"bad base64 value":     `{"type":"cache_put","tenant_id":"a","namespace":"b","cache":"c","key":"k","value":"-_-_","request_id":1}`,
		"negative request id":  `{"type":"cache_get","request_id":-1}`,
		"string request id":    `{"type":"cache_get","request_id":"unique-id"}`,
		"fractional id":        `{"type":"publish_ok","request_id":1.5}`,
		"request id overflow":  `{"type":"publish_ok","request_id":18446744073709551616}`,
		"flags overflow":       `{"type":"auth","client_flags":65536}`,
		"wrong field type":     `{"type":"auth","tenant_id":7}`,
		"payloads not array":   `{"type":"publish_batch","payloads":"aGk="}`,
		"subscription id text": `{"type":"event_stream_hello","subscription_id":"7"}`,
	}
	for name, in := range cases {
		m, err := ParseMessage([]byte(in))
		if err == nil {
			t.Errorf("%s: accepted as %#v", name, m)
			continue
		}
		wantInvalid(t, err)
	}
}

func TestMarshalMessageNilPointer(t *testing.T) {
	if b, err := MarshalMessage((*Auth)(nil)); err == nil {
		t.Fatalf("nil *Auth marshalled as %s", b)
	}
	if b, err := AppendMessageFrame([]byte("x"), (*CacheOK)(nil)); err == nil || string(b) != "x" {
		t.Fatalf("nil *CacheOK framed as %q, %v", b, err)
	}
}

func TestValidate(t *testing.T) {
	type fieldCase struct {
		field string
		clear func()
	}
	check := func(t *testing.T, name string, v Validator, reset func(), cases []fieldCase) {
		t.Helper()
		reset()
		if err := v.Validate(); err != nil {
			t.Fatalf("%s: valid message refused: %v", name, err)
		}
		for _, c := range cases {
			reset()
			c.clear()
			err := v.Validate()
			if err == nil {
				t.Errorf("%s without %s accepted", name, c.field)
				continue
			}
			wantInvalid(t, err)
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("%s without %s: error %q does not name the field", name, c.field, err)
			}
		}
	}

	var auth Auth
	check(t, "auth", &auth, func() { auth = Auth{TenantID: "a", Token: "t"} }, []fieldCase{
		{"tenant_id", func() { auth.TenantID = "" }},
		{"token", func() { auth.Token = "" }},
	})

	var pub Publish
	check(t, "publish", &pub, func() { pub = Publish{TenantID: "a", Namespace: "n", Stream: "s", Payload: []byte{}} }, []fieldCase{
		{"tenant_id", func() { pub.TenantID = "" }},
		{"namespace", func() { pub.Namespace = "" }},
		{"stream", func() { pub.Stream = "" }},
		{"payload", func() { pub.Payload = nil }},
		{"ack", func() { pub.Ack = "always" }},
	})

	var batch PublishBatch
	check(t, "publish_batch", &batch, func() {
		batch = PublishBatch{TenantID: "a", Namespace: "n", Stream: "s", Payloads: [][]byte{}, Ack: AckPerBatch}
	}, []fieldCase{
		{"tenant_id", func() { batch.TenantID = "" }},
		{"namespace", func() { batch.Namespace = "" }},
		{"stream", func() { batch.Stream = "" }},
		{"payloads", func() { batch.Payloads = nil }},
		{"ack", func() { batch.Ack = "PER_BATCH" }},
	})

	var sub Subscribe
	check(t, "subscribe", &sub, func() { sub = Subscribe{TenantID: "a", Namespace: "n", Stream: "s"} }, []fieldCase{
		{"tenant_id", func() { sub.TenantID = "" }},
		{"namespace", func() { sub.Namespace = "" }},
		{"stream", func() { sub.Stream = "" }},
	})

	var put CachePut
	check(t, "cache_put", &put, func() {
		put = CachePut{TenantID: "a", Namespace: "n", Cache: "c", Key: "k", Value: []byte{}}
	}, []fieldCase{
		{"tenant_id", func() { put.TenantID = "" }},
		{"namespace", func() { put.Namespace = "" }},
		{"cache", func() { put.Cache = "" }},
		{"key", func() { put.Key = "" }},
		{"value", func() { put.Value = nil }},
	})

	var get CacheGet
	check(t, "cache_get", &get, func() { get = CacheGet{TenantID: "a", Namespace: "n", Cache: "c", Key: "k"} }, []fieldCase{
		{"tenant_id", func() { get.TenantID = "" }},
		{"namespace", func() { get.Namespace = "" }},
		{"cache", func() { get.Cache = "" }},
		{"key", func() { get.Key = "" }},
	})

	var del CacheDelete
	check(t, "cache_delete", &del, func() { del = CacheDelete{TenantID: "a", Namespace: "n", Cache: "c", Key: "k"} }, []fieldCase{
		{"tenant_id", func() { del.TenantID = "" }},
		{"namespace", func() { del.Namespace = "" }},
		{"cache", func() { del.Cache = "" }},
		{"key", func() { del.Key = "" }},
	})
}

func TestValidateAfterParse(t *testing.T) {
	// A publish without its payload field parses (decoding checks shapes)
	// and is then refused by Validate (which checks presence).
	m, err := ParseMessage([]byte(`{"type":"publish","tenant_id":"a","namespace":"b","stream":"c"}`))
	if err != nil {
		t.Fatal(err)
	}
	v, ok := m.(Validator)
	if !ok {
		t.Fatalf("%T is not a Validator", m)
	}
	wantInvalid(t, v.Validate())
	// Every sampled request validates.
	for _, m := range sampleMessages() {
		if v, ok := m.(Validator); ok {
			if err := v.Validate(); err != nil {
				t.Errorf("%s sample refused: %v", m.MessageType(), err)
			}
		}
	}
}

func TestValidateDurableRequests(t *testing.T) {
	ok := &StreamRead{TenantID: "acme", Namespace: "prod", Stream: "events", From: 5, End: u64p(5)}
	if err := ok.Validate(); err != nil {
		t.Fatalf("empty range: %v", err)
	}
	wantInvalid(t, (&StreamRead{TenantID: "acme", Namespace: "prod", Stream: "events", From: 6, End: u64p(5)}).Validate())
	wantInvalid(t, (&StreamRead{TenantID: "acme", Namespace: "prod"}).Validate())
	wantInvalid(t, (&OffsetForTime{TenantID: "acme", Stream: "events"}).Validate())
	if err := (&OffsetForTime{TenantID: "acme", Namespace: "prod", Stream: "events"}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestAppendPublishOKFrameMatchesEncoder(t *testing.T) {
	for _, tc := range []struct {
		id  uint64
		off *uint64
	}{{0, nil}, {7, nil}, {1<<64 - 1, u64p(0)}, {42, u64p(1<<64 - 1)}, {3, u64p(12345)}} {
		want, err := AppendMessageFrame(nil, &PublishOK{RequestID: tc.id, Offset: tc.off})
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendPublishOKFrame([]byte("x"), tc.id, tc.off); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("id %d off %v: got %q want %q", tc.id, tc.off, got, want)
		}
	}
}

// The publish_ok fast path decodes exactly what the general path does, and
// leaves every other spelling to it.
func TestParsePublishOKFastPath(t *testing.T) {
	for _, tc := range []string{
		`{"type":"publish_ok","request_id":7}`,
		`{"type":"publish_ok","request_id":0,"offset":0}`,
		`{"type":"publish_ok","request_id":18446744073709551615,"offset":18446744073709551615}`,
		`{"type":"publish_ok","request_id":18446744073709551616}`,
		`{"type":"publish_ok","request_id":07}`,
		`{"type":"publish_ok","request_id":7,"offset":-1}`,
		`{"type":"publish_ok","request_id":7,"offset":1,"x":2}`,
		`{"type":"publish_ok","request_id":7} `,
		`{"type":"publish_ok", "request_id":7}`,
		`{"type":"publish_ok","request_id":7,"offset":3}x`,
	} {
		fast, ok := parsePublishOK([]byte(tc))
		slow, serr := ParseMessage([]byte(tc))
		if !ok {
			continue
		}
		if serr != nil || !reflect.DeepEqual(Message(fast), slow) {
			t.Errorf("%s: fast %#v, general %#v (%v)", tc, fast, slow, serr)
		}
	}
	if _, ok := parsePublishOK([]byte(`{"type":"publish_ok","request_id":7,"offset":3}`)); !ok {
		t.Fatal("the broker's own form did not take the fast path")
	}
}
