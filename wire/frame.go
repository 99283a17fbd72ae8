package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame constants.
const (
	Magic                uint32 = 0x464C5831 // "FLX1"
	Version              uint16 = 1
	HeaderLen                   = 12
	DefaultMaxFrameBytes        = 16 << 20 // FELIX_MAX_FRAME_BYTES default
)

// Errors from frame parsing. Each is also an *Error with code
// invalid_request when surfaced to a peer; these sentinels let callers tell
// them apart with errors.Is.
var (
	ErrShortHeader   = errors.New("wire: incomplete frame header")
	ErrBadMagic      = errors.New("wire: bad frame magic")
	ErrBadVersion    = errors.New("wire: unsupported frame version")
	ErrFrameTooLarge = errors.New("wire: frame longer than the limit")
)

// FrameHeader is the 12-byte header that precedes every frame's payload.
type FrameHeader struct {
	Flags  uint16
	Length uint32
}

// ParseFrameHeader decodes a header from the first 12 bytes of b.
func ParseFrameHeader(b []byte) (FrameHeader, error) {
	if len(b) < HeaderLen {
		return FrameHeader{}, ErrShortHeader
	}
	if m := binary.BigEndian.Uint32(b); m != Magic {
		return FrameHeader{}, fmt.Errorf("%w: %#08x", ErrBadMagic, m)
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != Version {
		return FrameHeader{}, fmt.Errorf("%w: %d", ErrBadVersion, v)
	}
	return FrameHeader{Flags: binary.BigEndian.Uint16(b[6:]), Length: binary.BigEndian.Uint32(b[8:])}, nil
}

// Append appends the encoded header to dst.
func (h FrameHeader) Append(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, Magic)
	dst = binary.BigEndian.AppendUint16(dst, Version)
	dst = binary.BigEndian.AppendUint16(dst, h.Flags)
	return binary.BigEndian.AppendUint32(dst, h.Length)
}

// AppendFrame appends a header and payload to dst.
func AppendFrame(dst []byte, flags uint16, payload []byte) []byte {
	dst = FrameHeader{Flags: flags, Length: uint32(len(payload))}.Append(dst)
	return append(dst, payload...)
}

// Frame is one frame read from a stream. Payload is only valid until the
// next call to FrameReader.Next unless the reader was told to copy.
type Frame struct {
	Flags   uint16
	Payload []byte
}

// FrameReader reads frames from a byte stream, refusing any frame whose
// declared length exceeds its limit before allocating for it.
type FrameReader struct {
	r   io.Reader
	max uint32
	hdr [HeaderLen]byte
	buf []byte
}

// NewFrameReader returns a reader that refuses frames longer than
// maxFrame bytes (DefaultMaxFrameBytes when maxFrame is 0).
func NewFrameReader(r io.Reader, maxFrame uint32) *FrameReader {
	if maxFrame == 0 {
		maxFrame = DefaultMaxFrameBytes
	}
	return &FrameReader{r: r, max: maxFrame}
}

// Next reads the next frame. The returned payload aliases an internal
// buffer that the next call reuses. At a clean end of stream before any
// header byte it returns io.EOF; a stream that ends inside a frame returns
// io.ErrUnexpectedEOF.
func (fr *FrameReader) Next() (Frame, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return Frame{}, err
	}
	h, err := ParseFrameHeader(fr.hdr[:])
	if err != nil {
		return Frame{}, err
	}
	if h.Length > fr.max {
		return Frame{}, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, h.Length, fr.max)
	}
	n := int(h.Length)
	if cap(fr.buf) < n {
		fr.buf = make([]byte, n)
	}
	fr.buf = fr.buf[:n]
	if _, err := io.ReadFull(fr.r, fr.buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	return Frame{Flags: h.Flags, Payload: fr.buf}, nil
}

// NextOwned is Next with a payload the caller owns.
func (fr *FrameReader) NextOwned() (Frame, error) {
	f, err := fr.Next()
	if err != nil {
		return f, err
	}
	f.Payload = append([]byte(nil), f.Payload...)
	return f, nil
}
