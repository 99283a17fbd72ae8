package peer

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/felixmq/felix/wire"
)

// Calls: the general request/answer channel of a link (call.go). Calls
// travel on call streams: long-lived bidirectional QUIC streams the
// caller opens (a few per link) and the answering end reads until they
// end. Many calls share a stream, each named by an id the caller chose;
// replies come back on the stream the request went on, in the order the
// handlers finish. A call frame is a wire frame with flags FlagCall whose
// payload is (integers big-endian)
//
//	request: u8 1 | u64 id | u16 t | t bytes of type | u32 h | h bytes of header | body
//	reply:   u8 2 | u64 id | u32 h | h bytes of header | u32 e | e bytes of error | body
//	cancel:  u8 3 | u64 id
//
// The header is the handler's JSON object (h = 0 for none); the body the
// rest of the frame, binary, may be empty. A reply's error (e = 0 when the
// handler did not refuse) is a JSON object with the wire error fields:
// code, retry, message, detail. A cancel says the caller gave up on call
// id.

// FlagCall marks a call frame. It is the only flag a call stream's frames
// carry, and the handshake stream's frames never carry it.
const FlagCall uint16 = 0x0001

// Kinds of call frame.
const (
	frameRequest byte = 1
	frameReply   byte = 2
	frameCancel  byte = 3
)

// callPrefix is a call frame's kind and id.
const callPrefix = 1 + 8

// TypeReply is the type of every reply's header.
const TypeReply = "peer_reply"

// Request is one call's request: a message type the handler knows, its
// JSON fields and an optional binary body.
type Request struct {
	Type   string
	Header json.RawMessage // a JSON object; nil is {}
	Body   []byte
}

// Reply is a handler's answer: its JSON fields and binary body, or Err
// when it refused the request.
type Reply struct {
	Header json.RawMessage // a JSON object; nil is {}
	Body   []byte
	Err    *wire.Error
}

// ErrorReply is a Reply refusing with e.
func ErrorReply(e *wire.Error) Reply { return Reply{Err: e} }

