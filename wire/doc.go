// Package wire is Felix's data-plane wire format: the 12-byte frame header,
// the JSON control messages, the binary publish and event batches, the flag
// and feature bits negotiated in auth, the error codes with their retry
// classes, and the catalog types the control plane serves. The full
// contract, for implementers in any language, is docs/protocol.md.
//
// Framing: every frame is magic u32 (0x464C5831, "FLX1"), version u16 (1),
// flags u16, length u32, then length payload bytes, all big-endian. Flags 0
// means the payload is one JSON object with a "type" field. Other flag
// combinations select a binary body (see binary.go).
//
// Length limits: a FrameReader refuses a declared length above its maximum
// (DefaultMaxFrameBytes, 16 MiB, unless told otherwise) before allocating
// anything, and grows the buffer for a payload over 1 MiB only as its bytes
// arrive. Every binary decoder checks each length prefix and count against
// the bytes actually present before slicing or allocating, and refuses
// trailing bytes.
//
// Errors: every decoding failure is, or unwraps to (errors.As), an *Error
// with code invalid_request and retry class fatal, ready to send to the
// peer. Frame header failures also match ErrShortHeader, ErrBadMagic,
// ErrBadVersion or ErrFrameTooLarge with errors.Is; after one of them, or
// after io.ErrUnexpectedEOF, the stream is out of step and must be closed.
// A clean end of stream between frames is io.EOF.
//
// Codec shape: Append* functions append to a caller buffer and return it;
// Parse* functions return the value and an error. Decoded byte slices alias
// the input buffer (each capped at its own length) unless the function says
// otherwise. ParseMessage does not check required fields: call Validate on
// requests that implement Validator.
//
// Keys: an empty routing key is the same as no key, in JSON and binary
// publishes alike; decoders return a nil key for it.
//
// This package imports nothing else of Felix.
package wire
