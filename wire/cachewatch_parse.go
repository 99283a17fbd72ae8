package wire

import (
	"bytes"
	"strings"
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
	if m.Value, rest, ok = cutBase64Value(rest); !ok {
		return nil, false
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
// decodes to itself (plainText).
func cutPlainString(b []byte) ([]byte, []byte, bool) {
	i := bytes.IndexByte(b, '"')
	if i < 0 || !plainText(b[:i]) {
		return nil, nil, false
	}
	return b[:i], b[i+1:], true
}

// plainText reports whether encoding/json writes s between quotes as it
// is: no quote, backslash or control character, none of < > &, valid
// UTF-8 without U+2028 or U+2029.
func plainText[T string | []byte](s T) bool {
	ascii := true
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&':
			return false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if ascii {
		return true
	}
	str := string(s)
	return utf8.ValidString(str) && !strings.Contains(str, "\u2028") && !strings.Contains(str, "\u2029")
}

// isBase64Std reports whether c is in the standard base64 alphabet or is
// its padding character.
func isBase64Std(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='
}
