package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

const (
	memDir     = "/mem/log"
	memRecSize = recordHeader + 1 + 30 // publisher "p", 30-byte payload
)

// memOptions are options for a log on mem with perSeg records a segment.
func memOptions(fsys FS, perSeg int) Options {
	return Options{Dir: memDir, SegmentBytes: int64(perSeg * memRecSize), IndexIntervalBytes: 2 * memRecSize,
		Fsync: FsyncNone, Logger: quietLogger(), FS: fsys}
}

// appendMixed appends n records one by one, with varied kinds and
// generations, and returns what they should read back as.
func appendMixed(t testing.TB, l *Log, n int) []Record {
	t.Helper()
	var out []Record
	for range n {
		off := l.NextOffset()
		e := Entry{Kind: Kind(off % 3), Generation: off / 5, Payload: payload(int(off), 30)}
		if _, err := l.AppendEntries([]Entry{e}, "p", 1000+off); err != nil {
			t.Fatalf("append at %d: %v", off, err)
		}
		out = append(out, Record{Offset: off, TimeMicros: 1000 + off, Publisher: "p", Payload: e.Payload,
			Kind: e.Kind, Generation: e.Generation, Version: RecordVersion})
	}
	return out
}

// buildMemLog writes n records, perSeg a segment, on a fresh memFS.
func buildMemLog(t testing.TB, n, perSeg int) (*memFS, []Record) {
	t.Helper()
	mem := newMemFS()
	l, _, err := Open(memOptions(mem, perSeg))
	if err != nil {
		t.Fatal(err)
	}
	recs := appendMixed(t, l, n)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return mem, recs
}

// sameRecords reports whether got equals want field by field.
func sameRecords(got, want []Record) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.TimeMicros != w.TimeMicros || g.Publisher != w.Publisher ||
			!bytes.Equal(g.Payload, w.Payload) || g.Kind != w.Kind || g.Generation != w.Generation {
			return false
		}
	}
	return true
}

// rebootAndRead opens the files a crash left, as Inspect predicts, checks
// the log's invariants, closes it and checks it then inspects clean with
// sound indexes. It returns the records.
func rebootAndRead(t *testing.T, disk *memFS, perSeg int) []Record {
	t.Helper()
	rep, err := inspectFS(disk, memDir)
	if err != nil || rep.Verdict == VerdictRefuse {
		t.Fatalf("inspect after the crash: %v %+v", err, rep)
	}
	l, rep2, err := Open(memOptions(disk, perSeg))
	if err != nil {
		t.Fatalf("open after the crash: %v %+v", err, rep2)
	}
	if rep2.NextOffset != rep.NextOffset || l.NextOffset() != rep.NextOffset {
		t.Fatalf("inspect predicted next %d, open found %d (log %d)", rep.NextOffset, rep2.NextOffset, l.NextOffset())
	}
	if err := l.check(); err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, l, l.StartOffset())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep3, err := inspectFS(disk, memDir)
	if err != nil || rep3.Verdict != VerdictOpen || rep3.Pending != nil {
		t.Fatalf("inspect after reopening: %v %+v", err, rep3)
	}
	for _, s := range rep3.Segments {
		if !s.IndexOK || !s.TimeIndexOK {
			t.Fatalf("stale index after reopening: %+v", s)
		}
	}
	if _, valid, present := readMarker(disk, memDir); valid || present {
		t.Fatal("the truncation marker outlived Open")
	}
	return recs
}

