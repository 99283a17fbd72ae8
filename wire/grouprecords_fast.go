package wire

import (
	"bytes"
	"encoding/base64"
	"math"
	"slices"
	"strconv"
)

// The fast path for group_records, the answer to every group_poll. A poll
// of a hundred 4 KiB records is about 550 KB of base64 in JSON; through
// encoding/json a consumer spent most of its CPU time decoding it. As for
// cache_put (cacheput_fast.go), the exact form MarshalMessage writes is
// encoded and decoded here by hand,
//
//	{"type":"group_records","records":[{"offset":N,"payload":"B64","attempts":N,"publisher":"S","timestamp_micros":N},...],"request_id":N}
//
// with records null or [], payload null, and the last three fields of a
// record left out when zero or empty (their omitempty tags). A publisher
// encoding/json would escape, and any other spelling, takes the general
// path; tests and fuzz targets hold both paths to the same bytes and
// values.
//
// The decoder puts every payload of one answer in one allocation, each
// capped at its own length (appending to one cannot write over the next).
// A caller that keeps one payload of a poll keeps that poll's payload
// bytes alive; at most one frame's worth.

const groupRecordsPrefix = `{"type":"group_records","records":`

// groupRecordMaxFixed bounds the bytes one record adds besides its
// payload's base64 and its publisher: the field names, the widest
// numbers, the quotes, braces and separating comma.
const groupRecordMaxFixed = 128

// appendGroupRecords appends MarshalMessage's encoding of m, or reports
// false and appends nothing when m is nil or a publisher is not plain.
func appendGroupRecords(dst []byte, m *GroupRecords) ([]byte, bool) {
	if m == nil {
		return dst, false // the general path refuses it
	}
	size := len(groupRecordsPrefix) + len(`[],"request_id":}`) + 20
	for i := range m.Records {
		r := &m.Records[i]
		if !plainText(r.Publisher) {
			return dst, false
		}
		size += base64.StdEncoding.EncodedLen(len(r.Payload)) + len(r.Publisher) + groupRecordMaxFixed
	}
	dst = slices.Grow(dst, size)
	dst = append(dst, groupRecordsPrefix...)
	if m.Records == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range m.Records {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendGroupRecord(dst, &m.Records[i])
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"request_id":`...)
	dst = strconv.AppendUint(dst, m.RequestID, 10)
	return append(dst, '}'), true
}

// appendGroupRecord appends one record object; r.Publisher is plain.
func appendGroupRecord(dst []byte, r *GroupRecord) []byte {
	dst = append(dst, `{"offset":`...)
	dst = strconv.AppendUint(dst, r.Offset, 10)
	dst = append(dst, `,"payload":`...)
	dst = appendBase64Value(dst, r.Payload)
	if r.Attempts != 0 {
		dst = append(dst, `,"attempts":`...)
		dst = strconv.AppendUint(dst, uint64(r.Attempts), 10)
	}
	if r.Publisher != "" {
		dst = append(dst, `,"publisher":"`...)
		dst = append(dst, r.Publisher...)
		dst = append(dst, '"')
	}
	if r.TimestampMicros != 0 {
		dst = append(dst, `,"timestamp_micros":`...)
		dst = strconv.AppendUint(dst, r.TimestampMicros, 10)
	}
	return append(dst, '}')
}

// parseGroupRecords decodes the exact form appendGroupRecords writes and
// reports false for anything else.
func parseGroupRecords(b []byte) (*GroupRecords, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(groupRecordsPrefix))
	if !ok {
		return nil, false
	}
	m := &GroupRecords{}
	decoded := 0 // the bytes the payloads need, at most
	if after, found := bytes.CutPrefix(rest, []byte("null")); found {
		rest = after
	} else if rest, ok = bytes.CutPrefix(rest, []byte("[")); !ok {
		return nil, false
	} else {
		// No payload or plain publisher holds a '{': this counts the records.
		m.Records = make([]GroupRecord, 0, bytes.Count(rest, []byte(`{"offset":`)))
		if rest, ok = cutGroupRecordList(rest, m, &decoded); !ok {
			return nil, false
		}
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"request_id":`)); !ok {
		return nil, false
	}
	id, rest, ok := cutUint(rest)
	if !ok || len(rest) != 1 || rest[0] != '}' {
		return nil, false
	}
	m.RequestID = id
	if !decodeGroupPayloads(m.Records, decoded) {
		return nil, false
	}
	return m, true
}

// cutGroupRecordList reads the records after '[' up to and including the
// closing ']' into m.Records, each payload still its base64 text (nil for
// null), adding the bytes they decode to at most to *decoded.
func cutGroupRecordList(b []byte, m *GroupRecords, decoded *int) ([]byte, bool) {
	if after, found := bytes.CutPrefix(b, []byte("]")); found {
		return after, true
	}
	for {
		r, rest, ok := cutGroupRecord(b)
		if !ok || len(rest) == 0 {
			return nil, false
		}
		*decoded += base64.StdEncoding.DecodedLen(len(r.Payload))
		m.Records = append(m.Records, r)
		switch rest[0] {
		case ']':
			return rest[1:], true
		case ',':
			b = rest[1:]
		default:
			return nil, false
		}
	}
}

// cutGroupRecord reads one record object at the start of b, leaving its
// payload as the base64 text between the quotes (nil for null).
func cutGroupRecord(b []byte) (GroupRecord, []byte, bool) {
	var r GroupRecord
	rest, ok := bytes.CutPrefix(b, []byte(`{"offset":`))
	if !ok {
		return r, nil, false
	}
	if r.Offset, rest, ok = cutUint(rest); !ok {
		return r, nil, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"payload":`)); !ok {
		return r, nil, false
	}
	if r.Payload, rest, ok = cutBase64Text(rest); !ok {
		return r, nil, false
	}
	if after, found := bytes.CutPrefix(rest, []byte(`,"attempts":`)); found {
		n, tail, ok := cutUint(after)
		if !ok || n == 0 || n > math.MaxUint32 {
			return r, nil, false
		}
		r.Attempts, rest = uint32(n), tail
	}
	if after, found := bytes.CutPrefix(rest, []byte(`,"publisher":"`)); found {
		s, tail, ok := cutPlainString(after)
		if !ok || len(s) == 0 {
			return r, nil, false
		}
		r.Publisher, rest = string(s), tail
	}
	if after, found := bytes.CutPrefix(rest, []byte(`,"timestamp_micros":`)); found {
		n, tail, ok := cutUint(after)
		if !ok || n == 0 {
			return r, nil, false
		}
		r.TimestampMicros, rest = n, tail
	}
	if rest, ok = bytes.CutPrefix(rest, []byte("}")); !ok {
		return r, nil, false
	}
	return r, rest, true
}