// callError is a refusal on the wire.
type callError struct {
	Code    wire.Code       `json:"code"`
	Retry   wire.RetryClass `json:"retry,omitempty"`
	Message string          `json:"message"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}

// errBadCall is a call frame that does not decode.
var errBadCall = errors.New("peer: bad call frame")

// appendRequest appends r as call id's request frame.
func appendRequest(dst []byte, id uint64, r Request) ([]byte, error) {
	dst, err := appendRequestHead(dst, id, r)
	if err != nil {
		return nil, err
	}
	return append(dst, r.Body...), nil
}

// requestLen is the length of r's request frame past the frame header,
// or an error when r cannot be sent.
func requestLen(r Request) (int, error) {
	if r.Type == "" || r.Type == TypeReply || len(r.Type) > 1<<16-1 {
		return 0, fmt.Errorf("peer: a request needs a type other than %q, at most 65535 bytes", TypeReply)
	}
	n := callPrefix + 2 + len(r.Type) + 4 + len(r.Header) + len(r.Body)
	if uint64(n) > 1<<32-1 {
		return 0, fmt.Errorf("peer: call frame of %d bytes", n)
	}
	return n, nil
}

// appendRequestHead appends call id's request frame for r up to its
// body, which the caller writes right after it: a large body is not
// copied into the frame.
func appendRequestHead(dst []byte, id uint64, r Request) ([]byte, error) {
	n, err := requestLen(r)
	if err != nil {
		return nil, err
	}
	dst = slices.Grow(dst, wire.HeaderLen+n-len(r.Body))
	dst = wire.FrameHeader{Flags: FlagCall, Length: uint32(n)}.Append(dst)
	dst = append(dst, frameRequest)
	dst = binary.BigEndian.AppendUint64(dst, id)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.Type)))
	dst = append(dst, r.Type...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Header)))
	return append(dst, r.Header...), nil
}

// appendCancel appends the frame by which a caller gives up on call id.
func appendCancel(dst []byte, id uint64) []byte {
	dst = wire.FrameHeader{Flags: FlagCall, Length: callPrefix}.Append(dst)
	dst = append(dst, frameCancel)
	return binary.BigEndian.AppendUint64(dst, id)
}

// appendReply appends r as call id's reply frame.
func appendReply(dst []byte, id uint64, r Reply) ([]byte, error) {
	var eb []byte
	if e := r.Err; e != nil {
		ce := callError{Code: e.Code, Retry: e.Retry, Message: e.Message}
		if len(e.Detail) > 0 {
			d, err := json.Marshal(e.Detail)
			if err != nil {
				return nil, fmt.Errorf("peer: reply error detail: %w", err)
			}
			ce.Detail = d
		}
		var err error
		if eb, err = json.Marshal(ce); err != nil {
			return nil, err
		}
	}
	n := callPrefix + 4 + len(r.Header) + 4 + len(eb) + len(r.Body)
	if uint64(n) > 1<<32-1 {
		return nil, fmt.Errorf("peer: call frame of %d bytes", n)
	}
	dst = slices.Grow(dst, wire.HeaderLen+n)
	dst = wire.FrameHeader{Flags: FlagCall, Length: uint32(n)}.Append(dst)
	dst = append(dst, frameReply)
	dst = binary.BigEndian.AppendUint64(dst, id)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Header)))
	dst = append(dst, r.Header...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(eb)))
	dst = append(dst, eb...)
	return append(dst, r.Body...), nil
}

// callFrame is a decoded call frame: a request, a reply or a cancel.
type callFrame struct {
	kind byte
	id   uint64
	req  Request // frameRequest
	rep  Reply   // frameReply
}

// parseCallFrame decodes a call frame's flags and payload. Bodies alias
// payload. A frame whose kind and id decode but whose rest does not is
// returned with its kind and id and an error, so a bad request can be
// refused by id.
func parseCallFrame(flags uint16, payload []byte) (callFrame, error) {
	var f callFrame
	if flags != FlagCall {
		return f, fmt.Errorf("%w: flags %#04x, want %#04x", errBadCall, flags, FlagCall)
	}
	if len(payload) < callPrefix {
		return f, fmt.Errorf("%w: %d bytes", errBadCall, len(payload))
	}
	f.kind, f.id = payload[0], binary.BigEndian.Uint64(payload[1:])
	rest := payload[callPrefix:]
	switch f.kind {
	case frameCancel:
		if len(rest) != 0 {
			return f, fmt.Errorf("%w: %d bytes after a cancel", errBadCall, len(rest))
		}
		return f, nil
	case frameRequest, frameReply:
	default:
		kind := f.kind
		f.kind = 0
		return f, fmt.Errorf("%w: kind %d", errBadCall, kind)
	}
	if f.kind == frameRequest {
		typ, rest, err := cut(rest, 2)
		if err == nil && (len(typ) == 0 || string(typ) == TypeReply) {
			err = fmt.Errorf("%w: a request of type %q", errBadCall, typ)
		}
		if err != nil {
			return f, err
		}
		hdr, body, err := cut(rest, 4)
		if err != nil {
			return f, err
		}
		f.req = Request{Type: string(typ), Header: nilIfEmpty(hdr), Body: body}
		return f, nil
	}
	hdr, rest, err := cut(rest, 4)
	if err != nil {
		return f, err
	}
	eb, body, err := cut(rest, 4)
	if err != nil {
		return f, err
	}
	f.rep = Reply{Header: nilIfEmpty(hdr), Body: body}
	if len(eb) > 0 {
		var ce callError
		if err := json.Unmarshal(eb, &ce); err != nil {
			return f, fmt.Errorf("%w: a reply's error: %w", errBadCall, err)
		}
		f.rep.Err = wire.ErrorFromFields(ce.Code, ce.Retry, ce.Message, ce.Detail)
	}
	return f, nil
}

// cut splits b after a length of width bytes (2 or 4, big-endian) and the
// bytes it counts.
func cut(b []byte, width int) (field, rest []byte, err error) {
	if len(b) < width {
		return nil, nil, fmt.Errorf("%w: %d bytes where a length of %d belongs", errBadCall, len(b), width)
	}
	var n uint64
	if width == 2 {
		n = uint64(binary.BigEndian.Uint16(b))
	} else {
		n = uint64(binary.BigEndian.Uint32(b))
	}
	b = b[width:]
	if n > uint64(len(b)) {
		return nil, nil, fmt.Errorf("%w: a field of %d bytes, %d left", errBadCall, n, len(b))
	}
	return b[:n:n], b[n:], nil
}

func nilIfEmpty(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return b
}
