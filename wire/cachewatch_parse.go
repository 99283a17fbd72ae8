package wire

import (
	"bytes"
	"encoding/base64"
	"unicode/utf8"
)

// cacheChangePrefix starts the exact form the broker writes for a
// cache_change (MarshalMessage of a CacheChange).
const cacheChangePrefix = `{"type":"cache_change","offset":`

// parseCacheChange decodes the exact cache_change form the broker writes,
//
//	{"type":"cache_change","offset":N,"op":"put","key":"K","value":"B64"}
//
// with value null instead of a string, and optional ,"expires_at_ms":N and
// ,"retained":true in that order, without encoding/json: a client reads one
// per watched change. Only spellings encoding/json decodes to the same
// value are accepted: the key must be plain (no escapes, no control
// characters, no bytes encoding/json would have escaped, valid UTF-8) and
// the value only base64 alphabet bytes, decoded with the same
// base64.StdEncoding encoding/json uses for []byte. Anything else (other
// spacing, field order, extra fields, "retained":false, escapes) reports
// false and takes the general path, which accepts every valid form.
func parseCacheChange(b []byte) (*CacheChange, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(cacheChangePrefix))
	if !ok {
		return nil, false
	}
	off, rest, ok := cutUint(rest)
	if !ok {
		return nil, false
	}
	m := &CacheChange{Offset: off}

	rest, ok = bytes.CutPrefix(rest, []byte(`,"op":"`))
	if !ok {
		return nil, false
	}
	switch {
	case bytes.HasPrefix(rest, []byte(`put"`)):
		m.Op, rest = CacheOpPut, rest[len(`put"`):]
	case bytes.HasPrefix(rest, []byte(`delete"`)):
		m.Op, rest = CacheOpDelete, rest[len(`delete"`):]
	case bytes.HasPrefix(rest, []byte(`expire"`)):
		m.Op, rest = CacheOpExpire, rest[len(`expire"`):]
	default:
		return nil, false
	}

	rest, ok = bytes.CutPrefix(rest, []byte(`,"key":"`))
	if !ok {
		return nil, false
	}
	key, rest, ok := cutPlainString(rest)
	if !ok {
		return nil, false
	}
	m.Key = string(key)

	rest, ok = bytes.CutPrefix(rest, []byte(`,"value":`))
	if !ok {
		return nil, false
	}
	if after, found := bytes.CutPrefix(rest, []byte("null")); found {
		rest = after
	} else {
		if len(rest) == 0 || rest[0] != '"' {
			return nil, false
		}
		rest = rest[1:]
		n := 0
		for n < len(rest) && isBase64Std(rest[n]) {
			n++
		}
		if n == len(rest) || rest[n] != '"' {
			return nil, false
		}
		v := make([]byte, base64.StdEncoding.DecodedLen(n))
		dn, err := base64.StdEncoding.Decode(v, rest[:n])
		if err != nil {
			return nil, false
		}
		m.Value, rest = v[:dn], rest[n+1:]
	}

	if after, found := bytes.CutPrefix(rest, []byte(`,"expires_at_ms":`)); found {
		ms, tail, ok := cutUint(after)
		if !ok {
			return nil, false
		}
		m.ExpiresAtMs, rest = &ms, tail
	}
	if after, found := bytes.CutPrefix(rest, []byte(`,"retained":true`)); found {
		m.Retained, rest = true, after
	}
	if len(rest) != 1 || rest[0] != '}' {
		return nil, false
	}
	return m, true
}

// cutPlainString returns the bytes of b up to its first '"' and the rest
// after it, when they are a string body encoding/json writes unescaped and
// decodes to itself: no backslash, no control character, none of < > &,
// no U+2028 or U+2029, and valid UTF-8.
func cutPlainString(b []byte) ([]byte, []byte, bool) {
	ascii := true
	for i, c := range b {
		switch {
		case c == '"':
			s := b[:i]
			if !ascii && (!utf8.Valid(s) || bytes.Contains(s, []byte("\u2028")) || bytes.Contains(s, []byte("\u2029"))) {
				return nil, nil, false
			}
			return s, b[i+1:], true
		case c < 0x20 || c == '\\' || c == '<' || c == '>' || c == '&':
			return nil, nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, nil, false
}

// isBase64Std reports whether c is in the standard base64 alphabet or is
// its padding character.
func isBase64Std(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='
}
