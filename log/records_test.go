package log

import (
	"bytes"
	"testing"
)

// TestScanRecordsPayloads: ScanRecords hands each record's payload to the
// callback, over several segments, as it was appended.
func TestScanRecordsPayloads(t *testing.T) {
	o := testOptions(t)
	l := mustOpen(t, o)
	want := appendN(t, l, 40, 300) // 4096-byte segments: several of them
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	segs := map[string]bool{}
	rep, err := ScanRecords(o.Dir, func(r RecordInfo) error {
		if r.PayloadBytes != len(r.Payload) {
			t.Errorf("offset %d: PayloadBytes %d, payload of %d", r.Offset, r.PayloadBytes, len(r.Payload))
		}
		got = append(got, bytes.Clone(r.Payload))
		segs[r.Segment] = true
		return nil
	})
	if err != nil || rep.Verdict != VerdictOpen {
		t.Fatalf("scan: %v %+v", err, rep)
	}
	if len(segs) < 2 {
		t.Fatalf("want several segments, got %d", len(segs))
	}
	if len(got) != len(want) {
		t.Fatalf("scanned %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d: payload %q, want %q", i, got[i][:12], want[i][:12])
		}
	}
}
