package log

import (
	"context"
	"fmt"
	"time"
)

// runFlusher is the one goroutine that fsyncs the active segment: on demand
// from Wait under FsyncAlways (group commit: every append written while an
// fsync runs is covered by the next one), and on a ticker under
// FsyncPeriodic. Close stops it.
func (l *Log) runFlusher() {
	defer l.wg.Done()
	var tickC <-chan time.Time
	if l.opts.Fsync == FsyncPeriodic {
		t := time.NewTicker(l.opts.FsyncInterval)
		defer t.Stop()
		tickC = t.C
	}
	var told uint64 // the durable offset OnDurable was last given
	toldFailed := false
	var retryC <-chan time.Time // set while buffered records wait for disk space
	for {
		select {
		case <-l.stopC:
			return
		case <-l.kickC:
		case <-tickC:
		case <-retryC:
		}
		_ = l.syncOnce() // a failure is recorded in the log and seen by every waiter
		l.mu.Lock()
		durable, err, stalled := l.durable, l.failErr, l.stalled != nil
		l.mu.Unlock()
		retryC = nil
		if stalled {
			retryC = time.After(stallRetryInterval)
		}
		if l.opts.OnDurable == nil {
			continue
		}
		if durable != told || (err != nil) != toldFailed {
			told, toldFailed = durable, err != nil
			l.opts.OnDurable(durable, err)
		}
	}
}

// stallRetryInterval is how often the flusher tries again to write
// buffered records a full disk refused.
const stallRetryInterval = 100 * time.Millisecond

// syncOnce writes the buffered records and fsyncs the active segment if it holds unsynced records. The
// fsync runs without the lock, so appends continue meanwhile.
func (l *Log) syncOnce() error {
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	if err := l.writeBufferedLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	if l.synced >= l.written {
		l.mu.Unlock()
		return nil
	}
	seg, target, cuts := l.active(), l.written, l.cuts
	seg.syncers++ // keeps retention from deleting it under the fsync
	l.mu.Unlock()

	start := time.Now()
	err := seg.f.Sync()
	took := time.Since(start)

	l.mu.Lock()
	defer l.mu.Unlock()
	seg.syncers--
	l.countFsync(took)
	if err != nil && l.closed {
		return ErrClosed // Close closed the file under us; it fsyncs itself
	}
	if err != nil && seg.removed {
		return nil // a truncation deleted the file under us; its records are gone
	}
	if err != nil {
		return l.failLocked(fmt.Errorf("fsync %s: %w", seg.name(), err))
	}
	if low, cut := l.lowestCutSinceLocked(cuts); cut {
		// Records at and above the cut may have been written again since
		// the fsync started; it covered only what is below the cut.
		target = min(target, low)
	}
	l.advanceSyncedLocked(target)
	return nil
}

// kick wakes the flusher without blocking; one pending wake is enough.
func (l *Log) kick() {
	select {
	case l.kickC <- struct{}{}:
	default:
	}
}

// SyncSoon wakes the flusher to fsync what is written, without waiting:
// for an owner whose records must become durable under FsyncAlways when
// nobody calls Wait for them (Wait does it itself). It does nothing
// under FsyncNone, which has no flusher.
func (l *Log) SyncSoon() { l.kick() }

// Wait blocks until a is durable under the policy: under FsyncAlways until
// an fsync covered it; under the other policies it returns at once, since
// Append already handed the bytes to the OS. It fails with ErrFailed when
// the log failed before a became durable, and with ErrTruncated when a
// TruncateTo removed some of a's records first (or more than maxCutLog
// truncations ran since a, when the log can no longer tell). Cancelling ctx
// returns ctx.Err() and undoes nothing.
func (l *Log) Wait(ctx context.Context, a Appended) error {
	l.mu.Lock()
	for {
		if low, cut := l.lowestCutSinceLocked(a.cuts); cut && a.Count > 0 && low < a.end {
			l.mu.Unlock()
			return fmt.Errorf("log: wait for [%d, %d): cut back to %d: %w", a.Base, a.end, low, ErrTruncated)
		}
		if l.durable >= a.end {
			l.mu.Unlock()
			return nil
		}
		if l.failErr != nil {
			err := l.failErr
			l.mu.Unlock()
			return fmt.Errorf("log: wait: %w", err)
		}
		if l.closed {
			l.mu.Unlock()
			return fmt.Errorf("log: wait: %w", ErrClosed)
		}
		if l.opts.Fsync != FsyncAlways {
			// Only a failure pulls durable below an append; handled above.
			l.mu.Unlock()
			return nil
		}
		ch := l.syncedC
		l.mu.Unlock()
		l.kick()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		l.mu.Lock()
	}
}

// Sync fsyncs the active segment now, whatever the policy. Records written
// before the call are durable when it returns nil.
func (l *Log) Sync() error {
	return l.syncOnce()
}
