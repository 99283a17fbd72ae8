package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// copyFixture copies the segment and index files of testdata/name into a
// fresh directory.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", name, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestOpenOldFormatFixture opens a directory the previous release wrote
// (testdata/v0): every record reads back as version 0, KindData,
// generation 0; appends go on in the new layout in the same active
// segment; and the mixed directory reopens and inspects clean.
func TestOpenOldFormatFixture(t *testing.T) {
	dir := copyFixture(t, "v0")
	rep := inspectUnchanged(t, dir)
	if rep.Verdict != VerdictOpen || rep.NextOffset != 12 || len(rep.Segments) != 2 {
		t.Fatalf("inspect of the old directory: %+v", rep)
	}
	for _, s := range rep.Segments {
		if !s.RecordsOK || !s.IndexOK || !s.TimeIndexOK || s.Versions[0] != s.Records || s.Kinds[KindData] != s.Records {
			t.Fatalf("old segment %+v", s)
		}
	}
	o := Options{Dir: dir, SegmentBytes: 300, IndexIntervalBytes: 100, Fsync: FsyncNone, Logger: quietLogger()}
	l := mustOpen(t, o)
	first := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixMicro()
	recs := readAll(t, l, 0)
	if len(recs) != 12 {
		t.Fatalf("read %d old records", len(recs))
	}
	for i, r := range recs {
		pub := ""
		if i%2 == 0 {
			pub = "svc"
		}
		if r.Offset != uint64(i) || string(r.Payload) != fmt.Sprintf("old-%02d", i) || r.Publisher != pub ||
			r.TimeMicros != uint64(first+int64(i+1)*1000) || r.Version != 0 || r.Kind != KindData || r.Generation != 0 {
			t.Fatalf("old record %d = %+v", i, r)
		}
	}
	a, err := l.AppendEntries([]Entry{{Kind: KindCachePut, Generation: 3, Payload: []byte("new")}}, "svc", 7)
	if err != nil || a.Base != 12 {
		t.Fatalf("append after the old records: %+v %v", a, err)
	}
	if st := l.Stats(); st.Segments != 2 {
		t.Fatalf("the new record went to a new segment (%d segments)", st.Segments)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := mustOpen(t, o)
	recs = readAll(t, l2, 0)
	last := recs[len(recs)-1]
	if len(recs) != 13 || recs[11].Version != 0 || last.Version != RecordVersion || last.Kind != KindCachePut ||
		last.Generation != 3 || string(last.Payload) != "new" || last.TimeMicros != 7 {
		t.Fatalf("after reopening the mixed segment: %d records, last two %+v %+v", len(recs), recs[11], last)
	}
}

// TestOldFormatTornTail: the old layout's torn tails are still cut, and
// appends after the cut are in the new layout (old encoder in legacy_test.go).
func TestOldFormatTornTail(t *testing.T) {
	o := testOptions(t)
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for i := range 5 {
		b = appendRecordV0(b, uint64(i), 100+uint64(i), "p", payload(i, 20))
	}
	whole := len(b)
	b = appendRecordV0(b, 5, 105, "p", payload(5, 20))[:whole+10]
	if err := os.WriteFile(segPath(o, 0), b, 0o644); err != nil {
		t.Fatal(err)
	}
	l, rep, err := Open(o)
	if err != nil || rep.Verdict != VerdictTruncate || rep.Truncated.Position != int64(whole) {
		t.Fatalf("open: %v %+v", err, rep)
	}
	if _, err := l.Append([][]byte{[]byte("v1")}, ""); err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, l, 0)
	if len(recs) != 6 || recs[4].Version != 0 || recs[5].Version != RecordVersion || recs[5].Offset != 5 {
		t.Fatalf("records %+v", recs)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNewerRecordVersionRefused: a complete record in a layout this build
// does not know is refused, never cut as a torn tail, even at the end of
// the last segment.
func TestNewerRecordVersionRefused(t *testing.T) {
	o := buildLog(t, 5, 100)
	future := appendRecord(nil, dataRecord(5, 1, ""), []byte("from the future"))
	future[frameBytes] = RecordVersionState + 1
	fixCRC(future)
	f, err := os.OpenFile(segPath(o, 0), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(future)
	f.Close()
	rep := inspectUnchanged(t, o.Dir)
	if rep.Verdict != VerdictRefuse || rep.Corrupt.Reason != "unknown record version" || rep.Corrupt.Position != 5*recSize {
		t.Fatalf("inspect: %+v %+v", rep, rep.Corrupt)
	}
	var ce *CorruptionError
	if _, _, err := Open(o); !errors.As(err, &ce) || ce.LastGoodOffset != 4 {
		t.Fatalf("open: %v", err)
	}
}

// fixCRC recomputes the CRC of one encoded record.
func fixCRC(rec []byte) {
	binary.BigEndian.PutUint32(rec[4:], crc32.Checksum(rec[frameBytes:], castagnoli))
}

// TestKindsAndGenerationsRoundTrip: every kind and generation given to
// AppendEntries reads back, and Inspect counts them per segment.
func TestKindsAndGenerationsRoundTrip(t *testing.T) {
	o := testOptions(t)
	l := mustOpen(t, o)
	kinds := []Kind{KindData, KindGenerationStart, KindCachePut, KindCacheTombstone, KindCacheExpiry, KindCacheCopy, 0x20, 0xff}
	var entries []Entry
	for i, k := range kinds {
		entries = append(entries, Entry{Kind: k, Generation: uint64(i) << 33, Payload: []byte(k.String())})
	}
	if _, err := l.AppendEntries(entries, "leader", 99); err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, l, 0)
	for i, r := range recs {
		if r.Kind != kinds[i] || r.Generation != uint64(i)<<33 || !bytes.Equal(r.Payload, []byte(kinds[i].String())) || r.Publisher != "leader" {
			t.Fatalf("record %d = %+v", i, r)
		}
	}
	if got := Kind(0x20).String(); got != "kind(0x20)" {
		t.Fatalf("unnamed kind prints %q", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep := inspectUnchanged(t, o.Dir)
	s := rep.Segments[0]
	if s.Kinds[KindCachePut] != 1 || s.Kinds[0xff] != 1 || s.Versions[RecordVersion] != uint64(len(kinds)) || s.LastGeneration != 7<<33 {
		t.Fatalf("segment report %+v", s)
	}
}
