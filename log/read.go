package log

import (
	"errors"
	"fmt"
	"sort"
)

// segView is a consistent snapshot of a segment for a reader: records
// below size never change, so it can be read without the lock.
type segView struct {
	seg     *segment
	f       File
	base    uint64
	next    uint64
	size    int64
	records uint64
	maxTime uint64
	offIdx  []offsetEntry
	timeIdx []timeEntry
}

const readChunk = 64 << 10

// pointChunk is what ReadRecord reads ahead: enough to scan from a sparse
// index entry to a record and cover a small one in one ReadAt.
const pointChunk = 8 << 10

// snapshot copies what readers need under the lock.
func (l *Log) snapshot() ([]segView, uint64, uint64, error) {
	views, start, next, _, err := l.snapshotCuts()
	return views, start, next, err
}

// snapshotCuts is snapshot that also returns the truncation count.
func (l *Log) snapshotCuts() ([]segView, uint64, uint64, uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, 0, 0, 0, ErrClosed
	}
	if l.failErr == nil {
		// Readers read the files: buffered records go there first. A
		// full disk leaves them out of the views until they can.
		_ = l.writeBufferedLocked()
	}
	views := make([]segView, len(l.segs))
	for i, s := range l.segs {
		views[i] = segView{seg: s, f: s.f, base: s.base, next: s.next, size: s.size, records: s.records,
			maxTime: s.maxTime, offIdx: s.offIdx[:len(s.offIdx):len(s.offIdx)], timeIdx: s.timeIdx[:len(s.timeIdx):len(s.timeIdx)]}
	}
	if len(l.buf) > 0 {
		v := &views[len(views)-1]
		v.size -= int64(len(l.buf))
		v.records -= v.next - l.written
		v.next = l.written
	}
	return views, l.startLocked(), l.written, l.cuts, nil
}

// Read returns the records with offsets in [from, min(end, NextOffset)),
// at most maxRecords of them and, past the first, no more than maxBytes of
// payload in total (a limit ≤ 0 means none). next is where to continue.
// from below StartOffset or above NextOffset gives a *CursorError. Every
// record's CRC is verified. A Read that overlaps a TruncateTo returns only
// records below the cut (the same before and after it), ending early if it
// must, or, when that leaves none, runs again on the truncated log.
func (l *Log) Read(from, end uint64, maxRecords int, maxBytes int) (recs []Record, next uint64, err error) {
	recs, next, retry, err := l.readOnce(from, end, maxRecords, maxBytes)
	if retry {
		recs, next, _, err = l.readOnce(from, end, maxRecords, maxBytes)
	}
	return recs, next, err
}

// ReadRecord returns the one record at off: a point read for an owner
// that keeps offsets in an index (a cache reading a value). It reads
// ahead only pointChunk bytes, not Read's 64 KiB. Its errors are Read's,
// and a record past the tail is a *CursorError.
func (l *Log) ReadRecord(off uint64) (Record, error) {
	recs, _, retry, err := l.readChunked(off, off+1, 1, 0, pointChunk)
	if retry {
		recs, _, _, err = l.readChunked(off, off+1, 1, 0, pointChunk)
	}
	if err == nil && len(recs) == 0 {
		err = &CursorError{Requested: off, Available: l.NextOffset()}
	}
	if err != nil {
		return Record{}, err
	}
	return recs[0], nil
}

// readOnce is one attempt of Read; retry is set when it got nothing
// because a truncation changed the files under it.
func (l *Log) readOnce(from, end uint64, maxRecords int, maxBytes int) ([]Record, uint64, bool, error) {
	return l.readChunked(from, end, maxRecords, maxBytes, readChunk)
}

// readChunked is readOnce reading ahead chunk bytes at a time.
func (l *Log) readChunked(from, end uint64, maxRecords, maxBytes, chunk int) ([]Record, uint64, bool, error) {
	views, start, last, cuts, err := l.snapshotCuts()
	if err != nil {
		return nil, from, false, err
	}
	if from < start {
		return nil, from, false, &CursorError{TooOld: true, Requested: from, Available: start}
	}
	if from > last {
		return nil, from, false, &CursorError{Requested: from, Available: last}
	}
	rd := &rangeReader{cur: from, end: min(end, last), maxRecords: maxRecords, maxBytes: maxBytes, chunk: chunk}
	for i := locate(views, from); i < len(views) && !rd.full(); i++ {
		if pos, err := rd.readSegment(&views[i]); err != nil {
			if recs, cut := l.keptSince(rd.recs, cuts); cut {
				return recs, nextAfter(recs, from), len(recs) == 0, nil
			}
			recs, next, err := l.readFailed(rd, views[i].seg, pos, err)
			return recs, next, false, err
		}
	}
	if recs, cut := l.keptSince(rd.recs, cuts); cut {
		return recs, nextAfter(recs, from), len(recs) == 0, nil
	}
	return rd.recs, rd.cur, false, nil
}

// keptSince drops the records at and above the lowest offset a truncation
// since the snapshot (taken at cuts) cut back to: the files under them may
// since hold other records at those offsets. cut says whether one ran.
func (l *Log) keptSince(recs []Record, cuts uint64) ([]Record, bool) {
	l.mu.Lock()
	low, cut := l.lowestCutSinceLocked(cuts)
	l.mu.Unlock()
	if !cut {
		return recs, false
	}
	k := 0
	for k < len(recs) && recs[k].Offset < low {
		k++
	}
	return recs[:k], true
}

