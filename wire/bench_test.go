package wire

import (
	"bytes"
	"testing"
)

// benchPayloads returns 64 payloads of 4 KiB, the batch shape the
// benchmarks below measure.
func benchPayloads() [][]byte {
	payloads := make([][]byte, 64)
	for i := range payloads {
		payloads[i] = bytes.Repeat([]byte{byte(i)}, 4<<10)
	}
	return payloads
}

func BenchmarkAppendSharedEventBatchFrame(b *testing.B) {
	payloads := benchPayloads()
	h := &EventBatchHeader{BaseOffset: 1 << 40, SkippedBefore: 2, Publisher: "svc-orders"}
	for _, bc := range []struct {
		name  string
		flags uint16
	}{
		{"bare", FlagBinaryEventBatchShared},
		{"offsets", FlagBinaryEventBatchShared | FlagEventBatchOffsets},
		{"all-options", FlagBinaryEventBatchShared | EventBatchOptionFlags},
	} {
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 0, HeaderLen+SharedEventBatchLen(bc.flags, h, payloads))
			b.SetBytes(int64(cap(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendSharedEventBatchFrame(buf[:0], bc.flags, h, payloads)
			}
		})
	}
}

func BenchmarkParseBinaryPublish(b *testing.B) {
	p := BinaryPublish{RequestID: 9, Key: []byte("user-7"), TenantID: "acme", Namespace: "prod", Stream: "events", Payloads: benchPayloads()}
	for _, bc := range []struct {
		name  string
		flags uint16
	}{
		{"plain", PublishFlags(false, false)},
		{"acked-keyed", PublishFlags(true, true)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body := p.AppendFrame(nil, bc.flags)[HeaderLen:]
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseBinaryPublish(bc.flags, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
