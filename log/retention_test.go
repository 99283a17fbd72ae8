package log

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestRetentionBytes(t *testing.T) {
	o := testOptions(t)
	o.SegmentBytes = 10 * recSize
	o.Retention.MaxBytes = 35 * recSize
	l := mustOpen(t, o)
	appendN(t, l, 100, 100) // rolls apply retention as they go
	if l.StartOffset() != 60 {
		t.Fatalf("after the last roll start is %d", l.StartOffset())
	}
	if n, err := l.ApplyRetention(); n != 1 || err != nil {
		t.Fatalf("apply: %d %v", n, err)
	}
	st := l.Stats()
	if st.Bytes > int64(o.Retention.MaxBytes) || l.StartOffset() != 70 {
		t.Fatalf("bytes %d start %d segments %d", st.Bytes, l.StartOffset(), st.Segments)
	}
	_, _, err := l.Read(3, 100, 0, 0)
	var ce *CursorError
	if !errors.As(err, &ce) || !ce.TooOld || ce.Available != 70 || ce.Requested != 3 {
		t.Fatalf("read below start: %v", err)
	}
	if got := readAll(t, l, 70); len(got) != 30 {
		t.Fatalf("read %d", len(got))
	}
	// Reopen keeps the new start.
	l.Close()
	l2 := mustOpen(t, o)
	if l2.StartOffset() != 70 || l2.NextOffset() != 100 {
		t.Fatalf("reopened %d..%d", l2.StartOffset(), l2.NextOffset())
	}
}

func TestRetentionNeverDeletesActive(t *testing.T) {
	o := testOptions(t)
	o.SegmentBytes = 10 * recSize
	o.Retention.MaxBytes = 1
	l := mustOpen(t, o)
	appendN(t, l, 25, 100)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Segments != 1 || l.StartOffset() != 20 {
		t.Fatalf("segments %d start %d", st.Segments, l.StartOffset())
	}
}

func TestRetentionAge(t *testing.T) {
	clk := newClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := testOptions(t)
	o.SegmentBytes = 10 * recSize
	o.Now = clk.Now
	o.Retention.MaxAge = time.Hour
	l := mustOpen(t, o)
	appendN(t, l, 20, 100) // segments 0 and 10, written at t0
	clk.Add(30 * time.Minute)
	appendN(t, l, 12, 100) // segment 20 (t0+30m), active 30
	if n, err := l.ApplyRetention(); n != 0 || err != nil {
		t.Fatalf("nothing old yet: %d %v", n, err)
	}
	clk.Add(45 * time.Minute) // t0 segments now 75m old
	if n, err := l.ApplyRetention(); n != 2 || err != nil || l.StartOffset() != 20 {
		t.Fatalf("deleted %d (%v), start %d", n, err, l.StartOffset())
	}
	clk.Add(10 * time.Hour) // everything is old, the active segment stays
	if n, _ := l.ApplyRetention(); n != 1 || l.StartOffset() != 30 || l.Stats().Segments != 1 {
		t.Fatalf("deleted %d start %d", n, l.StartOffset())
	}
}

func TestSetRetentionLive(t *testing.T) {
	o := testOptions(t)
	o.SegmentBytes = 10 * recSize
	l := mustOpen(t, o)
	appendN(t, l, 55, 100)
	if n, _ := l.ApplyRetention(); n != 0 {
		t.Fatalf("unbounded log deleted %d", n)
	}
	l.SetRetention(Retention{MaxBytes: 30 * recSize})
	if n, err := l.ApplyRetention(); n != 3 || err != nil || l.StartOffset() != 30 {
		t.Fatalf("deleted %d (%v), start %d", n, err, l.StartOffset())
	}
}

