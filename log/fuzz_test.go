package log

import (
	"bytes"
	"path/filepath"
	"testing"
)

func validRecords(n int) []byte {
	var b []byte
	for i := range n {
		m := recordMeta{offset: uint64(i), time: uint64(1000 + i), publisher: "pub", kind: Kind(i % 3), generation: uint64(i / 2)}
		b = appendRecord(b, m, payload(i, 10+i))
	}
	return b
}

// validRecordsV0 is validRecords in the old layout.
func validRecordsV0(n int) []byte {
	var b []byte
	for i := range n {
		b = appendRecordV0(b, uint64(i), uint64(1000+i), "pub", payload(i, 10+i))
	}
	return b
}

// FuzzDecodeRecord: decoding either layout never allocates, never reads
// past its input, and a record that decodes re-encodes to the same bytes
// in its own layout.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(validRecords(1))
	f.Add(validRecords(3))
	f.Add(validRecordsV0(1))
	f.Add(validRecordsV0(3))
	f.Add(appendRecord(nil, recordMeta{offset: 7, time: 9, kind: KindCacheTombstone, generation: 1 << 40}, nil))
	f.Add(appendRecordV0(nil, 7, 9, "", nil))
	f.Add(appendRecord(nil, recordMeta{offset: 7, time: 9, publisher: "p", producer: &Producer{ID: 3, Sequence: 4, Count: 2, Digest: 5}}, []byte("x")))
	f.Add([]byte{0, 0, 0, 18, 1, 2, 3, 4})
	f.Add([]byte{0, 0, 0, 28, 0, 0, 0, 0, 1, 0x10})
	f.Add([]byte{0, 0, 0, 18, 0x8a, 0x9a, 0x2b, 0x1d, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		allocs := testing.AllocsPerRun(1, func() { decodeRecord(data) })
		if allocs != 0 {
			t.Fatalf("decodeRecord allocated %v times", allocs)
		}
		v, n, err := decodeRecord(data)
		if err != nil {
			return
		}
		if n < minRecordBytes || n > len(data) || n > MaxRecordBytes {
			t.Fatalf("size %d of %d bytes", n, len(data))
		}
		var again []byte
		switch v.version {
		case 0:
			if v.kind != KindData || v.generation != 0 {
				t.Fatalf("old-layout record with kind %v generation %d", v.kind, v.generation)
			}
			again = appendRecordV0(nil, v.offset, v.time, string(v.publisher), v.payload)
		case RecordVersion, RecordVersionProducer:
			m := recordMeta{offset: v.offset, generation: v.generation, time: v.time, kind: v.kind, publisher: string(v.publisher)}
			if v.version == RecordVersionProducer {
				pr := v.producer
				m.producer = &pr
			}
			again = appendRecord(nil, m, v.payload)
		default:
			t.Fatalf("decoded version %d", v.version)
		}
		if !bytes.Equal(again, data[:n]) {
			t.Fatal("re-encoding differs")
		}
	})
}

