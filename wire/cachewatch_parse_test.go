package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// cacheChangeSamples returns cache_change values covering every op, with
// and without expiry and retained, and keys the fast path takes (plain)
// and leaves to the general path (escaped by encoding/json).
func cacheChangeSamples() (plain, escaped []*CacheChange) {
	plain = []*CacheChange{
		{Offset: 0, Op: CacheOpPut, Key: "k", Value: []byte("v")},
		{Offset: 7, Op: CacheOpPut, Key: "user:42:profile", Value: []byte{}},
		{Offset: 8, Op: CacheOpPut, Key: "k", Value: []byte{0, 0xff, 0x10, 'a', 'b'}, ExpiresAtMs: u64p(1700000000000)},
		{Offset: 9, Op: CacheOpPut, Key: "k", Value: []byte("ab"), ExpiresAtMs: u64p(0), Retained: true},
		{Offset: 10, Op: CacheOpPut, Key: "k", Value: []byte("abc"), Retained: true},
		{Offset: 1<<64 - 1, Op: CacheOpPut, Key: "k", Value: []byte(strings.Repeat("x", 1000)), ExpiresAtMs: u64p(1<<64 - 1)},
		{Offset: 11, Op: CacheOpDelete, Key: "k"},
		{Offset: 12, Op: CacheOpDelete, Key: "k", Retained: true},
		{Offset: 13, Op: CacheOpExpire, Key: "session/abc-123"},
		{Offset: 14, Op: CacheOpPut, Key: "", Value: []byte("v")},
		{Offset: 15, Op: CacheOpDelete, Key: ""},
		{Offset: 16, Op: CacheOpPut, Key: "ключ/日本語/😀", Value: []byte("é")},
		{Offset: 17, Op: CacheOpPut, Key: "a b'c/d=e+f?g#h%i", Value: []byte("v")},
	}
	escaped = []*CacheChange{
		{Offset: 20, Op: CacheOpPut, Key: `say "hi"`, Value: []byte("v")},
		{Offset: 21, Op: CacheOpPut, Key: `back\slash`, Value: []byte("v")},
		{Offset: 22, Op: CacheOpDelete, Key: "<a>&b"},
		{Offset: 23, Op: CacheOpPut, Key: "tab\there\nnl\x00", Value: []byte{}},
		{Offset: 24, Op: CacheOpPut, Key: "line\u2028sep\u2029", Value: []byte("v")},
		{Offset: 25, Op: CacheOpPut, Key: "bad\xffutf8", Value: []byte("v")},
	}
	return plain, escaped
}

// parseCacheChangeGeneral is ParseMessage's encoding/json path for a
// cache_change.
func parseCacheChangeGeneral(b []byte) (*CacheChange, error) {
	var head struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, err
	}
	m := &CacheChange{}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, err
	}
	return m, nil
}

// checkCacheChangeFast fails t if parseCacheChange accepts b but
// encoding/json decodes b to something else (or not at all). It reports
// whether the fast path was taken.
func checkCacheChangeFast(t *testing.T, b []byte) bool {
	t.Helper()
	fast, ok := parseCacheChange(b)
	if !ok {
		return false
	}
	var head struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil || head.Type == nil || *head.Type != "cache_change" {
		t.Fatalf("%q: fast path accepted, general head %v (%v)", b, head.Type, err)
	}
	var slow CacheChange
	if err := json.Unmarshal(b, &slow); err != nil {
		t.Fatalf("%q: fast path accepted %#v, encoding/json refused: %v", b, fast, err)
	}
	// DeepEqual tells a nil Value (null) from an empty one (""), as it must.
	if !reflect.DeepEqual(*fast, slow) {
		t.Fatalf("%q: fast %#v, encoding/json %#v", b, *fast, slow)
	}
	return true
}

