package wire

import (
	"bytes"
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

// Errors from frame parsing. The errors ParseFrameHeader and FrameReader
// return match these sentinels with errors.Is, and each also unwraps to an
// *Error with code invalid_request (errors.As), ready to send to the peer
// before the stream is closed: after any of them the stream is out of step
// and cannot be read further.
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
		return FrameHeader{}, newFrameError(ErrShortHeader, "%d bytes", len(b))
	}
	if m := binary.BigEndian.Uint32(b); m != Magic {
		return FrameHeader{}, newFrameError(ErrBadMagic, "%#08x", m)
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != Version {
		return FrameHeader{}, newFrameError(ErrBadVersion, "%d", v)
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
// declared length exceeds its limit before allocating for it. A payload up
// to retainedBufBytes is read into one reused buffer; a longer one is read
// into a buffer that grows as its bytes arrive, so a peer that declares a
// large frame and sends little costs little memory, and is not kept after
// the next call.
//
// A read error inside a frame keeps what was read of it: the next call
// carries on from there. That is what lets a caller interrupt a read with
// a deadline (a context that ended) and read the frame whole later. A
// framing error (a bad header, a frame over the limit) leaves the stream
// out of step for good: every later call returns it again.
type FrameReader struct {
	r   io.Reader
	max uint32
	hdr [HeaderLen]byte
	buf []byte
	err error // the framing error that ended the stream

	// The frame being read: hdrN header bytes so far, and once the header
	// is whole, its payload buffer p holding pN bytes of h.Length (shared
	// when p is buf).
	hdrN   int
	h      FrameHeader
	p      []byte
	pN     int
	shared bool
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
	return fr.next(false)
}

// NextOwned is Next with a payload the caller owns.
func (fr *FrameReader) NextOwned() (Frame, error) {
	return fr.next(true)
}

func (fr *FrameReader) next(owned bool) (Frame, error) {
	if fr.err != nil {
		return Frame{}, fr.err
	}
	if fr.hdrN < HeaderLen {
		started := fr.hdrN > 0
		n, err := io.ReadFull(fr.r, fr.hdr[fr.hdrN:])
		fr.hdrN += n
		if err != nil {
			if err == io.EOF && started {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, err
		}
		h, err := ParseFrameHeader(fr.hdr[:])
		if err == nil && h.Length > fr.max {
			err = newFrameError(ErrFrameTooLarge, "%d > %d", h.Length, fr.max)
		}
		if err != nil {
			fr.err = err
			return Frame{}, err
		}
		fr.h, fr.pN = h, 0
		fr.p, fr.shared = fr.payloadBuf(int(h.Length), owned)
	}
	if err := fr.readPayload(); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	f := Frame{Flags: fr.h.Flags, Payload: fr.p}
	if owned && fr.shared { // begun by Next, finished by NextOwned
		f.Payload = bytes.Clone(fr.p)
	}
	fr.hdrN, fr.p = 0, nil
	return f, nil
}

// retainedBufBytes is the largest payload buffer a FrameReader keeps
// between calls, and the first chunk of a longer payload.
const retainedBufBytes = 1 << 20

// payloadBuf is where a payload of n bytes starts being read: straight
// into a buffer the caller keeps when owned (no second copy), else the
// reused buffer (shared); a payload longer than retainedBufBytes starts
// with a chunk of that size and grows as its bytes arrive.
func (fr *FrameReader) payloadBuf(n int, owned bool) (p []byte, shared bool) {
	switch {
	case n > retainedBufBytes:
		return make([]byte, retainedBufBytes), false
	case owned:
		return make([]byte, n), false
	}
	if cap(fr.buf) < n {
		fr.buf = make([]byte, n)
	}
	return fr.buf[:n], true
}

// readPayload reads the rest of the current frame's payload into fr.p.
func (fr *FrameReader) readPayload() error {
	n := int(fr.h.Length)
	for {
		m, err := io.ReadFull(fr.r, fr.p[fr.pN:])
		fr.pN += m
		if err != nil {
			return err
		}
		if fr.pN == n {
			return nil
		}
		grown := make([]byte, min(n, 2*len(fr.p)))
		copy(grown, fr.p)
		fr.p = grown
	}
}

// frameError is a framing failure: it matches its sentinel with errors.Is
// and is an *Error with code invalid_request for errors.As.
type frameError struct {
	sentinel error
	werr     *Error
}

func newFrameError(sentinel error, format string, args ...any) error {
	msg := sentinel.Error() + ": " + fmt.Sprintf(format, args...)
	return &frameError{sentinel: sentinel, werr: &Error{Code: CodeInvalidRequest, Retry: RetryFatal, Message: msg}}
}

func (e *frameError) Error() string   { return e.werr.Message }
func (e *frameError) Unwrap() []error { return []error{e.sentinel, e.werr} }