// nextAfter is where a read that returned recs, starting at from, goes on.
func nextAfter(recs []Record, from uint64) uint64 {
	if len(recs) == 0 {
		return from
	}
	return recs[len(recs)-1].Offset + 1
}

// locate returns the index of the view holding off (the last with base ≤ off).
func locate(views []segView, off uint64) int {
	i := sort.Search(len(views), func(i int) bool { return views[i].base > off })
	return max(0, i-1)
}

// posFor is the file position to start scanning for off.
func (v *segView) posFor(off uint64) int64 {
	rel := off - v.base
	k := sort.Search(len(v.offIdx), func(k int) bool { return uint64(v.offIdx[k].rel) > rel })
	if k == 0 {
		return 0
	}
	return int64(v.offIdx[k-1].pos)
}

// rangeReader collects records for one Read.
type rangeReader struct {
	cur, end   uint64
	maxRecords int
	maxBytes   int
	chunk      int // read-ahead of each ReadAt
	bytes      int
	stop       bool
	recs       []Record
}

func (rd *rangeReader) full() bool { return rd.stop || rd.cur >= rd.end }

// take adds a record unless a limit stops the read first.
func (rd *rangeReader) take(v recordView) bool {
	if rd.maxRecords > 0 && len(rd.recs) >= rd.maxRecords {
		return false
	}
	if rd.maxBytes > 0 && len(rd.recs) > 0 && rd.bytes+len(v.payload) > rd.maxBytes {
		return false
	}
	rd.recs = append(rd.recs, v.toRecord())
	rd.bytes += len(v.payload)
	rd.cur = v.offset + 1
	return true
}

// readSegment collects records from one segment; on error it returns the
// position of the record it could not read.
func (rd *rangeReader) readSegment(v *segView) (int64, error) {
	if v.next <= rd.cur {
		return 0, nil
	}
	r := newRecordReader(v.f, v.size, rd.chunk)
	for pos := v.posFor(rd.cur); pos < v.size && !rd.full(); {
		rec, n, err := r.at(pos)
		if err != nil {
			return pos, err
		}
		if rec.offset > rd.cur {
			return pos, &recordError{reason: "offset out of sequence"}
		}
		pos += int64(n)
		if rec.offset == rd.cur {
			rd.stop = !rd.take(rec)
		}
	}
	return 0, nil
}

// readFailed turns a read error into the answer: a segment that retention
// deleted meanwhile means the cursor is too old (or, with records already
// collected, simply the end of this read).
func (l *Log) readFailed(rd *rangeReader, seg *segment, pos int64, err error) ([]Record, uint64, error) {
	if l.segmentGone(seg) {
		start := l.StartOffset()
		if len(rd.recs) > 0 {
			return rd.recs, rd.cur, nil
		}
		return nil, rd.cur, &CursorError{TooOld: true, Requested: rd.cur, Available: start}
	}
	var rerr *recordError
	if errors.As(err, &rerr) {
		return rd.recs, rd.cur, &CorruptionError{Segment: seg.name(), LastGoodOffset: rd.cur - 1,
			HasLastGood: rd.cur > seg.base, Reason: rerr.reason, Position: pos}
	}
	return rd.recs, rd.cur, fmt.Errorf("log: read %s: %w", seg.name(), err)
}

// OffsetForTime returns the first offset whose record time is ≥ t (µs).
// ok is false when no record is that recent. Record times need not be
// monotone; the search uses their running maximum.
func (l *Log) OffsetForTime(t uint64) (offset uint64, ok bool, err error) {
	for attempt := 0; ; attempt++ {
		views, _, _, cuts, err := l.snapshotCuts()
		if err != nil {
			return 0, false, err
		}
		off, ok, seg, err := searchTime(views, t)
		if err != nil && attempt == 0 && (l.segmentGone(seg) || l.cutSince(cuts)) {
			continue // deleted by retention or cut by a truncation under us: look again
		}
		if err != nil {
			return 0, false, fmt.Errorf("log: offset for time: %w", err)
		}
		return off, ok, nil
	}
}

// segmentGone reports whether retention has deleted seg.
func (l *Log) segmentGone(seg *segment) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.segs) == 0 || seg.base < l.segs[0].base
}

func searchTime(views []segView, t uint64) (uint64, bool, *segment, error) {
	for i := range views {
		v := &views[i]
		if v.records == 0 || v.maxTime < t {
			continue
		}
		off, ok, err := v.searchTime(t)
		return off, ok, v.seg, err
	}
	return 0, false, nil, nil
}

// searchTime finds the first record with time ≥ t in a segment whose
// maximum time is ≥ t: binary search of the time index, then a scan.
func (v *segView) searchTime(t uint64) (uint64, bool, error) {
	k := sort.Search(len(v.timeIdx), func(k int) bool { return v.timeIdx[k].time >= t })
	pos := int64(0)
	if k > 0 {
		pos = int64(v.offIdx[k-1].pos)
	}
	r := newRecordReader(v.f, v.size, readChunk)
	for pos < v.size {
		rec, n, err := r.at(pos)
		if err != nil {
			return 0, false, err
		}
		if rec.time >= t {
			return rec.offset, true, nil
		}
		pos += int64(n)
	}
	return 0, false, nil
}

// cutSince reports whether a truncation ran since the log counted cuts.
func (l *Log) cutSince(cuts uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cuts != cuts
}