func TestTruncateTo(t *testing.T) {
	for _, to := range []uint64{17, 12, 10, 5, 3, 0, 18} {
		t.Run(fmt.Sprint(to), func(t *testing.T) {
			mem, want := buildMemLog(t, 18, 5) // segments 0, 5, 10, 15
			o := memOptions(mem, 5)
			l := mustOpen(t, o)
			if err := l.TruncateTo(to); err != nil {
				t.Fatal(err)
			}
			if err := l.check(); err != nil {
				t.Fatal(err)
			}
			if l.NextOffset() != to || l.DurableOffset() > to || l.SyncedOffset() > to {
				t.Fatalf("next %d durable %d synced %d", l.NextOffset(), l.DurableOffset(), l.SyncedOffset())
			}
			if got := readAll(t, l, 0); !sameRecords(got, want[:to]) {
				t.Fatalf("after truncation read %d records, want %d", len(got), to)
			}
			if _, _, err := l.Read(to+1, 100, 0, 0); err == nil {
				t.Fatal("read past the cut")
			}
			wantSegs := max(1, (int(to)+4)/5)
			if st := l.Stats(); st.Segments != wantSegs {
				t.Fatalf("%d segments, want %d", st.Segments, wantSegs)
			}
			more := appendMixed(t, l, 7) // rolls from the (possibly sealed) cut segment
			if got := readAll(t, l, 0); !sameRecords(got, append(want[:to:to], more...)) {
				t.Fatal("appends after the truncation read back wrong")
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if got := rebootAndRead(t, mem, 5); !sameRecords(got, append(want[:to:to], more...)) {
				t.Fatal("reopened log differs")
			}
		})
	}
}

func TestTruncateToOutOfRange(t *testing.T) {
	o := testOptions(t)
	o.SegmentBytes = 3 * recSize
	o.Retention.MaxBytes = 6 * recSize
	l := mustOpen(t, o)
	appendN(t, l, 12, 100)
	start, next := l.StartOffset(), l.NextOffset()
	if start == 0 {
		t.Fatal("retention kept everything; the test needs a start above 0")
	}
	for _, off := range []uint64{start - 1, next + 1} {
		var re *RangeError
		if err := l.TruncateTo(off); !errors.As(err, &re) || re.Start != start || re.Next != next {
			t.Fatalf("truncate to %d: %v", off, err)
		}
	}
	if err := l.TruncateTo(next); err != nil || l.NextOffset() != next {
		t.Fatalf("truncate to next: %v (next %d)", err, l.NextOffset())
	}
	if err := l.TruncateTo(start); err != nil || l.NextOffset() != start || l.StartOffset() != start {
		t.Fatalf("truncate to start: %v (start %d next %d)", err, l.StartOffset(), l.NextOffset())
	}
}

// TestTruncateFailsPendingWait: a Wait for records a truncation removed
// before an fsync covered them fails with ErrTruncated; one for records
// below the cut still succeeds.
func TestTruncateFailsPendingWait(t *testing.T) {
	o := testOptions(t)
	o.Fsync = FsyncAlways
	fs := newFaultFS()
	o.FS = fs
	l := mustOpen(t, o)
	kept, err := l.Append([][]byte{[]byte("kept")}, "")
	if err != nil {
		t.Fatal(err)
	}
	gate, enter := make(chan struct{}), make(chan struct{}, 1)
	fs.mu.Lock()
	fs.syncGate, fs.syncEnter = gate, enter
	fs.mu.Unlock()
	cut, err := l.Append([][]byte{[]byte("cut")}, "")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Wait(context.Background(), cut) }()
	<-enter // the flusher's fsync for cut has started, held on the gate
	fs.mu.Lock()
	fs.syncGate, fs.syncEnter = nil, nil
	fs.mu.Unlock()
	if err := l.TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrTruncated) {
		t.Fatalf("wait for a truncated append: %v", err)
	}
	close(gate)
	if err := l.Wait(t.Context(), kept); err != nil {
		t.Fatalf("wait for a kept append: %v", err)
	}
	again, err := l.Append([][]byte{[]byte("again")}, "")
	if err != nil || again.Base != 1 {
		t.Fatalf("append after the cut: %+v %v", again, err)
	}
	if err := l.Wait(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(t.Context(), cut); !errors.Is(err, ErrTruncated) {
		t.Fatalf("a stale Appended for the cut records: %v", err)
	}
}

// TestTruncateCrashAtEveryStep stops the machine at every file operation
// of TruncateTo in turn (and, when that left a marker, at every step of
// the Open that finishes it): the files always reopen as the log before
// the truncation or the log after it, never a mix, a hole or a stale index.
func TestTruncateCrashAtEveryStep(t *testing.T) {
	for _, to := range []uint64{17, 12, 10, 6, 0} {
		t.Run(fmt.Sprint(to), func(t *testing.T) {
			befores, afters := 0, 0
			for step := 0; ; step++ {
				mem, want := buildMemLog(t, 18, 5)
				cfs := &crashFS{FS: mem}
				l, _, err := Open(memOptions(cfs, 5))
				if err != nil {
					t.Fatal(err)
				}
				cfs.arm(step)
				terr := l.TruncateTo(to)
				crashed := cfs.crashed()
				disk := mem.clone()
				l.Close()
				if !crashed {
					if terr != nil {
						t.Fatalf("truncate without a crash: %v", terr)
					}
					if got := rebootAndRead(t, disk, 5); !sameRecords(got, want[:to]) {
						t.Fatal("completed truncation reads back wrong")
					}
					t.Logf("truncate to %d: %d crash points, %d reopened as before, %d as after", to, step, befores, afters)
					if befores == 0 || afters == 0 {
						t.Fatalf("%d crash points: %d before, %d after; both outcomes should occur", step, befores, afters)
					}
					return
				}
				if _, valid, _ := readMarker(disk, memDir); valid {
					crashWhileFinishing(t, disk, want[:to])
				}
				switch got := rebootAndRead(t, disk, 5); {
				case sameRecords(got, want):
					befores++
				case sameRecords(got, want[:to]):
					afters++
				default:
					t.Fatalf("crash at step %d: reopened with %d records, neither before (%d) nor after (%d)", step, len(got), len(want), to)
				}
			}
		})
	}
}

