package log

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Log is one segmented append-only log. Its methods are safe for concurrent
// use. See the package documentation for the durability contract.
type Log struct {
	opts  Options // defaults filled in; immutable after Open
	fs    FS
	kickC chan struct{} // wakes the flusher; capacity 1
	stopC chan struct{} // closed by Close to stop the flusher
	wg    sync.WaitGroup
	lock  *os.File // the directory's lock, released by Close; nil on an injected FS

	mu sync.Mutex
	// Guarded by mu. Invariant: segs is non-empty, contiguous (each base is
	// the previous segment's next) and the last one is the active segment.
	segs []*segment
	// Invariant: synced ≤ written ≤ next and durable ≤ next. written is
	// one past the last record in the files: below next only while the
	// records [written, next) wait in buf (BufferAppends), at the active
	// segment's end. synced is what fsync has covered; durable is what
	// Wait reports durable under the policy.
	next, written, synced, durable uint64
	// buf holds the encoded records [written, next); stalled is the
	// full-disk error of the last attempt to write them, while they
	// cannot be (new appends are refused with it).
	buf     []byte
	stalled error
	// noReserve is set once the active segment's file could not reserve
	// space: appends are then written at once.
	noReserve bool
	failErr   error
	closed    bool
	retention Retention
	// retentionFloor is the lowest offset retention must keep
	// (SetRetentionFloor); NoRetentionFloor holds nothing back.
	retentionFloor uint64
	// generation is what payload appends stamp on their records
	// (SetGeneration).
	generation uint64
	syncedC    chan struct{} // closed and replaced when synced/durable advance, a truncation, or the log fails
	// cuts counts the truncations that removed records; cutLog holds the
	// offsets the last min(cuts, maxCutLog) of them cut back to, oldest
	// first, so Wait can tell whether an append's records survived.
	cuts   uint64
	cutLog []uint64
	encBuf []byte
	stats  Stats
}

// Stats are a log's counters, for the owner to export as metrics.
type Stats struct {
	Segments        int
	Bytes           int64  // total size of all segment files
	Appends         uint64 // successful Append calls
	Records         uint64 // records appended since Open
	Fsyncs          uint64 // fsyncs of segment files
	FsyncNanos      uint64 // total time spent in those fsyncs
	LastFsyncNanos  uint64
	Writes          uint64 // writes of records to segment files (several records each with BufferAppends)
	TruncatedAtOpen bool
}

// Open recovers the log in opts.Dir (creating it if needed) and opens it for
// appends. A torn tail in the last segment is truncated; damage anywhere
// else makes Open return the report and a *CorruptionError without changing
// any file. Missing or inconsistent index files are rewritten. Only one
// Log may have a directory open at a time: Open holds an advisory lock on
// it and fails with ErrLocked while another Log holds it.
func Open(opts Options) (*Log, *Report, error) {
	if err := opts.validate(); err != nil {
		return nil, nil, err
	}
	o := opts.withDefaults()
	if err := o.FS.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("log: open %s: %w", o.Dir, err)
	}
	lock, err := lockDir(o.FS, o.Dir)
	if err != nil {
		return nil, nil, err
	}
	rec, err := recoverDir(o.FS, o.Dir, o.IndexIntervalBytes)
	if err != nil {
		unlock(lock)
		return nil, nil, err
	}
	if rec.report.Verdict == VerdictRefuse {
		rec.closeAll()
		unlock(lock)
		return nil, rec.report, rec.report.Corrupt
	}
	l := &Log{opts: o, fs: o.FS, retention: o.Retention, retentionFloor: NoRetentionFloor, kickC: make(chan struct{}, 1),
		stopC: make(chan struct{}), syncedC: make(chan struct{}), lock: lock}
	if err := l.adopt(rec); err != nil {
		rec.closeAll()
		unlock(lock)
		return nil, rec.report, err
	}
	l.logRecovery(rec.report)
	if o.Fsync != FsyncNone {
		l.wg.Add(1)
		go l.runFlusher()
	}
	return l, rec.report, nil
}