// TestReadDuringRetention: a reader racing retention sees records or
// TooOld, never anything else.
func TestReadDuringRetention(t *testing.T) {
	o := testOptions(t)
	o.SegmentBytes = 4 * recSize
	o.Retention.MaxBytes = 8 * recSize
	l := mustOpen(t, o)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		defer close(stop)
		appendN(t, l, 400, 100)
	})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				from := l.StartOffset()
				recs, _, err := l.Read(from, ^uint64(0), 0, 0)
				var ce *CursorError
				if err != nil && !(errors.As(err, &ce) && ce.TooOld) {
					t.Error(err)
					return
				}
				for i, r := range recs {
					if r.Offset != from+uint64(i) {
						t.Errorf("offset %d at %d", r.Offset, i)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

func TestOpenRemovesOrphanIndexes(t *testing.T) {
	o := buildLog(t, 25, 10)
	os.Remove(segPath(o, 0)) // as if a crash hit retention after the .log went
	l := mustOpen(t, o)
	if l.StartOffset() != 10 {
		t.Fatalf("start %d", l.StartOffset())
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if _, err := os.Stat(filepath.Join(o.Dir, "00000000000000000000"+suffix)); !os.IsNotExist(err) {
			t.Fatalf("orphan %s kept: %v", suffix, err)
		}
	}
}

// TestDropBeforeKeepsSegmentsHoldingTheOffset: only sealed segments wholly
// below the offset go, the offsets of the rest are unchanged, and a read
// below the new start is too old.
func TestDropBeforeKeepsSegmentsHoldingTheOffset(t *testing.T) {
	o := testOptions(t)
	o.SegmentBytes = 10 * recSize
	l := mustOpen(t, o)
	want := appendN(t, l, 45, 100) // segments at 0, 10, 20, 30, 40
	if n, err := l.DropBefore(25); n != 2 || err != nil {
		t.Fatalf("drop before 25: %d %v", n, err)
	}
	if l.StartOffset() != 20 {
		t.Fatalf("start %d, want 20 (the segment holding 25 stays)", l.StartOffset())
	}
	got := readAll(t, l, 20)
	for i, r := range got {
		if r.Offset != uint64(20+i) || string(r.Payload) != string(want[20+i]) {
			t.Fatalf("record %d: offset %d", i, r.Offset)
		}
	}
	var ce *CursorError
	if _, err := l.ReadRecord(19); !errors.As(err, &ce) || !ce.TooOld {
		t.Fatalf("read of a dropped offset: %v", err)
	}
	if n, err := l.DropBefore(1000); n != 2 || err != nil || l.StartOffset() != 40 {
		t.Fatalf("drop before the tail: %d %v, start %d (the active segment stays)", n, err, l.StartOffset())
	}
	l.Close()
	if l2 := mustOpen(t, o); l2.StartOffset() != 40 || l2.NextOffset() != 45 {
		t.Fatalf("reopened %d..%d", l2.StartOffset(), l2.NextOffset())
	}
}

// TestReadRecordMatchesRead: a point read returns what a range read
// returns at every offset, and past the tail a cursor error.
func TestReadRecordMatchesRead(t *testing.T) {
	o := testOptions(t)
	o.SegmentBytes = 20 * recSize
	l := mustOpen(t, o)
	want := appendN(t, l, 50, 100)
	for i := range want {
		r, err := l.ReadRecord(uint64(i))
		if err != nil || r.Offset != uint64(i) || string(r.Payload) != string(want[i]) {
			t.Fatalf("offset %d: %+v %v", i, r.Offset, err)
		}
	}
	var ce *CursorError
	if _, err := l.ReadRecord(50); !errors.As(err, &ce) || ce.TooOld {
		t.Fatalf("read past the tail: %v", err)
	}
}

func TestRetentionKeepsEverythingFromTheFloor(t *testing.T) {
	o := testOptions(t)
	o.SegmentBytes = 10 * recSize
	o.Retention.MaxBytes = 1
	l := mustOpen(t, o)
	l.SetRetentionFloor(15) // set before the rolls, which apply retention
	appendN(t, l, 45, 100)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	// Segments [0,10) lies wholly below the floor; [10,20) holds 15.
	if l.StartOffset() != 10 {
		t.Fatalf("start %d, want 10", l.StartOffset())
	}
	l.SetRetentionFloor(40)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 40 {
		t.Fatalf("start %d after raising the floor, want 40", l.StartOffset())
	}
	l.SetRetentionFloor(NoRetentionFloor)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 40 {
		t.Fatalf("the active segment went: start %d", l.StartOffset())
	}
}
