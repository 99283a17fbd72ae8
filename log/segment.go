package log

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	baseDigits      = 20

	offsetEntryBytes = 8  // rel u32, pos u32
	timeEntryBytes   = 12 // time u64, rel u32
)

// offsetEntry maps a record's offset, relative to the segment base, to the
// file position where it starts.
type offsetEntry struct {
	rel uint32
	pos uint32
}

// timeEntry says that every record up to and including relative offset rel
// has a time ≤ time (time is the running maximum, so entries are monotone).
type timeEntry struct {
	time uint64
	rel  uint32
}

// segment is one segment file and its in-memory indexes. All mutable fields
// are guarded by Log.mu; readers use a segView snapshot instead.
type segment struct {
	base uint64
	path string // full path of the .log file
	f    File

	// Invariant: size is the byte length of whole valid records in f.
	size int64
	// Invariant: next == base + records.
	next    uint64
	records uint64
	// firstTime is the time of the first record; maxTime the largest time.
	firstTime, maxTime uint64
	// Invariant: offIdx and timeIdx have one entry per indexed record, in
	// increasing order; the first record is always indexed.
	offIdx     []offsetEntry
	timeIdx    []timeEntry
	sinceIndex int64 // record bytes since the last index entry
	// reserved is the file position up to which disk space is reserved
	// for buffered appends (log.reserveLocked); 0 when none is.
	reserved int64
	// syncers counts fsyncs running on f without the lock; retention does
	// not delete a segment while it is non-zero.
	syncers int
	// removed is set when a truncation deleted the segment (and closed f).
	removed bool
}

// segmentName is the file name of a segment with the given base.
func segmentName(base uint64) string {
	return fmt.Sprintf("%0*d%s", baseDigits, base, logSuffix)
}

// parseSegmentName returns the base of a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	stem, ok := strings.CutSuffix(name, logSuffix)
	if !ok || len(stem) != baseDigits {
		return 0, false
	}
	base, err := strconv.ParseUint(stem, 10, 64)
	return base, err == nil
}

// listSegments returns the bases of the segment files in dir, ascending.
func listSegments(fsys FS, dir string) ([]uint64, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []uint64
	for _, e := range ents {
		if base, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			bases = append(bases, base)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

func (s *segment) name() string      { return filepath.Base(s.path) }
func (s *segment) indexPath() string { return strings.TrimSuffix(s.path, logSuffix) + indexSuffix }
func (s *segment) timeIndexPath() string {
	return strings.TrimSuffix(s.path, logSuffix) + timeIndexSuffix
}

// noteRecord accounts for a record of size bytes at pos, adding index
// entries for the first record and then every interval bytes.
func (s *segment) noteRecord(pos int64, off, t uint64, size int64, interval int) {
	if s.records == 0 {
		s.firstTime = t
	}
	s.maxTime = max(s.maxTime, t)
	if s.records == 0 || s.sinceIndex >= int64(interval) {
		rel := uint32(off - s.base)
		s.offIdx = append(s.offIdx, offsetEntry{rel: rel, pos: uint32(pos)})
		s.timeIdx = append(s.timeIdx, timeEntry{time: s.maxTime, rel: rel})
		s.sinceIndex = 0
	}
	s.sinceIndex += size
	s.records++
	s.next = off + 1
	s.size = pos + size
}

// encodeOffsetIndex is the .index file body.
func encodeOffsetIndex(ents []offsetEntry) []byte {
	b := make([]byte, 0, len(ents)*offsetEntryBytes)
	for _, e := range ents {
		b = binary.BigEndian.AppendUint32(b, e.rel)
		b = binary.BigEndian.AppendUint32(b, e.pos)
	}
	return b
}

// encodeTimeIndex is the .timeindex file body.
func encodeTimeIndex(ents []timeEntry) []byte {
	b := make([]byte, 0, len(ents)*timeEntryBytes)
	for _, e := range ents {
		b = binary.BigEndian.AppendUint64(b, e.time)
		b = binary.BigEndian.AppendUint32(b, e.rel)
	}
	return b
}

func parseOffsetIndex(b []byte) ([]offsetEntry, bool) {
	if len(b)%offsetEntryBytes != 0 {
		return nil, false
	}
	ents := make([]offsetEntry, 0, len(b)/offsetEntryBytes)
	for i := 0; i < len(b); i += offsetEntryBytes {
		ents = append(ents, offsetEntry{rel: binary.BigEndian.Uint32(b[i:]), pos: binary.BigEndian.Uint32(b[i+4:])})
	}
	return ents, true
}

func parseTimeIndex(b []byte) ([]timeEntry, bool) {
	if len(b)%timeEntryBytes != 0 {
		return nil, false
	}
	ents := make([]timeEntry, 0, len(b)/timeEntryBytes)
	for i := 0; i < len(b); i += timeEntryBytes {
		ents = append(ents, timeEntry{time: binary.BigEndian.Uint64(b[i:]), rel: binary.BigEndian.Uint32(b[i+8:])})
	}
	return ents, true
}

// writeIndexes writes both index files of s (replacing them) and fsyncs
// them. Index files are derived data: a crash mid-write only means they
// are rebuilt at the next Open.
func writeIndexes(fsys FS, s *segment, off []offsetEntry, tim []timeEntry) error {
	if err := writeWholeFile(fsys, s.indexPath(), encodeOffsetIndex(off)); err != nil {
		return err
	}
	return writeWholeFile(fsys, s.timeIndexPath(), encodeTimeIndex(tim))
}

func writeWholeFile(fsys FS, path string, b []byte) error {
	f, err := fsys.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readWholeFile reads a file of at most limit bytes; ok is false when the
// file is missing, unreadable or too large to be a valid index.
func readWholeFile(fsys FS, path string, limit int64) ([]byte, bool) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() > limit {
		return nil, false
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if n != len(b) {
		return nil, false
	}
	_ = err // io.EOF with a full read is fine
	return b, true
}
