package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func cachePutSamples() (plain, escaped []*CachePut) {
	ttl0, ttl, ttlMax := uint64(0), uint64(60000), uint64(1<<64-1)
	plain = []*CachePut{
		{TenantID: "acme", Namespace: "prod", Cache: "kv", Key: "k", Value: []byte("v"), RequestID: 1},
		{TenantID: "acme", Namespace: "prod", Cache: "kv", Key: "user:42", Value: []byte{}, RequestID: 0},
		{TenantID: "acme", Namespace: "prod", Cache: "kv", Key: "k", Value: nil, TTLMs: &ttl0, RequestID: 2},
		{TenantID: "acme", Namespace: "prod", Cache: "kv", Key: "k", Value: []byte{0, 0xff, 0x10}, TTLMs: &ttl, RequestID: 3},
		{TenantID: "t", Namespace: "n", Cache: "c", Key: "", Value: []byte(strings.Repeat("x", 5000)), TTLMs: &ttlMax, RequestID: 1<<64 - 1},
		{TenantID: "acme", Namespace: "prod", Cache: "kv", Key: "ключ/日本語/😀", Value: []byte("é"), RequestID: 4},
		{TenantID: "acme", Namespace: "prod", Cache: "kv", Key: "a b'c/d=e+f?g#h%i\x7f", Value: []byte("v"), RequestID: 5},
	}
	escaped = []*CachePut{
		{TenantID: "acme", Namespace: "prod", Cache: "kv", Key: `say "hi"`, Value: []byte("v"), RequestID: 6},
		{TenantID: "acme", Namespace: "prod", Cache: "kv", Key: `back\slash`, Value: []byte("v"), RequestID: 7},
		{TenantID: "a<b>", Namespace: "prod", Cache: "kv", Key: "k", Value: []byte("v"), RequestID: 8},
		{TenantID: "acme", Namespace: "p&d", Cache: "kv", Key: "k", Value: []byte("v"), RequestID: 9},
		{TenantID: "acme", Namespace: "prod", Cache: "k\tv", Key: "k", Value: []byte("v"), RequestID: 10},
		{TenantID: "acme", Namespace: "prod", Cache: "kv", Key: "line\u2028sep", Value: []byte("v"), RequestID: 11},
		{TenantID: "acme", Namespace: "prod", Cache: "kv", Key: "bad\xffutf8", Value: []byte("v"), RequestID: 12},
	}
	return plain, escaped
}

