package log

import (
	"bytes"
	"errors"
	"sync"
	"testing"
)

func TestParseFsyncPolicy(t *testing.T) {
	for _, p := range []FsyncPolicy{FsyncPeriodic, FsyncAlways, FsyncNone} {
		got, err := ParseFsyncPolicy(p.String())
		if err != nil || got != p {
			t.Fatalf("ParseFsyncPolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := ParseFsyncPolicy("sometimes"); err == nil {
		t.Fatal("want an error for an unknown policy")
	}
}

func TestOptionsValidate(t *testing.T) {
	err := Options{SegmentBytes: -1, IndexIntervalBytes: -1, Fsync: 9}.validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"Dir", "SegmentBytes", "IndexIntervalBytes", "Fsync"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	l := mustOpen(t, testOptions(t))
	a, err := l.AppendAt([][]byte{[]byte("a"), {}, []byte("ccc")}, "alice", 42)
	if err != nil {
		t.Fatal(err)
	}
	if a.Base != 0 || a.Count != 3 || a.TimeMicros != 42 {
		t.Fatalf("appended %+v", a)
	}
	if _, err := l.AppendAt([][]byte{[]byte("d")}, "", 43); err != nil {
		t.Fatal(err)
	}
	recs, next, err := l.Read(0, 100, 0, 0)
	if err != nil || next != 4 || len(recs) != 4 {
		t.Fatalf("read: %d recs next %d err %v", len(recs), next, err)
	}
	want := []Record{{Offset: 0, TimeMicros: 42, Publisher: "alice", Payload: []byte("a")},
		{Offset: 1, TimeMicros: 42, Publisher: "alice", Payload: []byte{}},
		{Offset: 2, TimeMicros: 42, Publisher: "alice", Payload: []byte("ccc")},
		{Offset: 3, TimeMicros: 43, Payload: []byte("d")}}
	for i, r := range recs {
		w := want[i]
		if r.Offset != w.Offset || r.TimeMicros != w.TimeMicros || r.Publisher != w.Publisher || !bytes.Equal(r.Payload, w.Payload) ||
			r.Kind != KindData || r.Generation != 0 || r.Version != RecordVersion {
			t.Errorf("record %d = %+v, want %+v", i, r, w)
		}
	}
	if err := l.Wait(t.Context(), a); err != nil {
		t.Fatal(err)
	}
}

func TestAppendLimits(t *testing.T) {
	l := mustOpen(t, testOptions(t))
	if _, err := l.Append([][]byte{nil}, string(make([]byte, MaxPublisherBytes+1))); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("long publisher: %v", err)
	}
	if _, err := l.Append([][]byte{make([]byte, MaxRecordBytes)}, ""); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("huge record: %v", err)
	}
	a, err := l.Append(nil, "")
	if err != nil || a.Count != 0 || l.NextOffset() != 0 {
		t.Fatalf("empty append: %+v %v", a, err)
	}
}

func TestRollAndReopen(t *testing.T) {
	o := testOptions(t)
	l, _, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	want := appendN(t, l, 300, 100)
	// One batch larger than a segment goes into a segment of its own.
	big := bytes.Repeat([]byte("B"), 3*int(o.SegmentBytes))
	if _, err := l.Append([][]byte{big}, "pub"); err != nil {
		t.Fatal(err)
	}
	want = append(want, big)
	want = append(want, appendN(t, l, 5, 100)...)
	if st := l.Stats(); st.Segments < 10 {
		t.Fatalf("only %d segments", st.Segments)
	}
	if err := l.check(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([][]byte{nil}, ""); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}

	l2, rep, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if rep.Verdict != VerdictOpen || len(rep.RebuiltIndexes) != 0 || rep.NextOffset != uint64(len(want)) {
		t.Fatalf("report %+v", rep)
	}
	for _, s := range rep.Segments {
		if !s.RecordsOK || !s.IndexOK || !s.TimeIndexOK {
			t.Fatalf("segment %+v", s)
		}
	}
	want = append(want, appendN(t, l2, 10, 100)...)
	got := readAll(t, l2, 0)
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		if r.Offset != uint64(i) || !bytes.Equal(r.Payload, want[i]) || r.Publisher != "pub" {
			t.Fatalf("record %d: offset %d publisher %q", i, r.Offset, r.Publisher)
		}
	}
	if err := l2.check(); err != nil {
		t.Fatal(err)
	}
}

func TestReadPaging(t *testing.T) {
	l := mustOpen(t, testOptions(t))
	appendN(t, l, 100, 100) // ~126 bytes each: several segments

	recs, next, err := l.Read(10, 1000, 5, 0)
	if err != nil || len(recs) != 5 || next != 15 || recs[0].Offset != 10 {
		t.Fatalf("maxRecords: %d next %d err %v", len(recs), next, err)
	}
	recs, next, _ = l.Read(10, 1000, 0, 350)
	if len(recs) != 3 || next != 13 {
		t.Fatalf("maxBytes: %d next %d", len(recs), next)
	}
	recs, next, _ = l.Read(10, 1000, 0, 1) // first record always returned
	if len(recs) != 1 || next != 11 {
		t.Fatalf("tiny maxBytes: %d next %d", len(recs), next)
	}
	recs, next, _ = l.Read(20, 25, 0, 0)
	if len(recs) != 5 || next != 25 {
		t.Fatalf("end bound: %d next %d", len(recs), next)
	}
	recs, next, _ = l.Read(0, 1000, 0, 0) // crosses every segment boundary
	for i, r := range recs {
		if r.Offset != uint64(i) || !bytes.Equal(r.Payload, payload(i, 100)) {
			t.Fatalf("record %d has offset %d", i, r.Offset)
		}
	}
	if len(recs) != 100 || next != 100 {
		t.Fatalf("all: %d next %d", len(recs), next)
	}
	recs, next, err = l.Read(100, 1000, 0, 0)
	if err != nil || len(recs) != 0 || next != 100 {
		t.Fatalf("at end: %d %d %v", len(recs), next, err)
	}
	_, _, err = l.Read(101, 1000, 0, 0)
	var ce *CursorError
	if !errors.As(err, &ce) || ce.TooOld || ce.Available != 100 || ce.Requested != 101 {
		t.Fatalf("future read: %v", err)
	}
}

func TestConcurrentReadDuringAppend(t *testing.T) {
	l := mustOpen(t, testOptions(t))
	const total = 1500
	var wg sync.WaitGroup
	errC := make(chan error, 4)
	wg.Go(func() {
		for i := 0; i < total; i += 3 {
			if _, err := l.Append([][]byte{payload(i, 60), payload(i+1, 60), payload(i+2, 60)}, "w"); err != nil {
				errC <- err
				return
			}
		}
	})
	for range 3 {
		wg.Go(func() {
			var from uint64
			for from < total {
				recs, next, err := l.Read(from, total, 50, 0)
				if err != nil {
					errC <- err
					return
				}
				for _, r := range recs {
					if r.Offset != from || !bytes.Equal(r.Payload, payload(int(from), 60)) {
						errC <- errors.New("bad record")
						return
					}
					from++
				}
				if next != from {
					errC <- errors.New("next out of step")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errC)
	for err := range errC {
		t.Fatal(err)
	}
}

func TestOpenLocksTheDirectory(t *testing.T) {
	dir := t.TempDir()
	l, _, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(Options{Dir: dir}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open of an open directory: %v, want ErrLocked", err)
	}
	if _, err := Inspect(dir); err != nil {
		t.Fatalf("Inspect of an open log: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	again, _, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	again.Close()
}
