package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
)

// TruncateTo removes every record at or after off, so that NextOffset
// becomes off: whole later segments are deleted and the segment holding
// off is cut at off's record, which makes it the active segment (a sealed
// segment becomes active again). off must lie in [StartOffset,
// NextOffset]; otherwise nothing changes and the error is a *RangeError.
// off == NextOffset changes nothing.
//
// Records below DurableOffset and SyncedOffset may be removed too: a
// follower whose log holds records a new leader never had must drop them
// however durable they are on this disk. Whether a record may be removed
// (never below a shard's commit mark) is the caller's decision; the log
// only keeps the operation atomic. Wait for an append whose records were
// removed before they became durable returns ErrTruncated.
//
// The truncation is durable and atomic when TruncateTo returns: it first
// writes and fsyncs a marker naming off, then cuts and fsyncs the segment,
// deletes later segments, rewrites the cut segment's indexes, and removes
// the marker. A crash at any point leaves either the log as before (no
// marker yet) or a marker that the next Open finishes from. A failure
// after the marker was written fails the log (ErrFailed); reopening it
// completes the truncation.
func (l *Log) TruncateTo(off uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return fmt.Errorf("log: truncate: %w", err)
	}
	if start := l.startLocked(); off < start || off > l.next {
		return &RangeError{Requested: off, Start: start, Next: l.next}
	}
	if off == l.next {
		return nil
	}
	if err := l.writeBufferedLocked(); err != nil {
		return fmt.Errorf("log: truncate: %w", err)
	}
	if err := l.writeMarkerLocked(off); err != nil {
		return err
	}
	if err := l.cutLocked(off); err != nil {
		return fmt.Errorf("log: truncate to %d: %w", off, l.failLocked(err))
	}
	if err := removeMarker(l.fs, l.opts.Dir); err != nil {
		// Left in place, the marker would cut records appended from now on
		// at the next Open.
		return fmt.Errorf("log: truncate to %d: %w", off, l.failLocked(fmt.Errorf("remove truncation marker: %w", err)))
	}
	return nil
}

// cutLocked does the truncation's file work and then moves the in-memory
// state; on error the in-memory state is left as it was (the log fails).
func (l *Log) cutLocked(off uint64) error {
	keep := locateSeg(l.segs, off)
	if k := keep; k > 0 && l.segs[k].base == off {
		keep = k - 1 // off starts a segment: the one before it becomes active
	}
	s := l.segs[keep]
	cut, err := scanUpTo(s, off, l.opts.IndexIntervalBytes)
	if err != nil {
		return err
	}
	if keep != len(l.segs)-1 {
		// A sealed segment's handle may be read-only; appends need another.
		f, err := l.fs.OpenFile(s.path, os.O_RDWR|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("reopen %s: %w", s.name(), err)
		}
		old := s.f
		s.f = f
		old.Close()
	}
	if err := s.f.Truncate(cut.size); err != nil {
		return fmt.Errorf("cut %s at %d: %w", s.name(), cut.size, err)
	}
	if err := l.fsyncLocked(s); err != nil {
		return err
	}
	if err := l.removeLaterLocked(l.segs[keep+1:]); err != nil {
		return err
	}
	s.size, s.next, s.records = cut.size, cut.next, cut.records
	s.firstTime, s.maxTime, s.sinceIndex = cut.firstTime, cut.maxTime, cut.sinceIndex
	s.offIdx, s.timeIdx = cut.offIdx, cut.timeIdx
	if err := writeIndexes(l.fs, s, s.offIdx, s.timeIdx); err != nil {
		// Derived data: Open checks and rebuilds it.
		l.opts.Logger.Warn("log: write index after truncation", "segment", s.name(), "err", err)
	}
	l.segs = l.segs[:keep+1]
	l.next, l.written = off, off
	// The fsync after the cut covered the kept segment, and every segment
	// before it was fsynced when it was sealed: all that remains is synced.
	l.synced = off
	if l.opts.Fsync == FsyncAlways {
		l.durable = off
	} else {
		l.durable = min(l.durable, off)
	}
	l.noteCutLocked(off)
	l.broadcastLocked()
	return nil
}

// removeLaterLocked deletes the segments a truncation drops, newest first,
// so that what remains is always contiguous, then fsyncs the directory.
func (l *Log) removeLaterLocked(drop []*segment) error {
	for i := len(drop) - 1; i >= 0; i-- {
		s := drop[i]
		s.removed = true
		s.f.Close()
		if err := l.fs.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", s.name(), err)
		}
		for _, p := range []string{s.indexPath(), s.timeIndexPath()} {
			if err := l.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				// A stale index of a segment file that is gone is checked,
				// and rebuilt, if a segment of that base is written again.
				l.opts.Logger.Warn("log: remove index after truncation", "file", p, "err", err)
			}
		}
	}
	if len(drop) == 0 {
		return nil
	}
	if err := l.fs.SyncDir(l.opts.Dir); err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}