func TestParseCacheChangeFastPath(t *testing.T) {
	plain, escaped := cacheChangeSamples()
	for _, m := range append(append([]*CacheChange{}, plain...), escaped...) {
		b, err := MarshalMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		checkCacheChangeFast(t, b)
		got, err := ParseMessage(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		want, err := parseCacheChangeGeneral(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(got, Message(want)) {
			t.Errorf("%s: ParseMessage %#v, encoding/json %#v", b, got, want)
		}
	}
	for _, m := range plain {
		b, _ := MarshalMessage(m)
		if _, ok := parseCacheChange(b); !ok {
			t.Errorf("the broker's own form %s did not take the fast path", b)
		}
		// A frame as core writes it: the body after the frame header.
		fr, err := AppendMessageFrame(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(fr), string(b)) {
			t.Fatalf("frame %q does not end with %q", fr, b)
		}
	}
	// Value presence survives the fast path: "" is empty, null is nil.
	if m, ok := parseCacheChange([]byte(`{"type":"cache_change","offset":1,"op":"put","key":"k","value":""}`)); !ok || m.Value == nil || len(m.Value) != 0 {
		t.Errorf(`"value":"" gave %#v, %v`, m, ok)
	}
	if m, ok := parseCacheChange([]byte(`{"type":"cache_change","offset":1,"op":"delete","key":"k","value":null}`)); !ok || m.Value != nil {
		t.Errorf(`"value":null gave %#v, %v`, m, ok)
	}
}

// Spellings that are not the broker's exact form are left to the general
// path (and any the fast path does take agree with it).
func TestParseCacheChangeOtherForms(t *testing.T) {
	for _, tc := range []string{
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"dg=="}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"dg=="} `,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"dg==","x":1}`,
		`{"type":"cache_change", "offset":1,"op":"put","key":"k","value":"dg=="}`,
		`{"type":"cache_change","op":"put","offset":1,"key":"k","value":"dg=="}`,
		`{"type":"cache_change","offset":01,"op":"put","key":"k","value":"dg=="}`,
		`{"type":"cache_change","offset":-1,"op":"put","key":"k","value":"dg=="}`,
		`{"type":"cache_change","offset":1.5,"op":"put","key":"k","value":"dg=="}`,
		`{"type":"cache_change","offset":18446744073709551616,"op":"put","key":"k","value":"dg=="}`,
		`{"type":"cache_change","offset":1,"op":"upsert","key":"k","value":"dg=="}`,
		`{"type":"cache_change","offset":1,"op":"Put","key":"k","value":"dg=="}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k\u0041","value":"dg=="}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"<","value":"dg=="}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"dg"}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"dh=="}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"d\ng=="}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"d\/g="}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"!!"}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"dg=="}x`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":nullx}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"dg==","retained":false}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"dg==","retained":true,"expires_at_ms":1}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"dg==","expires_at_ms":null}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"dg==","expires_at_ms":1,"expires_at_ms":2}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k"}`,
	} {
		checkCacheChangeFast(t, []byte(tc))
	}
	if !checkCacheChangeFast(t, []byte(`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"dg=="}`)) {
		t.Fatal("the broker's own form did not take the fast path")
	}
}

func FuzzParseCacheChange(f *testing.F) {
	plain, escaped := cacheChangeSamples()
	for _, m := range append(plain, escaped...) {
		b, err := MarshalMessage(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"dg==","retained":false}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"dh=="}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"k","value":"d\ng=="}`,
		`{"type":"cache_change","offset":1,"op":"expire","key":"k","value":""}`,
		`{"type":"cache_change","offset":1,"op":"put","key":"\u00e9","value":"dg=="}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !checkCacheChangeFast(t, b) {
			return
		}
		m, err := ParseMessage(b)
		if err != nil {
			t.Fatalf("%q: fast path accepted, ParseMessage refused: %v", b, err)
		}
		if _, ok := m.(*CacheChange); !ok {
			t.Fatalf("%q: ParseMessage returned %T", b, m)
		}
	})
}

// BenchmarkParseCacheChange compares the fast path (ParseMessage) with the
// encoding/json path it replaces for the broker's form of a typical put.
func BenchmarkParseCacheChange(b *testing.B) {
	body, err := MarshalMessage(&CacheChange{
		Offset: 123456789, Op: CacheOpPut, Key: "user:42:profile",
		Value:       []byte(`{"name":"Ada","plan":"pro","seats":12,"active":true}`),
		ExpiresAtMs: u64p(1700000000000),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseMessage(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("general", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseCacheChangeGeneral(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
