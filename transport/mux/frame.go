package mux

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// frameType is the first byte of a frame header.
type frameType uint8

// The frame types (docs/protocol.md, "TCP transport").
const (
	frameData        frameType = 0x0 // stream data; flag FIN
	frameWindow      frameType = 0x1 // a stream's new send limit (absolute offset)
	frameReset       frameType = 0x2 // the sender abandons a stream's send side, with a code
	frameStopSending frameType = 0x3 // the receiver asks the sender to reset, with a code
	frameSettings    frameType = 0x4 // first frame from each side
	frameConnWindow  frameType = 0x5 // the connection's new send limit (absolute byte count)
	frameMaxStreams  frameType = 0x6 // how many streams the peer may open in total; flag UNI
	framePing        frameType = 0x7 // 8 opaque bytes; flag ACK
	frameClose       frameType = 0x8 // code and message; flag PROTOCOL for a violation
	frameTypeCount             = 0x9
)

// Frame flags, per type.
const (
	flagFIN      uint8 = 0x1 // frameData: the last byte of the stream
	flagUni      uint8 = 0x1 // frameMaxStreams: the unidirectional limit
	flagAck      uint8 = 0x1 // framePing: an answer to a ping
	flagProtocol uint8 = 0x1 // frameClose: the session broke the mux protocol
)

const (
	// headerLen is a frame header: type (1), flags (1), stream id (8),
	// payload length (4).
	headerLen = 14
	// maxDataPayload bounds a DATA frame's payload.
	maxDataPayload = 64 << 10
	// maxCloseMessage bounds a CLOSE frame's message.
	maxCloseMessage = 4096
	// maxSettings bounds how many settings a SETTINGS frame may carry.
	maxSettings = 64
	settingLen  = 10 // id (2) + value (8)
	// maxStreamID is the largest stream id (QUIC's 62 bits).
	maxStreamID = 1<<62 - 1
)

// Setting ids in a SETTINGS frame. Unknown ids are ignored.
const (
	settingStreamWindow uint16 = 1 // initial per-stream receive window, bytes
	settingConnWindow   uint16 = 2 // initial connection receive window, bytes
	settingMaxBidi      uint16 = 3 // bidirectional streams the peer may open at first
	settingMaxUni       uint16 = 4 // unidirectional streams the peer may open at first
)

// header is a decoded frame header.
type header struct {
	typ    frameType
	flags  uint8
	stream uint64
	length uint32
}

// errFrame marks a malformed frame; the session closes with it.
var errFrame = errors.New("malformed frame")

// allowedFlags is which flag bits each frame type may set.
var allowedFlags = [frameTypeCount]uint8{
	frameData:       flagFIN,
	frameMaxStreams: flagUni,
	framePing:       flagAck,
	frameClose:      flagProtocol,
}

// connLevel reports whether a frame type is about the connection (its
// stream id must be 0) rather than one stream.
func (t frameType) connLevel() bool {
	return t >= frameSettings
}

// parseHeader decodes and checks a frame header: the type is known, the
// flags are allowed for it, the stream id fits 62 bits (and is 0 for a
// connection frame), and the length is the one the type allows.
func parseHeader(b []byte) (header, error) {
	if len(b) < headerLen {
		return header{}, fmt.Errorf("%w: header of %d bytes, want %d", errFrame, len(b), headerLen)
	}
	h := header{
		typ:    frameType(b[0]),
		flags:  b[1],
		stream: binary.BigEndian.Uint64(b[2:10]),
		length: binary.BigEndian.Uint32(b[10:14]),
	}
	if h.typ >= frameTypeCount {
		return h, fmt.Errorf("%w: unknown frame type 0x%x", errFrame, uint8(h.typ))
	}
	if h.flags&^allowedFlags[h.typ] != 0 {
		return h, fmt.Errorf("%w: frame type 0x%x with flags 0x%x", errFrame, uint8(h.typ), h.flags)
	}
	if h.stream > maxStreamID || (h.typ.connLevel() && h.stream != 0) {
		return h, fmt.Errorf("%w: frame type 0x%x with stream id %d", errFrame, uint8(h.typ), h.stream)
	}
	if lo, hi := payloadBounds(h.typ); h.length < lo || h.length > hi {
		return h, fmt.Errorf("%w: frame type 0x%x with a %d-byte payload (allowed %d..%d)", errFrame, uint8(h.typ), h.length, lo, hi)
	}
	if h.typ == frameSettings && h.length%settingLen != 0 {
		return h, fmt.Errorf("%w: SETTINGS payload of %d bytes is not a whole number of settings", errFrame, h.length)
	}
	return h, nil
}

// payloadBounds is the payload length range a frame type allows.
func payloadBounds(t frameType) (lo, hi uint32) {
	switch t {
	case frameData:
		return 0, maxDataPayload
	case frameSettings:
		return 0, maxSettings * settingLen
	case framePing:
		return 8, 8
	case frameClose:
		return 8, 8 + maxCloseMessage
	default: // window, reset, stop-sending, conn window, max streams: one u64
		return 8, 8
	}
}

// appendHeader appends a frame header to b.
func appendHeader(b []byte, t frameType, flags uint8, stream uint64, length int) []byte {
	b = append(b, byte(t), flags)
	b = binary.BigEndian.AppendUint64(b, stream)
	return binary.BigEndian.AppendUint32(b, uint32(length))
}

// appendU64Frame appends a frame whose payload is one uint64 (window,
// reset, stop-sending, conn window, max streams, ping).
func appendU64Frame(b []byte, t frameType, flags uint8, stream, v uint64) []byte {
	b = appendHeader(b, t, flags, stream, 8)
	return binary.BigEndian.AppendUint64(b, v)
}

// setting is one SETTINGS entry.
type setting struct {
	id    uint16
	value uint64
}

func appendSettings(b []byte, ss []setting) []byte {
	b = appendHeader(b, frameSettings, 0, 0, len(ss)*settingLen)
	for _, s := range ss {
		b = binary.BigEndian.AppendUint16(b, s.id)
		b = binary.BigEndian.AppendUint64(b, s.value)
	}
	return b
}

// parseSettings decodes a SETTINGS payload (its length already checked
// by parseHeader).
func parseSettings(p []byte) []setting {
	ss := make([]setting, 0, len(p)/settingLen)
	for ; len(p) >= settingLen; p = p[settingLen:] {
		ss = append(ss, setting{binary.BigEndian.Uint16(p), binary.BigEndian.Uint64(p[2:])})
	}
	return ss
}

// appendClose appends a CLOSE frame; a message longer than
// maxCloseMessage is cut.
func appendClose(b []byte, flags uint8, code uint64, msg string) []byte {
	if len(msg) > maxCloseMessage {
		msg = msg[:maxCloseMessage]
	}
	b = appendHeader(b, frameClose, flags, 0, 8+len(msg))
	b = binary.BigEndian.AppendUint64(b, code)
	return append(b, msg...)
}

// parseFrame decodes one whole frame from b: its header, its payload (a
// sub-slice of b) and the bytes used. It is the decoder the fuzz target
// drives; the session reads the same header and payload from its
// connection.
func parseFrame(b []byte) (header, []byte, int, error) {
	h, err := parseHeader(b)
	if err != nil {
		return h, nil, 0, err
	}
	end := headerLen + int(h.length)
	if len(b) < end {
		return h, nil, 0, fmt.Errorf("%w: frame type 0x%x needs %d payload bytes, have %d", errFrame, uint8(h.typ), h.length, len(b)-headerLen)
	}
	return h, b[headerLen:end], end, nil
}
