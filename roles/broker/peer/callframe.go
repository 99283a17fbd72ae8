package peer

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/felixmq/felix/wire"
)

// Calls: the general request/answer channel of a link (call.go). Each
// call is one bidirectional QUIC stream, opened by the caller, carrying
// one call frame each way: the request, then the reply. A call frame is
// a wire frame with flags FlagCall whose payload is
//
//	u32 big-endian n | n bytes of JSON header | body (the rest, may be empty)
//
// The request's header is {"type": T, "header": {...}}; the reply's is
// {"type": "peer_reply", "header": {...}, "error": {...}} with "error"
// present only when the handler refused (wire error fields: code, retry,
// message, detail).

// FlagCall marks a call frame. It is the only flag a call stream's frames
// carry, and the handshake stream's frames never carry it.
const FlagCall uint16 = 0x0001

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

// callHeader is the JSON header of a call frame, both ways.
type callHeader struct {
	Type   string          `json:"type"`
	Header json.RawMessage `json:"header,omitempty"`
	Error  *callError      `json:"error,omitempty"`
}

// callError is a refusal on the wire.
type callError struct {
	Code    wire.Code       `json:"code"`
	Retry   wire.RetryClass `json:"retry,omitempty"`
	Message string          `json:"message"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}

// errBadCall is a call frame that does not decode.
var errBadCall = errors.New("peer: bad call frame")

// AppendRequest appends r as one call frame.
func AppendRequest(dst []byte, r Request) ([]byte, error) {
	if r.Type == "" || r.Type == TypeReply {
		return nil, fmt.Errorf("peer: a request needs a type other than %q", TypeReply)
	}
	return appendCall(dst, callHeader{Type: r.Type, Header: r.Header}, r.Body)
}

// AppendReply appends r as one call frame.
func AppendReply(dst []byte, r Reply) ([]byte, error) {
	h := callHeader{Type: TypeReply, Header: r.Header}
	if e := r.Err; e != nil {
		h.Error = &callError{Code: e.Code, Retry: e.Retry, Message: e.Message}
		if len(e.Detail) > 0 {
			d, err := json.Marshal(e.Detail)
			if err != nil {
				return nil, fmt.Errorf("peer: reply error detail: %w", err)
			}
			h.Error.Detail = d
		}
	}
	return appendCall(dst, h, r.Body)
}

func appendCall(dst []byte, h callHeader, body []byte) ([]byte, error) {
	if len(h.Header) == 0 {
		h.Header = nil
	} else if !json.Valid(h.Header) {
		return nil, fmt.Errorf("peer: %s header is not JSON", h.Type)
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	n := 4 + len(hb) + len(body)
	if uint64(n) > 1<<32-1 {
		return nil, fmt.Errorf("peer: call frame of %d bytes", n)
	}
	dst = wire.FrameHeader{Flags: FlagCall, Length: uint32(n)}.Append(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(hb)))
	dst = append(dst, hb...)
	return append(dst, body...), nil
}

// parseCall decodes a call frame's flags and payload. The body aliases
// payload.
func parseCall(flags uint16, payload []byte) (callHeader, []byte, error) {
	var h callHeader
	if flags != FlagCall {
		return h, nil, fmt.Errorf("%w: flags %#04x, want %#04x", errBadCall, flags, FlagCall)
	}
	if len(payload) < 4 {
		return h, nil, fmt.Errorf("%w: %d bytes", errBadCall, len(payload))
	}
	n := binary.BigEndian.Uint32(payload)
	if uint64(n) > uint64(len(payload)-4) {
		return h, nil, fmt.Errorf("%w: header of %d bytes in a payload of %d", errBadCall, n, len(payload))
	}
	if err := json.Unmarshal(payload[4:4+n], &h); err != nil {
		return h, nil, fmt.Errorf("%w: header: %w", errBadCall, err)
	}
	if h.Type == "" {
		return h, nil, fmt.Errorf("%w: no type", errBadCall)
	}
	if len(h.Header) > 0 && string(h.Header) == "null" {
		h.Header = nil
	}
	return h, payload[4+n:], nil
}

// ParseRequest decodes a request call frame.
func ParseRequest(flags uint16, payload []byte) (Request, error) {
	h, body, err := parseCall(flags, payload)
	switch {
	case err != nil:
		return Request{}, err
	case h.Type == TypeReply || h.Error != nil:
		return Request{}, fmt.Errorf("%w: a reply where a request belongs", errBadCall)
	}
	return Request{Type: h.Type, Header: h.Header, Body: body}, nil
}

// ParseReply decodes a reply call frame.
func ParseReply(flags uint16, payload []byte) (Reply, error) {
	h, body, err := parseCall(flags, payload)
	switch {
	case err != nil:
		return Reply{}, err
	case h.Type != TypeReply:
		return Reply{}, fmt.Errorf("%w: %s where a reply belongs", errBadCall, h.Type)
	}
	r := Reply{Header: h.Header, Body: body}
	if e := h.Error; e != nil {
		r.Err = wire.ErrorFromFields(e.Code, e.Retry, e.Message, e.Detail)
	}
	return r, nil
}
