package log

import (
	"errors"
	"testing"
)

// TestAppendRecords: a follower's records land at the offsets they carry,
// with their own time, publisher, kind and generation; a batch that does
// not start at the next offset, or has a gap, is refused whole.
func TestAppendRecords(t *testing.T) {
	_, leader := buildMemLog(t, 12, 5)
	f := mustOpen(t, memOptions(newMemFS(), 5))
	if a, err := f.AppendRecords(leader[:4]); err != nil || a.Base != 0 || a.Count != 4 || a.TimeMicros != leader[0].TimeMicros {
		t.Fatalf("append at 0: %+v %v", a, err)
	}
	refusals := []struct {
		name string
		recs []Record
		want OffsetError
	}{
		{"behind", leader[3:6], OffsetError{Index: 0, Got: 3, Want: 4, Next: 4}},
		{"ahead", leader[5:7], OffsetError{Index: 0, Got: 5, Want: 4, Next: 4}},
		{"gap", []Record{leader[4], leader[6]}, OffsetError{Index: 1, Got: 6, Want: 5, Next: 4}},
	}
	for _, r := range refusals {
		_, err := f.AppendRecords(r.recs)
		var oe *OffsetError
		if !errors.As(err, &oe) || !errors.Is(err, ErrOffsetMismatch) || *oe != r.want {
			t.Fatalf("%s: %v, want %+v", r.name, err, r.want)
		}
		if f.NextOffset() != 4 {
			t.Fatalf("%s: a refused append moved next to %d", r.name, f.NextOffset())
		}
	}
	if a, err := f.AppendRecords(nil); err != nil || a.Base != 4 || a.Count != 0 {
		t.Fatalf("empty append: %+v %v", a, err)
	}
	for i := 4; i < len(leader); i += 3 {
		if _, err := f.AppendRecords(leader[i:min(i+3, len(leader))]); err != nil {
			t.Fatalf("append at %d: %v", i, err)
		}
	}
	if got := readAll(t, f, 0); !sameRecords(got, leader) {
		t.Fatal("the follower's records differ from the leader's")
	}
	// A follower that diverged cuts back and takes the leader's records.
	if err := f.TruncateTo(9); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AppendRecords(leader[9:]); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f, 0); !sameRecords(got, leader) {
		t.Fatal("after truncation and re-append the records differ")
	}
	if _, err := f.AppendRecords([]Record{{Offset: 12, Publisher: string(make([]byte, MaxPublisherBytes+1))}}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized publisher: %v", err)
	}
}
