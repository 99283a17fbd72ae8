package felix

import (
	"testing"

	"github.com/felixmq/felix/wire"
)

func FuzzDecodeEventFrame(f *testing.F) {
	shared := wire.FlagBinaryEventBatchShared | wire.FlagEventBatchOffsets
	fr := wire.AppendSharedEventBatchFrame(nil, shared, &wire.EventBatchHeader{BaseOffset: 7}, [][]byte{[]byte("a"), {}})
	f.Add(shared, fr[wire.HeaderLen:])
	fr = wire.AppendEventBatchWithIDFrame(nil, 3, [][]byte{[]byte("b")})
	f.Add(wire.FlagBinaryEventBatch, fr[wire.HeaderLen:])
	base := uint64(5)
	js, _ := wire.MarshalMessage(&wire.EventBatch{Payloads: [][]byte{[]byte("c")}, BaseOffset: &base})
	f.Add(uint16(0), js)
	js, _ = wire.MarshalMessage(wire.NewError(wire.CodeNotFound, "gone").ErrorMessage(true))
	f.Add(uint16(0), js)
	f.Fuzz(func(t *testing.T, flags uint16, body []byte) {
		b, err := decodeEventFrame(wire.Frame{Flags: flags, Payload: body})
		if err == nil && b.hasOffset && len(b.payloads) > 0 {
			_ = b.baseOffset + uint64(len(b.payloads)-1)
		}
	})
}

func TestDecodeEventFrame(t *testing.T) {
	shared := wire.FlagBinaryEventBatchShared | wire.FlagEventBatchOffsets
	fr := wire.AppendSharedEventBatchFrame(nil, shared, &wire.EventBatchHeader{BaseOffset: 7}, [][]byte{[]byte("a"), {}})
	b, err := decodeEventFrame(wire.Frame{Flags: shared, Payload: fr[wire.HeaderLen:]})
	if err != nil || len(b.payloads) != 2 || !b.hasOffset || b.baseOffset != 7 {
		t.Fatalf("%+v %v", b, err)
	}
	if _, err := decodeEventFrame(wire.Frame{Flags: shared, Payload: []byte{1}}); err == nil {
		t.Fatal("truncated batch accepted")
	}
	if _, err := decodeEventFrame(wire.Frame{Flags: 0x8000, Payload: nil}); err == nil {
		t.Fatal("unknown flags accepted")
	}
	js, _ := wire.MarshalMessage(&wire.Unsupported{RequestType: "x"})
	if b, err := decodeEventFrame(wire.Frame{Payload: js}); err != nil || len(b.payloads) != 0 {
		t.Fatalf("other JSON message: %+v %v", b, err)
	}
}
