package log

import (
	"errors"
	"fmt"
	"io/fs"
)

// SetRetention changes the bounds of a live log; the next ApplyRetention
// (including the one after each roll) uses them.
func (l *Log) SetRetention(r Retention) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.retention = r
}

// SetRetentionFloor makes retention keep every record at or above off: a
// segment holding one is never deleted by ApplyRetention, whatever the
// bounds say. A replicated shard sets it to the mark a majority of its
// replicas holds, so that retention never deletes what a replica still
// lacks. NoRetentionFloor (the default) lifts it.
func (l *Log) SetRetentionFloor(off uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.retentionFloor = off
}

// NoRetentionFloor is the floor of a log whose retention holds nothing back.
const NoRetentionFloor = ^uint64(0)

// ApplyRetention deletes whole sealed segments, oldest first, while the
// log is over its byte bound or the oldest segment's newest record is older
// than the age bound. The active segment is never deleted, nor a segment
// holding a record at or above the retention floor (SetRetentionFloor). It returns how
// many segments were deleted. Call it periodically for age retention.
func (l *Log) ApplyRetention() (int, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	victims := l.retentionVictimsLocked()
	l.mu.Unlock()
	return len(victims), l.removeSegments(victims)
}

// DropBefore deletes the sealed segments, oldest first, whose records all
// lie below off: an owner that has made those records redundant (a cache
// whose index snapshot covers them) releases them. Records are never
// rewritten or renumbered; the active segment always stays, so the new
// StartOffset is the base of the first segment kept, at most off. Readers
// of dropped offsets get a TooOld *CursorError. It returns how many
// segments it deleted.
func (l *Log) DropBefore(off uint64) (int, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	var victims []*segment
	for len(l.segs) > 1 && l.segs[0].next <= off && l.segs[0].syncers == 0 {
		victims = append(victims, l.segs[0])
		l.segs = l.segs[1:]
	}
	l.mu.Unlock()
	return len(victims), l.removeSegments(victims)
}

// retentionVictimsLocked detaches the segments retention drops. Readers
// holding one of them get a TooOld cursor error.
func (l *Log) retentionVictimsLocked() []*segment {
	r := l.retention
	if r.MaxBytes == 0 && r.MaxAge <= 0 {
		return nil
	}
	var total uint64
	for _, s := range l.segs {
		total += uint64(s.size)
	}
	now := nowMicros(l.opts.Now())
	age := uint64(r.MaxAge.Microseconds())
	var victims []*segment
	for len(l.segs) > 1 {
		s := l.segs[0]
		if s.syncers > 0 || s.next > l.retentionFloor {
			break
		}
		overBytes := r.MaxBytes > 0 && total > r.MaxBytes
		expired := r.MaxAge > 0 && now > s.maxTime && now-s.maxTime > age
		if !overBytes && !expired {
			break
		}
		victims = append(victims, s)
		total -= uint64(s.size)
		l.segs = l.segs[1:]
	}
	return victims
}

// removeSegments closes and deletes detached segments, then fsyncs the
// directory. The .log file goes first, so a crash leaves at worst an orphan
// index file, never a segment without its successor.
func (l *Log) removeSegments(victims []*segment) error {
	if len(victims) == 0 {
		return nil
	}
	var errs []error
	for _, s := range victims {
		s.f.Close()
	}
	for _, s := range victims {
		if err := l.fs.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			// Keep the files that remain contiguous: stop at the first
			// segment that would not go away.
			errs = append(errs, err)
			break
		}
		for _, p := range []string{s.indexPath(), s.timeIndexPath()} {
			if err := l.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := l.fs.SyncDir(l.opts.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		l.opts.Logger.Warn("log: retention", "dir", l.opts.Dir, "err", err)
		return fmt.Errorf("log: retention: %w", err)
	}
	return nil
}
