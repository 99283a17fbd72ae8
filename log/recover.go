package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// Verdict is the outcome of recovery.
type Verdict uint8

const (
	// VerdictOpen: every record verified; nothing to repair.
	VerdictOpen Verdict = iota
	// VerdictTruncate: the last segment ends in a torn tail, cut at open.
	VerdictTruncate
	// VerdictRefuse: damage before the tail; the log is not opened.
	VerdictRefuse
)

func (v Verdict) String() string {
	switch v {
	case VerdictOpen:
		return "open"
	case VerdictTruncate:
		return "truncate torn tail"
	case VerdictRefuse:
		return "refuse"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Report describes what recovery found (Inspect) or did (Open).
type Report struct {
	Dir      string
	Segments []SegmentReport
	Verdict  Verdict
	// Truncated is set when a torn tail was cut (Open) or would be (Inspect).
	Truncated *Truncation
	// Corrupt is set when the verdict is VerdictRefuse.
	Corrupt *CorruptionError
	// StartOffset and NextOffset bound the records that verified (after the
	// truncation, if any).
	StartOffset, NextOffset uint64
	// RebuiltIndexes names the index files Open rewrote because they were
	// missing or inconsistent. Inspect leaves it empty.
	RebuiltIndexes []string
	// Pending is set when a crash interrupted a TruncateTo; Open finishes
	// it (NextOffset already leaves the cut records out) and Inspect says
	// it would.
	Pending *PendingTruncation
}

// PendingTruncation is a TruncateTo that a crash interrupted.
type PendingTruncation struct {
	// To is the offset the log is cut back to.
	To uint64
	// Dropped names the segment files that lie wholly past To, which
	// finishing the truncation deletes (not scanned).
	Dropped []string
}

// SegmentReport describes one segment file. Segments after a refused one
// are not scanned and not listed.
type SegmentReport struct {
	File       string
	BaseOffset uint64
	// Records counts the records that verified; Bytes is the file size found.
	Records uint64
	Bytes   int64
	// RecordsOK is false when the segment has a bad or torn record.
	RecordsOK bool
	// IndexOK and TimeIndexOK: the index file is present and consistent.
	IndexOK, TimeIndexOK bool
	// FirstTime and LastTime are the first record's time and the largest
	// record time, µs; 0 when the segment is empty.
	FirstTime, LastTime uint64
	// Versions and Kinds count the verified records per layout version and
	// per kind. FirstGeneration and LastGeneration are the generations of
	// the first and the last verified record.
	Versions                        map[uint8]uint64
	Kinds                           map[Kind]uint64
	FirstGeneration, LastGeneration uint64
}

// Truncation describes a torn tail.
type Truncation struct {
	Segment  string // file name
	Position int64  // where the file is cut
	Bytes    int64  // bytes removed
	Reason   string
}

// segScan is the result of scanning one segment file.
type segScan struct {
	seg       *segment // f is open read-only
	fileSize  int64
	damage    *recordError // first bad record, nil if none
	idxOK     bool
	timeIdxOK bool
	versions  map[uint8]uint64
	kinds     map[Kind]uint64
	firstGen  uint64
	lastGen   uint64
}

// tally counts a verified record for the report.
func (sc *segScan) tally(v recordView) {
	if sc.seg.records == 0 {
		sc.firstGen = v.generation
	}
	sc.lastGen = v.generation
	sc.versions[v.version]++
	sc.kinds[v.kind]++
}

// recovery is the result of scanning a whole directory.
type recovery struct {
	report *Report
	scans  []*segScan
	// dropped are the paths of segments a pending truncation deletes;
	// badMarker is set when a marker file exists that does not verify.
	dropped   []string
	badMarker bool
}

// closeAll closes every scanned file.
func (r *recovery) closeAll() {
	for _, s := range r.scans {
		s.seg.f.Close()
	}
}

// Inspect runs Open's recovery logic on dir without writing anything and
// reports the verdict Open would reach.
func Inspect(dir string) (*Report, error) {
	return inspectFS(OSFS(), dir)
}

func inspectFS(fsys FS, dir string) (*Report, error) {
	rec, err := recoverDir(fsys, dir, DefaultIndexIntervalBytes)
	if err != nil {
		return nil, err
	}
	rec.closeAll()
	return rec.report, nil
}

// recoverDir scans every segment in dir read-only and decides the verdict.
// It stops at the first damage that refuses.
func recoverDir(fsys FS, dir string, interval int) (*recovery, error) {
	bases, err := listSegments(fsys, dir)
	if err != nil {
		return nil, err
	}
	rec := &recovery{report: &Report{Dir: dir}}
	rep := rec.report
	stopAt := uint64(math.MaxUint64)
	if off, valid, present := readMarker(fsys, dir); valid {
		stopAt = off
		bases = rec.pendingCut(dir, bases, off)
	} else {
		rec.badMarker = present
	}
	var verified bool // some record verified before the current position
	for i, base := range bases {
		last := i == len(bases)-1
		path := filepath.Join(dir, segmentName(base))
		if i > 0 {
			if want := rec.scans[i-1].seg.next; base != want {
				rep.Corrupt = &CorruptionError{Segment: filepath.Base(path), LastGoodOffset: want - 1, HasLastGood: verified, Reason: "segment base out of sequence"}
				break
			}
		}
		sc, err := scanSegment(fsys, path, base, interval, stopAt)
		if err != nil {
			rec.closeAll()
			return nil, err
		}
		rec.scans = append(rec.scans, sc)
		rep.Segments = append(rep.Segments, sc.report())
		verified = verified || sc.seg.records > 0
		if sc.damage == nil {
			continue
		}
		pos := sc.seg.size
		// A record in a layout this build does not know is complete (its CRC
		// holds): a newer binary wrote it, and cutting it would lose data.
		torn := last && !sc.damage.newer && !validRecordAfter(sc.seg.f, pos, sc.fileSize, sc.seg.next)
		if !torn {
			rep.Corrupt = &CorruptionError{Segment: sc.seg.name(), Position: pos, LastGoodOffset: sc.seg.next - 1, HasLastGood: verified, Reason: sc.damage.reason}
			break
		}
		rep.Truncated = &Truncation{Segment: sc.seg.name(), Position: pos, Bytes: sc.fileSize - pos, Reason: sc.damage.reason}
	}
	switch {
	case rep.Corrupt != nil:
		rep.Verdict = VerdictRefuse
	case rep.Truncated != nil:
		rep.Verdict = VerdictTruncate
	}
	if n := len(rec.scans); n > 0 {
		rep.StartOffset, rep.NextOffset = rec.scans[0].seg.base, rec.scans[n-1].seg.next
	}
	return rec, nil
}

// pendingCut notes a marker's truncation to off and returns the bases of
// the segments that keep records: those starting below off, and the first
// one always (a cut to its base empties it).
func (rec *recovery) pendingCut(dir string, bases []uint64, off uint64) []uint64 {
	keep := 0
	for keep < len(bases) && (keep == 0 || bases[keep] < off) {
		keep++
	}
	p := &PendingTruncation{To: off}
	for _, b := range bases[keep:] {
		p.Dropped = append(p.Dropped, segmentName(b))
		rec.dropped = append(rec.dropped, filepath.Join(dir, segmentName(b)))
	}
	rec.report.Pending = p
	return bases[:keep]
}

func (sc *segScan) report() SegmentReport {
	s := sc.seg
	r := SegmentReport{File: s.name(), BaseOffset: s.base, Records: s.records, Bytes: sc.fileSize,
		RecordsOK: sc.damage == nil, IndexOK: sc.idxOK, TimeIndexOK: sc.timeIdxOK,
		Versions: sc.versions, Kinds: sc.kinds, FirstGeneration: sc.firstGen, LastGeneration: sc.lastGen}
	if s.records > 0 {
		r.FirstTime, r.LastTime = s.firstTime, s.maxTime
	}
	return r
}

// indexChecker verifies index files against the records as a scan meets
// them: every entry must name a record start with the matching offset (and,
// for the time index, the running maximum time), in increasing order.
type indexChecker struct {
	off    []offsetEntry
	tim    []timeEntry
	i, j   int
	offOK  bool
	timeOK bool
}

func (c *indexChecker) record(pos int64, rel uint32, maxTime uint64) {
	for c.offOK && c.i < len(c.off) && int64(c.off[c.i].pos) <= pos {
		e := c.off[c.i]
		c.offOK = int64(e.pos) == pos && e.rel == rel
		c.i++
	}
	for c.timeOK && c.j < len(c.tim) && c.tim[c.j].rel <= rel {
		e := c.tim[c.j]
		c.timeOK = e.rel == rel && e.time == maxTime
		c.j++
	}
}

// done reports whether no entry points past the last record.
func (c *indexChecker) done() (bool, bool) {
	return c.offOK && c.i == len(c.off), c.timeOK && c.j == len(c.tim)
}

// scanSegment opens a segment read-only, verifies every record up to the
// first damage or the record at stopAt (a pending truncation's cut, whose
// records are not looked at), rebuilds its in-memory indexes and checks its
// index files.
func scanSegment(fsys FS, path string, base uint64, interval int, stopAt uint64) (*segScan, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	sc := &segScan{seg: &segment{base: base, path: path, f: f, next: base}, fileSize: fi.Size(),
		versions: map[uint8]uint64{}, kinds: map[Kind]uint64{}}
	chk := loadIndexChecker(fsys, sc.seg, sc.fileSize)
	r := newRecordReader(f, sc.fileSize, 1<<20)
	for pos := int64(0); pos < sc.fileSize && sc.seg.next < stopAt; {
		v, n, err := r.at(pos)
		var rerr *recordError
		if errors.As(err, &rerr) {
			sc.damage = rerr
			break
		} else if err != nil {
			f.Close()
			return nil, fmt.Errorf("log: scan %s: %w", path, err)
		}
		if v.offset != sc.seg.next {
			sc.damage = &recordError{reason: "offset out of sequence"}
			break
		}
		sc.tally(v)
		sc.seg.noteRecord(pos, v.offset, v.time, int64(n), interval)
		chk.record(pos, uint32(v.offset-base), sc.seg.maxTime)
		pos += int64(n)
	}
	sc.idxOK, sc.timeIdxOK = chk.done()
	return sc, nil
}

// loadIndexChecker reads the segment's index files; a missing, oversized or
// malformed file starts out inconsistent.
func loadIndexChecker(fsys FS, s *segment, fileSize int64) *indexChecker {
	maxEntries := fileSize/minRecordBytes + 1
	c := &indexChecker{}
	if b, ok := readWholeFile(fsys, s.indexPath(), maxEntries*offsetEntryBytes); ok {
		c.off, c.offOK = parseOffsetIndex(b)
	}
	if b, ok := readWholeFile(fsys, s.timeIndexPath(), maxEntries*timeEntryBytes); ok {
		c.tim, c.timeOK = parseTimeIndex(b)
	}
	return c
}

// validRecordAfter reports whether a complete record with a plausible
// offset and a good CRC starts anywhere in (from, size). If one does, the
// damage at from is not a torn tail: good data follows it.
func validRecordAfter(f File, from, size int64, expected uint64) bool {
	hi := expected + uint64(size-from)/minRecordBytes + 1
	const window = 1 << 20
	buf := make([]byte, window+recordHeader)
	for start := from + 1; start+minRecordBytes <= size; start += window {
		n, _ := f.ReadAt(buf[:min(int64(len(buf)), size-start)], start)
		for k := 0; k+minRecordBytes <= n && k < window; k++ {
			if plausibleHeader(buf[k:n], start+int64(k), size, expected, hi) && verifyAt(f, start+int64(k)) {
				return true
			}
		}
	}
	return false
}

// plausibleHeader is a cheap filter before a CRC check. A header in a
// layout this build does not know passes on its length alone.
func plausibleHeader(b []byte, pos, size int64, lo, hi uint64) bool {
	n := int64(binary.BigEndian.Uint32(b))
	if n < bodyHeaderV0 || n > maxBodyBytes || pos+frameBytes+n > size {
		return false
	}
	var off uint64
	switch b[frameBytes] {
	case 0:
		off = binary.BigEndian.Uint64(b[frameBytes:])
	case RecordVersion, RecordVersionProducer:
		if len(b) < frameBytes+10 {
			return true // the CRC check decides
		}
		off = binary.BigEndian.Uint64(b[frameBytes+2:])
	default:
		return true
	}
	return off >= lo && off <= hi
}

// verifyAt reads and checks the record at pos. A record in an unknown
// layout whose CRC holds counts: it is data, not a torn write.
func verifyAt(f File, pos int64) bool {
	var hdr [frameBytes]byte
	if n, _ := f.ReadAt(hdr[:], pos); n < frameBytes {
		return false
	}
	n, err := bodyLen(hdr[:])
	if err != nil {
		return false
	}
	b := make([]byte, frameBytes+n)
	if m, _ := f.ReadAt(b, pos); m < len(b) {
		return false
	}
	_, _, err = decodeRecord(b)
	return err == nil || errors.Is(err, errVersion)
}
