package log

import (
	"context"
	"testing"
)

// A record with a producer block is written in layout version 2 and reads
// back with its block, before and after a reopen, beside version-1
// records; the batch's other records carry none.
func TestProducerBlockRoundTrip(t *testing.T) {
	o := Options{Dir: t.TempDir(), Fsync: FsyncAlways}
	l, _, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([][]byte{[]byte("plain")}, ""); err != nil {
		t.Fatal(err)
	}
	want := Producer{ID: 0xfeedface12345678, Sequence: 41, Digest: 0xdeadbeefcafe}
	a, err := l.AppendProduced([][]byte{[]byte("a"), []byte("b"), []byte("c")}, "pub", want)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	want.Count = 3
	check := func(l *Log) {
		t.Helper()
		recs, _, err := l.Read(0, 4, 10, 1<<20)
		if err != nil || len(recs) != 4 {
			t.Fatalf("read: %d records, %v", len(recs), err)
		}
		if recs[0].Producer != nil || recs[0].Version != RecordVersion {
			t.Fatalf("plain record: version %d producer %+v", recs[0].Version, recs[0].Producer)
		}
		if recs[1].Producer == nil || *recs[1].Producer != want || recs[1].Version != RecordVersionProducer {
			t.Fatalf("first record of the batch: version %d producer %+v, want %+v", recs[1].Version, recs[1].Producer, want)
		}
		if string(recs[1].Payload) != "a" || recs[1].Publisher != "pub" || recs[1].Offset != 1 {
			t.Fatalf("first record: %+v", recs[1])
		}
		for _, r := range recs[2:] {
			if r.Producer != nil || r.Version != RecordVersion {
				t.Fatalf("record %d: version %d producer %+v", r.Offset, r.Version, r.Producer)
			}
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, o)
	check(l)
	// Copying the records (as a follower does) keeps the block.
	recs, _, _ := l.Read(0, 4, 10, 1<<20)
	o2 := Options{Dir: t.TempDir(), Fsync: FsyncAlways}
	l2 := mustOpen(t, o2)
	if _, err := l2.AppendRecords(recs); err != nil {
		t.Fatal(err)
	}
	check(l2)
}

// A version-2 body shorter than its header is refused, not read.
func TestProducerBlockShortBodyRefused(t *testing.T) {
	buf := appendRecord(nil, recordMeta{offset: 1, producer: &Producer{ID: 1}}, []byte("x"))
	if _, _, err := decodeRecord(buf); err != nil {
		t.Fatalf("whole record: %v", err)
	}
	// Cut the body to the version-1 header size and fix the length and CRC.
	short := appendRecord(nil, recordMeta{offset: 1}, nil)
	short[frameBytes] = RecordVersionProducer
	fixCRC(short)
	if _, _, err := decodeRecord(short); err != errBadLength {
		t.Fatalf("short version-2 body: %v, want bad length", err)
	}
}

// ScanRecords (what felix inspect reads) reports the producer block.
func TestScanRecordsReportsTheProducerBlock(t *testing.T) {
	o := Options{Dir: t.TempDir(), Fsync: FsyncAlways}
	l, _, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([][]byte{[]byte("plain")}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendProduced([][]byte{[]byte("a"), []byte("b")}, "", Producer{ID: 9, Sequence: 3, Digest: 1}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var got []RecordInfo
	if _, err := ScanRecords(o.Dir, func(r RecordInfo) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Producer != nil || got[2].Producer != nil {
		t.Fatalf("records %+v", got)
	}
	if pr := got[1].Producer; pr == nil || *pr != (Producer{ID: 9, Sequence: 3, Count: 2, Digest: 1}) || got[1].Version != RecordVersionProducer {
		t.Fatalf("first record of the batch: version %d producer %+v", got[1].Version, got[1].Producer)
	}
}