// adopt applies the recovery's repairs and takes over its segments.
func (l *Log) adopt(rec *recovery) error {
	if t := rec.report.Truncated; t != nil {
		if err := l.truncateTail(rec.scans[len(rec.scans)-1], t); err != nil {
			return err
		}
		l.stats.TruncatedAtOpen = true
	}
	if rec.report.Pending != nil {
		if err := l.finishCut(rec); err != nil {
			return err
		}
	}
	for _, sc := range rec.scans {
		l.segs = append(l.segs, sc.seg)
		if sc.idxOK && sc.timeIdxOK && sc.damage == nil {
			continue
		}
		if err := writeIndexes(l.fs, sc.seg, sc.seg.offIdx, sc.seg.timeIdx); err != nil {
			// Reads use the in-memory index; the next Open tries again.
			l.opts.Logger.Warn("log: rebuild index", "segment", sc.seg.name(), "err", err)
			continue
		}
		rec.report.RebuiltIndexes = append(rec.report.RebuiltIndexes, sc.seg.name())
	}
	if len(l.segs) == 0 {
		s, err := l.createSegment(0)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
	} else if err := l.reopenActive(); err != nil {
		return err
	}
	act := l.active()
	// A previous process may have died with records only in the page
	// cache; fsync once so that what Open reports as synced really is.
	if err := act.f.Sync(); err != nil {
		return fmt.Errorf("log: open: fsync %s: %w", act.name(), err)
	}
	l.next, l.written, l.synced, l.durable = act.next, act.next, act.next, act.next
	l.removeOrphanIndexes()
	if rec.badMarker {
		// Torn while being written: the truncation it was for never began.
		if err := removeMarker(l.fs, l.opts.Dir); err != nil {
			return fmt.Errorf("log: open: remove torn truncation marker: %w", err)
		}
	}
	return nil
}

// finishCut completes a truncation a crash interrupted: the last kept
// segment is cut after its last record below the marker's offset and
// fsynced, the dropped segments are deleted newest first, and the marker
// goes last. Every step can be repeated, so a crash in here too leaves a
// marker the next Open finishes from.
func (l *Log) finishCut(rec *recovery) error {
	next := uint64(0)
	if n := len(rec.scans); n > 0 {
		sc := rec.scans[n-1]
		if err := l.truncateTail(sc, &Truncation{Segment: sc.seg.name(), Position: sc.seg.size}); err != nil {
			return err
		}
		next = sc.seg.next
	}
	for i := len(rec.dropped) - 1; i >= 0; i-- {
		p := rec.dropped[i]
		stem := strings.TrimSuffix(p, logSuffix)
		for _, f := range []string{p, stem + indexSuffix, stem + timeIndexSuffix} {
			if err := l.fs.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("log: open: finish truncation: %w", err)
			}
		}
	}
	if err := l.fs.SyncDir(l.opts.Dir); err != nil {
		return fmt.Errorf("log: open: finish truncation: sync dir: %w", err)
	}
	if err := removeMarker(l.fs, l.opts.Dir); err != nil {
		return fmt.Errorf("log: open: finish truncation: %w", err)
	}
	l.opts.Logger.Warn("log: interrupted truncation finished", "dir", l.opts.Dir, "next", next,
		"dropped", rec.report.Pending.Dropped)
	return nil
}

// removeOrphanIndexes deletes index files whose segment is gone (a crash
// during retention can leave them). Failures only cost disk space.
func (l *Log) removeOrphanIndexes() {
	ents, err := l.fs.ReadDir(l.opts.Dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		stem, ok := strings.CutSuffix(e.Name(), indexSuffix)
		if !ok {
			stem, ok = strings.CutSuffix(e.Name(), timeIndexSuffix)
		}
		base, isSeg := parseSegmentName(stem + logSuffix)
		if ok && isSeg && base < l.segs[0].base {
			l.fs.Remove(filepath.Join(l.opts.Dir, e.Name()))
		}
	}
}

// truncateTail cuts the torn tail of the last segment and fsyncs it.
func (l *Log) truncateTail(sc *segScan, t *Truncation) error {
	f, err := l.fs.OpenFile(sc.seg.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("log: truncate %s: %w", t.Segment, err)
	}
	defer f.Close()
	if err := f.Truncate(t.Position); err != nil {
		return fmt.Errorf("log: truncate %s: %w", t.Segment, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("log: truncate %s: %w", t.Segment, err)
	}
	return nil
}

// reopenActive replaces the read-only handle of the last segment with an
// appending one.
func (l *Log) reopenActive() error {
	s := l.active()
	f, err := l.fs.OpenFile(s.path, os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("log: open %s: %w", s.name(), err)
	}
	s.f.Close()
	s.f = f
	return nil
}

// createSegment creates an empty segment file and fsyncs the directory.
func (l *Log) createSegment(base uint64) (*segment, error) {
	path := filepath.Join(l.opts.Dir, segmentName(base))
	f, err := l.fs.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log: create segment: %w", err)
	}
	if err := l.fs.SyncDir(l.opts.Dir); err != nil {
		f.Close()
		l.fs.Remove(path)
		return nil, fmt.Errorf("log: create segment: sync dir: %w", err)
	}
	return &segment{base: base, path: path, f: f, next: base}, nil
}