// scanUpTo returns the state of segment s as if its records below off were
// all it held. It keeps the index entries below off and re-reads only the
// records from the last of them on, so it reads about one index interval,
// not the segment. Records below off are never rewritten while the lock is
// held, so reading them under it is safe.
func scanUpTo(s *segment, off uint64, interval int) (*segment, error) {
	cut := &segment{base: s.base, path: s.path, next: s.base}
	rel := off - s.base
	k := sort.Search(len(s.offIdx), func(k int) bool { return uint64(s.offIdx[k].rel) >= rel }) - 1
	pos := int64(0)
	if k > 0 {
		// Resume at the k-th indexed record: everything before it is as it
		// was, and the running maximum time there is the time index's.
		e := s.offIdx[k]
		cut.offIdx = append([]offsetEntry(nil), s.offIdx[:k]...)
		cut.timeIdx = append([]timeEntry(nil), s.timeIdx[:k]...)
		cut.records, cut.next = uint64(e.rel), s.base+uint64(e.rel)
		cut.firstTime, cut.maxTime = s.firstTime, s.timeIdx[k].time
		cut.sinceIndex = int64(interval) // re-index that record
		pos = int64(e.pos)
	}
	r := newRecordReader(s.f, s.size, readChunk)
	for cut.next < off {
		v, n, err := r.at(pos)
		if err != nil {
			return nil, fmt.Errorf("read %s at %d: %w", s.name(), pos, err)
		}
		if v.offset != cut.next {
			return nil, fmt.Errorf("read %s at %d: offset %d, want %d", s.name(), pos, v.offset, cut.next)
		}
		cut.noteRecord(pos, v.offset, v.time, int64(n), interval)
		pos += int64(n)
	}
	return cut, nil
}

// locateSeg returns the index of the segment holding off (the last with
// base ≤ off).
func locateSeg(segs []*segment, off uint64) int {
	k := 0
	for i, s := range segs {
		if s.base <= off {
			k = i
		}
	}
	return k
}

// maxCutLog bounds the truncations Wait can tell apart; an append older
// than that many truncations is treated as truncated by Wait.
const maxCutLog = 16

// noteCutLocked records a truncation to off for Wait.
func (l *Log) noteCutLocked(off uint64) {
	l.cuts++
	l.cutLog = append(l.cutLog, off)
	if len(l.cutLog) > maxCutLog {
		l.cutLog = append(l.cutLog[:0], l.cutLog[1:]...)
	}
}

// lowestCutSinceLocked returns the lowest offset any truncation after the
// first c truncations cut back to, and whether there was one. When the
// history no longer reaches back that far it answers 0.
func (l *Log) lowestCutSinceLocked(c uint64) (uint64, bool) {
	if c >= l.cuts {
		return 0, false
	}
	forgotten := l.cuts - uint64(len(l.cutLog))
	if c < forgotten {
		return 0, true
	}
	low := uint64(math.MaxUint64)
	for _, off := range l.cutLog[c-forgotten:] {
		low = min(low, off)
	}
	return low, true
}

// The truncation marker: a file naming the offset an interrupted
// TruncateTo cuts back to. Layout (big-endian): magic "FXTR", off u64,
// CRC32C of the 12 bytes before it. A marker that does not verify was torn
// while being written, before any record was touched, and is ignored.
const (
	markerName  = "truncate-to"
	markerMagic = "FXTR"
	markerBytes = 16
)

func encodeMarker(off uint64) []byte {
	b := append([]byte(markerMagic), make([]byte, 8)...)
	binary.BigEndian.PutUint64(b[4:], off)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// readMarker returns the offset of a valid marker in dir. present says
// whether a marker file exists at all, valid or not.
func readMarker(fsys FS, dir string) (off uint64, valid, present bool) {
	b, ok := readWholeFile(fsys, filepath.Join(dir, markerName), markerBytes)
	if !ok {
		f, err := fsys.OpenFile(filepath.Join(dir, markerName), os.O_RDONLY, 0)
		if err != nil {
			return 0, false, false
		}
		f.Close()
		return 0, false, true
	}
	if len(b) != markerBytes || string(b[:4]) != markerMagic ||
		crc32.Checksum(b[:12], castagnoli) != binary.BigEndian.Uint32(b[12:]) {
		return 0, false, true
	}
	return binary.BigEndian.Uint64(b[4:]), true, true
}

// writeMarkerLocked makes the marker durable. If it cannot, and the marker
// cannot be taken away again either, the log fails: a marker left behind
// would cut later appends at the next Open.
func (l *Log) writeMarkerLocked(off uint64) error {
	err := writeWholeFile(l.fs, filepath.Join(l.opts.Dir, markerName), encodeMarker(off))
	if err == nil {
		err = l.fs.SyncDir(l.opts.Dir)
	}
	if err == nil {
		return nil
	}
	if rerr := removeMarker(l.fs, l.opts.Dir); rerr != nil {
		return fmt.Errorf("log: truncate to %d: write marker: %w (remove it: %w)", off, err,
			l.failLocked(fmt.Errorf("remove truncation marker: %w", rerr)))
	}
	return fmt.Errorf("log: truncate to %d: write marker: %w", off, err)
}

// removeMarker deletes the marker (if any) and fsyncs the directory.
func removeMarker(fsys FS, dir string) error {
	if err := fsys.Remove(filepath.Join(dir, markerName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fsys.SyncDir(dir)
}
