package log

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

const recSize = recordHeader + 3 + 100 // publisher "pub", 100-byte payload

// buildLog writes n records of recSize bytes in segments of perSeg
// records, closes the log and returns its options.
func buildLog(t *testing.T, n, perSeg int) Options {
	t.Helper()
	o := testOptions(t)
	o.SegmentBytes = int64(perSeg * recSize)
	l, _, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, n, 100)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return o
}

func segPath(o Options, base uint64) string { return filepath.Join(o.Dir, segmentName(base)) }

func flipBit(t *testing.T, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, pos); err != nil {
		t.Fatal(err)
	}
}

// inspectUnchanged runs Inspect and checks it changed no file.
func inspectUnchanged(t *testing.T, dir string) *Report {
	t.Helper()
	before := dirDigest(t, dir)
	rep, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if dirDigest(t, dir) != before {
		t.Fatal("Inspect modified files")
	}
	return rep
}

func TestRecoverTornMidRecord(t *testing.T) {
	o := buildLog(t, 25, 10) // segments 0, 10, 20 (5 records)
	last := segPath(o, 20)
	if err := os.Truncate(last, 4*recSize+30); err != nil {
		t.Fatal(err)
	}
	rep := inspectUnchanged(t, o.Dir)
	want := Truncation{Segment: segmentName(20), Position: 4 * recSize, Bytes: 30, Reason: "partial record"}
	if rep.Verdict != VerdictTruncate || rep.Truncated == nil || *rep.Truncated != want || rep.NextOffset != 24 {
		t.Fatalf("inspect: %+v truncated %+v", rep, rep.Truncated)
	}
	l, rep2, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if rep2.Verdict != VerdictTruncate || *rep2.Truncated != want || !l.Stats().TruncatedAtOpen {
		t.Fatalf("open: %+v", rep2)
	}
	if fi, _ := os.Stat(last); fi.Size() != 4*recSize {
		t.Fatalf("size after open %d", fi.Size())
	}
	if got := readAll(t, l, 0); len(got) != 24 || l.NextOffset() != 24 {
		t.Fatalf("read %d records, next %d", len(got), l.NextOffset())
	}
	if a, err := l.Append([][]byte{[]byte("again")}, ""); err != nil || a.Base != 24 {
		t.Fatalf("append after recovery: %+v %v", a, err)
	}
}

func TestRecoverGarbageTail(t *testing.T) {
	o := buildLog(t, 25, 10)
	f, _ := os.OpenFile(segPath(o, 20), os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte("this is not a record at all, just trailing junk bytes........"))
	f.Close()
	rep := inspectUnchanged(t, o.Dir)
	if rep.Verdict != VerdictTruncate || rep.Truncated.Position != 5*recSize {
		t.Fatalf("inspect: %+v", rep)
	}
	l, _, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if len(readAll(t, l, 0)) != 25 {
		t.Fatal("records lost")
	}
}

func TestRecoverBadLastRecordCRC(t *testing.T) {
	o := buildLog(t, 25, 10)
	flipBit(t, segPath(o, 20), 4*recSize+recordHeader+50) // payload of the very last record
	rep := inspectUnchanged(t, o.Dir)
	if rep.Verdict != VerdictTruncate || rep.Truncated.Reason != "crc mismatch" || rep.Truncated.Position != 4*recSize {
		t.Fatalf("inspect: %+v %+v", rep, rep.Truncated)
	}
}

func TestRecoverRefusesSealedDamage(t *testing.T) {
	o := buildLog(t, 25, 10)
	flipBit(t, segPath(o, 10), 3*recSize+recordHeader+7)
	checkRefused(t, o, segmentName(10), 3*recSize, 12, "crc mismatch")
}

func TestRecoverRefusesDamageBeforeTail(t *testing.T) {
	o := buildLog(t, 25, 10)
	flipBit(t, segPath(o, 20), 2*recSize+recordHeader+7) // records 23, 24 follow
	checkRefused(t, o, segmentName(20), 2*recSize, 21, "crc mismatch")
}