// crashWhileFinishing crashes the Open that finishes a pending truncation
// at every step; each time, a later Open still ends with exactly want.
func crashWhileFinishing(t *testing.T, disk *memFS, want []Record) {
	t.Helper()
	for step := 0; ; step++ {
		again := disk.clone()
		cfs := &crashFS{FS: again}
		cfs.arm(step)
		l, _, err := Open(memOptions(cfs, 5))
		if err == nil {
			l.Close()
		}
		crashed := cfs.crashed()
		if got := rebootAndRead(t, again, 5); !sameRecords(got, want) {
			t.Fatalf("open finishing a truncation crashed at step %d: reopened with %d records, want %d", step, len(got), len(want))
		}
		if !crashed {
			return
		}
	}
}

// TestTruncateTornMarker: a marker torn while being written (the crash
// came before any record was touched) is ignored and removed.
func TestTruncateTornMarker(t *testing.T) {
	mem, want := buildMemLog(t, 8, 5)
	mem.put(filepath.Join(memDir, markerName), encodeMarker(3)[:9])
	rep, err := inspectFS(mem, memDir)
	if err != nil || rep.Pending != nil || rep.NextOffset != 8 {
		t.Fatalf("inspect with a torn marker: %v %+v", err, rep)
	}
	if got := rebootAndRead(t, mem, 5); !sameRecords(got, want) {
		t.Fatal("a torn marker cut records")
	}
}

// TestTruncatePendingInspect: Inspect reports an interrupted truncation,
// with the offsets Open will end with, and changes nothing.
func TestTruncatePendingInspect(t *testing.T) {
	mem, want := buildMemLog(t, 18, 5)
	mem.put(filepath.Join(memDir, markerName), encodeMarker(7))
	before := mem.digest()
	rep, err := inspectFS(mem, memDir)
	if err != nil || mem.digest() != before {
		t.Fatalf("inspect: %v (changed files: %v)", err, mem.digest() != before)
	}
	p := rep.Pending
	if p == nil || p.To != 7 || rep.NextOffset != 7 || len(p.Dropped) != 2 || p.Dropped[0] != segmentName(10) {
		t.Fatalf("pending %+v, report %+v", p, rep)
	}
	if got := rebootAndRead(t, mem, 5); !sameRecords(got, want[:7]) {
		t.Fatal("open did not finish the truncation")
	}
}

// TestTruncateWhileReading: reads racing truncations and appends see
// contiguous records and no error.
func TestTruncateWhileReading(t *testing.T) {
	mem, _ := buildMemLog(t, 30, 5)
	l := mustOpen(t, memOptions(mem, 5))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			recs, next, err := l.Read(0, ^uint64(0), 0, 0)
			if err != nil {
				t.Errorf("read: %v", err)
				return
			}
			for i, r := range recs {
				if r.Offset != uint64(i) || !bytes.Equal(r.Payload, payload(i, 30)) {
					t.Errorf("record %d: offset %d", i, r.Offset)
					return
				}
			}
			if next != uint64(len(recs)) {
				t.Errorf("next %d after %d records", next, len(recs))
				return
			}
		}
	}()
	for i := range 40 {
		if err := l.TruncateTo(l.NextOffset() - uint64(1+i%12)); err != nil {
			t.Fatal(err)
		}
		appendMixed(t, l, 1+i%12)
	}
	close(stop)
	wg.Wait()
}

// TestTruncateMarkerWithoutSegments: a marker in a directory with no
// segment (never left by TruncateTo, which keeps a segment) is removed by
// Open rather than left to cut later appends.
func TestTruncateMarkerWithoutSegments(t *testing.T) {
	mem := newMemFS()
	mem.put(filepath.Join(memDir, markerName), encodeMarker(0))
	l := mustOpen(t, memOptions(mem, 5))
	if _, valid, present := readMarker(mem, memDir); valid || present {
		t.Fatal("the marker survived Open")
	}
	appendMixed(t, l, 3)
}

// TestScanUpToMatchesFullScan checks the fast path of a truncation's
// rescan (resume at the last index entry below the cut) against reading
// the segment from its start, for every cut in a segment whose record
// times go back and forth.
func TestScanUpToMatchesFullScan(t *testing.T) {
	o := memOptions(newMemFS(), 1000)
	o.IndexIntervalBytes = 3 * memRecSize
	l := mustOpen(t, o)
	for i := range 40 {
		at := uint64(1000 + (i*7)%13) // not monotone
		if _, err := l.AppendEntries([]Entry{{Payload: payload(i, 30)}}, "p", at); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.active()
	naive := *s
	naive.offIdx, naive.timeIdx = nil, nil // no index: read from the start
	for off := s.base; off <= s.next; off++ {
		fast, err := scanUpTo(s, off, o.IndexIntervalBytes)
		if err != nil {
			t.Fatal(err)
		}
		want, err := scanUpTo(&naive, off, o.IndexIntervalBytes)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", *fast) != fmt.Sprintf("%+v", *want) {
			t.Fatalf("cut at %d:\nfast  %+v\nnaive %+v", off, *fast, *want)
		}
	}
}