// FuzzRecover treats arbitrary bytes as one or two segment files, and a
// non-zero marker as a pending truncation to marker-1. Inspect and Open
// must agree, never panic, and an opened log must read back contiguous,
// CRC-checked records.
func FuzzRecover(f *testing.F) {
	good := validRecords(6)
	f.Add(good, uint16(0), uint64(0), uint64(0))
	f.Add(good[:len(good)-5], uint16(0), uint64(0), uint64(0))
	f.Add(append(bytes.Clone(good), "junk"...), uint16(0), uint64(0), uint64(0))
	two := append(validRecords(3), good[len(validRecords(3)):]...)
	f.Add(two, uint16(len(validRecords(3))), uint64(3), uint64(0))
	f.Add(two, uint16(len(validRecords(3))), uint64(3), uint64(3))
	f.Add(two, uint16(len(validRecords(3))), uint64(3), uint64(5))
	f.Add(good, uint16(0), uint64(0), uint64(1))
	flipped := bytes.Clone(good)
	flipped[40] ^= 1
	f.Add(flipped, uint16(0), uint64(0), uint64(0))
	old := validRecordsV0(6)
	f.Add(old, uint16(0), uint64(0), uint64(0))
	f.Add(append(validRecordsV0(3), good[len(validRecords(3)):]...), uint16(0), uint64(0), uint64(0))
	f.Add(old[:len(old)-3], uint16(0), uint64(0), uint64(4))
	f.Fuzz(func(t *testing.T, data []byte, split uint16, base2 uint64, marker uint64) {
		const dir = "/fuzz/log"
		mem := newMemFS()
		if int(split) > 0 && int(split) < len(data) && base2 > 0 {
			mem.put(filepath.Join(dir, segmentName(0)), data[:split])
			mem.put(filepath.Join(dir, segmentName(base2)), data[split:])
		} else {
			mem.put(filepath.Join(dir, segmentName(0)), data)
		}
		if marker > 0 {
			mem.put(filepath.Join(dir, markerName), encodeMarker(marker-1))
		}
		before := mem.digest()
		rep, err := inspectFS(mem, dir)
		if err != nil {
			t.Fatal(err)
		}
		if mem.digest() != before {
			t.Fatal("Inspect wrote")
		}
		l, rep2, err := Open(Options{Dir: dir, Fsync: FsyncNone, Logger: quietLogger(), FS: mem})
		if rep2 == nil || rep2.Verdict != rep.Verdict {
			t.Fatalf("Inspect says %v, Open %v (%v)", rep.Verdict, rep2, err)
		}
		if rep.Verdict == VerdictRefuse {
			if err == nil || mem.digest() != before {
				t.Fatalf("refused open: err %v, files changed %v", err, mem.digest() != before)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := l.check(); err != nil {
			t.Fatal(err)
		}
		start, next := l.StartOffset(), l.NextOffset()
		recs := readAll(t, l, start)
		if uint64(len(recs)) != next-start {
			t.Fatalf("read %d records in [%d, %d)", len(recs), start, next)
		}
		for i, r := range recs {
			if r.Offset != start+uint64(i) {
				t.Fatalf("record %d has offset %d", i, r.Offset)
			}
		}
		if _, err := l.Append([][]byte{[]byte("after")}, ""); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		rep3, err := inspectFS(mem, dir)
		if err != nil || rep3.Verdict != VerdictOpen || rep3.NextOffset != next+1 {
			t.Fatalf("after open and append: %+v %v", rep3, err)
		}
		for _, s := range rep3.Segments {
			if !s.IndexOK || !s.TimeIndexOK {
				t.Fatalf("index not consistent after close: %+v", s)
			}
		}
	})
}

// FuzzTruncate runs appends, follower appends, truncations and reopens on
// small segments against a model (a slice of records): after every step
// the log's next offset is the model's length, and at the end the log,
// and the log reopened, read back exactly the model.
func FuzzTruncate(f *testing.F) {
	f.Add([]byte{0, 9, 1, 3, 0, 4, 2, 0, 1, 0})
	f.Add([]byte{0, 20, 1, 6, 1, 6, 3, 2, 2, 0, 0, 5})
	f.Add([]byte{0, 30, 1, 30, 0, 2, 1, 1, 2, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		mem := newMemFS()
		o := memOptions(mem, 4)
		l, _, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { l.Close() }()
		var model []Record
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%4, int(ops[i+1])
			switch op {
			case 0:
				model = append(model, appendMixed(t, l, arg%7+1)...)
			case 1:
				cut := len(model) - arg%(len(model)+1)
				if err := l.TruncateTo(uint64(cut)); err != nil {
					t.Fatalf("truncate to %d: %v", cut, err)
				}
				model = model[:cut]
			case 2:
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				if l, _, err = Open(o); err != nil {
					t.Fatal(err)
				}
			case 3:
				var recs []Record
				for k := range arg%3 + 1 {
					off := uint64(len(model) + k)
					recs = append(recs, Record{Offset: off, TimeMicros: off * 7, Publisher: "leader",
						Payload: payload(int(off), 5), Kind: KindCachePut, Generation: uint64(arg)})
				}
				if _, err := l.AppendRecords(recs); err != nil {
					t.Fatal(err)
				}
				model = append(model, recs...)
			}
			if err := l.check(); err != nil {
				t.Fatalf("after op %d: %v", i/2, err)
			}
			if l.NextOffset() != uint64(len(model)) {
				t.Fatalf("after op %d: next %d, model %d", i/2, l.NextOffset(), len(model))
			}
		}
		if got := readAll(t, l, 0); !sameRecords(got, model) {
			t.Fatalf("read %d records, model %d", len(got), len(model))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if l, _, err = Open(o); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, l, 0); !sameRecords(got, model) {
			t.Fatalf("reopened: read %d records, model %d", len(got), len(model))
		}
	})
}
