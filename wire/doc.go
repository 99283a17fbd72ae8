// Package wire is Felix's data-plane wire format: the 12-byte frame header,
// the JSON control messages, the binary publish and event batches, the flag
// and feature bits negotiated in auth, and the error codes with their retry
// classes.
//
// Framing: every frame is magic u32 (0x464C5831, "FLX1"), version u16 (1),
// flags u16, length u32, then length payload bytes, all big-endian. Flags 0
// means the payload is one JSON object with a "type" field. Other flag
// combinations select a binary body (see binary.go).
//
// Length limits: a FrameReader refuses a declared length above its maximum
// before allocating anything; every binary decoder checks each length
// prefix against the bytes actually present before slicing or allocating.
//
// Codec shape: Append* functions append to a caller buffer and return it;
// Parse* functions return the value and an error. Decoded byte slices alias
// the input buffer unless the function says otherwise.
//
// This package imports nothing else of Felix.
package wire