// checkSameAsGeneral fails t unless MarshalMessage writes m as
// encoding/json does and ParseMessage reads it back as encoding/json does.
// It reports whether the fast decoder took the bytes.
func checkSameAsGeneral(t *testing.T, m Message) bool {
	t.Helper()
	b, err := MarshalMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	want, err := marshalMessageGeneral(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("fast encoding %s, encoding/json %s", b, want)
	}
	got, err := ParseMessage(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	general := reflect.New(reflect.TypeOf(m).Elem()).Interface()
	if err := json.Unmarshal(b, general); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if !reflect.DeepEqual(got, general) {
		t.Fatalf("%s: ParseMessage %#v, encoding/json %#v", b, got, general)
	}
	_, put := parseCachePut(b)
	_, ok := parseCacheOK(b)
	_, recs := parseGroupRecords(b)
	return put || ok || recs
}

func TestCachePutAndOKFastPaths(t *testing.T) {
	plain, escaped := cachePutSamples()
	for _, m := range plain {
		if !checkSameAsGeneral(t, m) {
			t.Errorf("%#v did not take the fast path", m)
		}
	}
	for _, m := range escaped {
		if checkSameAsGeneral(t, m) {
			t.Errorf("%#v, which encoding/json escapes, took the fast path", m)
		}
	}
	for _, id := range []uint64{0, 1, 1<<64 - 1} {
		if !checkSameAsGeneral(t, &CacheOK{RequestID: id}) {
			t.Errorf("cache_ok %d did not take the fast path", id)
		}
	}
}

// Spellings that are not MarshalMessage's are left to the general path.
func TestCachePutFastPathLeavesOtherForms(t *testing.T) {
	for _, s := range []string{
		`{"type":"cache_put","tenant_id":"a","namespace":"p","cache":"c","key":"k","value":"dg==","request_id":1} `,
		`{"type":"cache_put", "tenant_id":"a","namespace":"p","cache":"c","key":"k","value":"dg==","request_id":1}`,
		`{"type":"cache_put","tenant_id":"a","cache":"c","namespace":"p","key":"k","value":"dg==","request_id":1}`,
		`{"type":"cache_put","tenant_id":"a","namespace":"p","cache":"c","key":"k","value":"dg==","request_id":1,"x":2}`,
		`{"type":"cache_put","tenant_id":"a","namespace":"p","cache":"c","key":"k\u0041","value":"dg==","request_id":1}`,
		`{"type":"cache_put","tenant_id":"a","namespace":"p","cache":"c","key":"k","value":"dg","request_id":1}`,
		`{"type":"cache_put","tenant_id":"a","namespace":"p","cache":"c","key":"k","value":"dg==\n","request_id":1}`,
		`{"type":"cache_put","tenant_id":"a","namespace":"p","cache":"c","key":"k","value":"dg==","request_id":01}`,
		`{"type":"cache_put","tenant_id":"a","namespace":"p","cache":"c","key":"k","value":"dg==","ttl_ms":-1,"request_id":1}`,
		`{"type":"cache_put","tenant_id":"a","namespace":"p","cache":"c","key":"k","value":"dg==","ttl_ms":null,"request_id":1}`,
		`{"type":"cache_put","tenant_id":"a","namespace":"p","cache":"c","key":"k","value":"dg==","request_id":18446744073709551616}`,
		`{"type":"cache_ok","request_id":1,"x":1}`,
		`{"type":"cache_ok","request_id":1.0}`,
	} {
		b := []byte(s)
		if _, ok := parseCachePut(b); ok {
			t.Errorf("%s took the cache_put fast path", s)
		}
		if _, ok := parseCacheOK(b); ok {
			t.Errorf("%s took the cache_ok fast path", s)
		}
	}
}

// FuzzCachePutFastEncode: whatever the fields, MarshalMessage writes what
// encoding/json writes, and ParseMessage reads it back as encoding/json
// does.
func FuzzCachePutFastEncode(f *testing.F) {
	plain, escaped := cachePutSamples()
	for _, m := range append(plain, escaped...) {
		ttl, has := uint64(0), m.TTLMs != nil
		if has {
			ttl = *m.TTLMs
		}
		f.Add(m.TenantID, m.Namespace, m.Cache, m.Key, m.Value, m.Value == nil, ttl, has, m.RequestID)
	}
	f.Fuzz(func(t *testing.T, tenant, ns, cache, key string, value []byte, nilValue bool, ttl uint64, hasTTL bool, reqID uint64) {
		m := &CachePut{TenantID: tenant, Namespace: ns, Cache: cache, Key: key, Value: value, RequestID: reqID}
		if nilValue {
			m.Value = nil
		} else if m.Value == nil {
			m.Value = []byte{}
		}
		if hasTTL {
			m.TTLMs = &ttl
		}
		checkSameAsGeneral(t, m)
		checkSameAsGeneral(t, &CacheOK{RequestID: reqID})
	})
}

// FuzzCachePutFastParse: any bytes the fast decoders take, encoding/json
// decodes to the same message.
func FuzzCachePutFastParse(f *testing.F) {
	plain, _ := cachePutSamples()
	for _, m := range plain {
		b, _ := MarshalMessage(m)
		f.Add(b)
	}
	f.Add([]byte(`{"type":"cache_ok","request_id":7}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var head struct {
			Type *string `json:"type"`
		}
		if m, ok := parseCachePut(b); ok {
			var general CachePut
			if err := json.Unmarshal(b, &head); err != nil || head.Type == nil || *head.Type != "cache_put" {
				t.Fatalf("%q: fast cache_put, general type %v (%v)", b, head.Type, err)
			}
			if err := json.Unmarshal(b, &general); err != nil || !reflect.DeepEqual(*m, general) {
				t.Fatalf("%q: fast %#v, encoding/json %#v (%v)", b, *m, general, err)
			}
		}
		if m, ok := parseCacheOK(b); ok {
			var general CacheOK
			if err := json.Unmarshal(b, &head); err != nil || head.Type == nil || *head.Type != "cache_ok" {
				t.Fatalf("%q: fast cache_ok, general type %v (%v)", b, head.Type, err)
			}
			if err := json.Unmarshal(b, &general); err != nil || *m != general {
				t.Fatalf("%q: fast %#v, encoding/json %#v (%v)", b, *m, general, err)
			}
		}
	})
}