func (l *Log) logRecovery(r *Report) {
	if t := r.Truncated; t != nil {
		l.opts.Logger.Warn("log: torn tail truncated", "dir", r.Dir, "segment", t.Segment,
			"position", t.Position, "bytes", t.Bytes, "reason", t.Reason)
	}
	if len(r.RebuiltIndexes) > 0 {
		l.opts.Logger.Info("log: index files rebuilt", "dir", r.Dir, "segments", r.RebuiltIndexes)
	}
}

// active is the segment appends go to. Caller holds mu.
func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// StartOffset is the oldest retained offset (NextOffset when empty).
func (l *Log) StartOffset() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.startLocked()
}

func (l *Log) startLocked() uint64 {
	if len(l.segs) == 0 {
		return l.next
	}
	return l.segs[0].base
}

// NextOffset is the offset the next appended record gets.
func (l *Log) NextOffset() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// DurableOffset is one past the last record Wait reports durable. Under
// FsyncAlways that is what fsync covered; under the other policies every
// written record, until a failure pulls it back to what fsync covered.
func (l *Log) DurableOffset() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durable
}

// SyncedOffset is one past the last record an fsync has covered.
func (l *Log) SyncedOffset() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.synced
}

// Err is non-nil once the log has failed; it wraps ErrFailed.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failErr
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.opts.Dir }

// Stats returns a snapshot of the log's counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.stats
	st.Segments = len(l.segs)
	for _, s := range l.segs {
		st.Bytes += s.size
	}
	return st
}

// Close stops the flusher, fsyncs the active segment, writes its index
// files and closes every file. Later appends fail with ErrClosed. Close
// returns the fsync error, or the failure that made the log fail; calling
// it again returns that failure or nil.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		err := l.failErr
		l.mu.Unlock()
		return err
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stopC)
	l.wg.Wait()

	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.failErr
	if err == nil {
		err = l.writeBufferedLocked()
	}
	act := l.active()
	if err == nil {
		if err = l.fsyncLocked(act); err == nil {
			l.synced, l.durable = l.next, l.next
		}
	}
	if err == nil {
		l.releaseReserved(act)
	}
	if err == nil {
		if ierr := writeIndexes(l.fs, act, act.offIdx, act.timeIdx); ierr != nil {
			// Derived data: the next Open rebuilds it.
			l.opts.Logger.Warn("log: write index at close", "segment", act.name(), "err", ierr)
		}
	}
	for _, s := range l.segs {
		if cerr := s.f.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	unlock(l.lock)
	l.broadcastLocked()
	return err
}

// fsyncLocked fsyncs a segment and counts it; on error the log fails.
func (l *Log) fsyncLocked(s *segment) error {
	start := time.Now()
	err := s.f.Sync()
	l.countFsync(time.Since(start))
	if err != nil {
		return l.failLocked(fmt.Errorf("fsync %s: %w", s.name(), err))
	}
	return nil
}

// countFsync records one fsync's duration. Caller holds mu.
func (l *Log) countFsync(took time.Duration) {
	d := uint64(max(0, took))
	l.stats.Fsyncs++
	l.stats.FsyncNanos += d
	l.stats.LastFsyncNanos = d
}

// failLocked marks the log failed with cause, pulls durable back to what
// fsync covered and wakes every waiter. It returns the failure error.
func (l *Log) failLocked(cause error) error {
	if l.failErr == nil {
		l.failErr = fmt.Errorf("%w: %w", ErrFailed, cause)
		l.durable = min(l.durable, l.synced)
		l.opts.Logger.Error("log: failed", "dir", l.opts.Dir, "err", cause)
		l.broadcastLocked()
	}
	return l.failErr
}

// broadcastLocked wakes everyone blocked in Wait.
func (l *Log) broadcastLocked() {
	close(l.syncedC)
	l.syncedC = make(chan struct{})
}

// usableLocked returns why the log cannot append, or nil.
func (l *Log) usableLocked() error {
	if l.closed {
		return ErrClosed
	}
	if l.failErr != nil {
		return l.failErr
	}
	return nil
}