func TestRecoverRefusesBadLengthBeforeTail(t *testing.T) {
	o := buildLog(t, 25, 10)
	flipBit(t, segPath(o, 20), recSize+1) // length field of record 21
	checkRefused(t, o, segmentName(20), recSize, 20, "")
}

func TestRecoverRefusesMissingSegment(t *testing.T) {
	o := buildLog(t, 25, 10)
	os.Remove(segPath(o, 10))
	checkRefused(t, o, segmentName(20), 0, 9, "segment base out of sequence")
}

func checkRefused(t *testing.T, o Options, seg string, pos int64, lastGood uint64, reason string) {
	t.Helper()
	rep := inspectUnchanged(t, o.Dir)
	c := rep.Corrupt
	if rep.Verdict != VerdictRefuse || c == nil || c.Segment != seg || c.Position != pos || c.LastGoodOffset != lastGood || (reason != "" && c.Reason != reason) {
		t.Fatalf("inspect: %+v corrupt %+v", rep, c)
	}
	before := dirDigest(t, o.Dir)
	l, rep2, err := Open(o)
	var ce *CorruptionError
	if l != nil || !errors.As(err, &ce) || *ce != *c || rep2.Verdict != VerdictRefuse {
		t.Fatalf("open: %v %v", err, rep2)
	}
	if dirDigest(t, o.Dir) != before {
		t.Fatal("Open modified files of a refused log")
	}
	t.Log(err)
}

func TestRecoverRebuildsIndexes(t *testing.T) {
	o := buildLog(t, 25, 10)
	os.Remove(filepath.Join(o.Dir, "00000000000000000000.index"))
	os.WriteFile(filepath.Join(o.Dir, "00000000000000000010.timeindex"), []byte("garbage!garbage!"), 0o644)
	// Consistent in shape, but pointing at a position that starts no record.
	os.WriteFile(filepath.Join(o.Dir, "00000000000000000020.index"), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9}, 0o644)
	rep := inspectUnchanged(t, o.Dir)
	if rep.Verdict != VerdictOpen {
		t.Fatalf("verdict %v", rep.Verdict)
	}
	s := rep.Segments
	if s[0].IndexOK || !s[0].TimeIndexOK || !s[1].IndexOK || s[1].TimeIndexOK || s[2].IndexOK || !s[2].TimeIndexOK {
		t.Fatalf("segments %+v", s)
	}
	l, rep2, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep2.RebuiltIndexes) != 3 {
		t.Fatalf("rebuilt %v", rep2.RebuiltIndexes)
	}
	if len(readAll(t, l, 0)) != 25 {
		t.Fatal("records lost")
	}
	l.Close()
	for _, s := range inspectUnchanged(t, o.Dir).Segments {
		if !s.IndexOK || !s.TimeIndexOK {
			t.Fatalf("after rebuild: %+v", s)
		}
	}
}

func TestOpenEmptyDir(t *testing.T) {
	o := testOptions(t)
	l := mustOpen(t, o)
	if l.StartOffset() != 0 || l.NextOffset() != 0 {
		t.Fatal("offsets of an empty log")
	}
	if _, err := os.Stat(segPath(o, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(filepath.Join(o.Dir, "missing")); err == nil {
		t.Fatal("Inspect of a missing dir should fail")
	}
}

func TestReadDetectsDamage(t *testing.T) {
	o := buildLog(t, 25, 10)
	l, _, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	flipBit(t, segPath(o, 10), 2*recSize+recordHeader+5)
	if got, _, err := l.Read(0, 12, 0, 0); err != nil || len(got) != 12 {
		t.Fatalf("read before the damage: %d %v", len(got), err)
	}
	recs, next, err := l.Read(11, 20, 0, 0)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Position != 2*recSize || ce.Segment != segmentName(10) || len(recs) != 1 || next != 12 {
		t.Fatalf("read across damage: %d recs next %d err %v", len(recs), next, err)
	}
}