// cutBase64Text returns the text of the quoted []byte value at the start
// of b, not yet decoded (never nil, possibly empty), or nil for null, and
// the rest. The text runs to the first quote and is checked when it is
// decoded: base64.StdEncoding.Decode refuses every byte outside the
// standard alphabet and its padding (a backslash too, so no escaped quote
// hides in it) but skips CR and LF, which encoding/json refuses raw in a
// string, so those are refused here.
func cutBase64Text(b []byte) (text, rest []byte, ok bool) {
	if after, found := bytes.CutPrefix(b, []byte("null")); found {
		return nil, after, true
	}
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	b = b[1:]
	n := bytes.IndexByte(b, '"')
	if n < 0 || bytes.IndexByte(b[:n], '\n') >= 0 || bytes.IndexByte(b[:n], '\r') >= 0 {
		return nil, nil, false
	}
	return b[:n:n], b[n+1:], true
}

// decodeGroupPayloads replaces each record's base64 text with the bytes
// it decodes to, all in one buffer of size bytes, as encoding/json would
// decode them (null stays nil, "" is empty); false if any is not valid
// padded standard base64.
func decodeGroupPayloads(recs []GroupRecord, size int) bool {
	buf := make([]byte, size)
	at := 0
	for i := range recs {
		text := recs[i].Payload
		if text == nil {
			continue
		}
		// Decode may write past what it decodes, up to DecodedLen: only
		// into the room of payloads not yet decoded.
		n, err := base64.StdEncoding.Decode(buf[at:], text)
		if err != nil {
			return false
		}
		recs[i].Payload = buf[at : at+n : at+n]
		at += n
	}
	return true
}
