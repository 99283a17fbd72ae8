package wire

import (
	"bytes"
	"encoding/base64"
	"strconv"
)

// Fast paths for the cache's hot messages. An acked cache put is one
// cache_put and one cache_ok per request, each encoded on one side and
// decoded on the other; through encoding/json's reflection those four steps
// were about a third of the broker's CPU time under acked puts. The exact
// forms MarshalMessage writes are encoded and decoded here by hand; any
// other spelling, and any string encoding/json would escape, takes the
// general path, so both paths give the same bytes and the same values
// (checked by tests and fuzz targets over both).

const (
	cachePutPrefix = `{"type":"cache_put","tenant_id":"`
	cacheOKPrefix  = `{"type":"cache_ok","request_id":`
)

// appendFastMessage appends MarshalMessage's encoding of m when m is one
// of the messages with a fast path and every string in it is plain
// (plainText); ok is false otherwise, and nothing was appended.
func appendFastMessage(dst []byte, m Message) (out []byte, ok bool) {
	switch v := m.(type) {
	case *CacheOK:
		if v == nil {
			return dst, false // the general path refuses it
		}
		dst = append(dst, cacheOKPrefix...)
		dst = strconv.AppendUint(dst, v.RequestID, 10)
		return append(dst, '}'), true
	case *CachePut:
		if v == nil || !plainText(v.TenantID) || !plainText(v.Namespace) || !plainText(v.Cache) || !plainText(v.Key) {
			return dst, false
		}
		dst = append(dst, cachePutPrefix...)
		dst = append(dst, v.TenantID...)
		dst = append(dst, `","namespace":"`...)
		dst = append(dst, v.Namespace...)
		dst = append(dst, `","cache":"`...)
		dst = append(dst, v.Cache...)
		dst = append(dst, `","key":"`...)
		dst = append(dst, v.Key...)
		dst = append(dst, `","value":`...)
		dst = appendBase64Value(dst, v.Value)
		if v.TTLMs != nil {
			dst = append(dst, `,"ttl_ms":`...)
			dst = strconv.AppendUint(dst, *v.TTLMs, 10)
		}
		dst = append(dst, `,"request_id":`...)
		dst = strconv.AppendUint(dst, v.RequestID, 10)
		return append(dst, '}'), true
	case *GroupRecords:
		return appendGroupRecords(dst, v) // grouprecords_fast.go
	}
	return dst, false
}

// appendBase64Value appends v as encoding/json writes a []byte: null for
// nil, else standard base64 in quotes.
func appendBase64Value(dst, v []byte) []byte {
	if v == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, v)
	return append(dst, '"')
}

// cutBase64Value decodes the []byte value at the start of b as
// encoding/json would (null is nil, "" is empty), accepting only the
// standard base64 alphabet and padding, and returns the rest.
func cutBase64Value(b []byte) (v, rest []byte, ok bool) {
	if after, found := bytes.CutPrefix(b, []byte("null")); found {
		return nil, after, true
	}
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	b = b[1:]
	n := 0
	for n < len(b) && isBase64Std(b[n]) {
		n++
	}
	if n == len(b) || b[n] != '"' {
		return nil, nil, false
	}
	v = make([]byte, base64.StdEncoding.DecodedLen(n))
	dn, err := base64.StdEncoding.Decode(v, b[:n])
	if err != nil {
		return nil, nil, false
	}
	return v[:dn], b[n+1:], true
}

// parseCacheOK decodes {"type":"cache_ok","request_id":N} exactly.
func parseCacheOK(b []byte) (*CacheOK, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(cacheOKPrefix))
	if !ok {
		return nil, false
	}
	id, rest, ok := cutUint(rest)
	if !ok || len(rest) != 1 || rest[0] != '}' {
		return nil, false
	}
	return &CacheOK{RequestID: id}, true
}

// parseCachePut decodes the exact cache_put form MarshalMessage writes,
//
//	{"type":"cache_put","tenant_id":"T","namespace":"N","cache":"C","key":"K","value":"B64","ttl_ms":N,"request_id":N}
//
// with value null instead of a string and ttl_ms optional, every string
// plain (cutPlainString). Anything else reports false.
func parseCachePut(b []byte) (*CachePut, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(cachePutPrefix))
	if !ok {
		return nil, false
	}
	m := &CachePut{}
	for _, f := range []struct {
		dst  *string
		next string
	}{
		{&m.TenantID, `,"namespace":"`},
		{&m.Namespace, `,"cache":"`},
		{&m.Cache, `,"key":"`},
		{&m.Key, `,"value":`},
	} {
		s, tail, ok := cutPlainString(rest)
		if !ok {
			return nil, false
		}
		if rest, ok = bytes.CutPrefix(tail, []byte(f.next)); !ok {
			return nil, false
		}
		*f.dst = string(s)
	}
	if m.Value, rest, ok = cutBase64Value(rest); !ok {
		return nil, false
	}
	if after, found := bytes.CutPrefix(rest, []byte(`,"ttl_ms":`)); found {
		ttl, tail, ok := cutUint(after)
		if !ok {
			return nil, false
		}
		m.TTLMs, rest = &ttl, tail
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"request_id":`)); !ok {
		return nil, false
	}
	id, rest, ok := cutUint(rest)
	if !ok || len(rest) != 1 || rest[0] != '}' {
		return nil, false
	}
	m.RequestID = id
	return m, true
}
