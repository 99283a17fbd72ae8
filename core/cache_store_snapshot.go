package core

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"os"
	"path/filepath"
	"time"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
)

// The index snapshot a compaction writes (its format is cachelog's: see
// cachelog.ReadSnapshot): every live key of the store as of a log offset
// (the point). It is written to a temporary file, fsynced, renamed over
// the old one and the directory fsynced, so a crash leaves the old
// snapshot or the new, never a torn one.

// snapEntry is one live key as a snapshot holds it.
type snapEntry struct {
	key string
	e   storeEntry
}

// ioBudget paces a background writer to bytesPerSec: after each chunk it
// sleeps until the bytes written so far fit the rate since it started.
type ioBudget struct {
	bytesPerSec int64 // <= 0: no pacing
	now         func() time.Time
	start       time.Time
	spent       int64
}

func newIOBudget(bytesPerSec int64, now func() time.Time) *ioBudget {
	return &ioBudget{bytesPerSec: bytesPerSec, now: now, start: now()}
}

// spend accounts for n bytes and waits as long as the rate asks, or until
// ctx ends.
func (b *ioBudget) spend(ctx context.Context, n int) error {
	b.spent += int64(n)
	if b.bytesPerSec <= 0 {
		return ctx.Err()
	}
	due := b.start.Add(time.Duration(float64(b.spent) / float64(b.bytesPerSec) * float64(time.Second)))
	wait := due.Sub(b.now())
	if wait <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// snapWriter writes a snapshot in chunks through the budget, keeping the
// running CRC.
type snapWriter struct {
	ctx    context.Context
	f      flog.File
	buf    []byte
	crc    hash.Hash32
	budget *ioBudget
}

const snapChunk = 64 << 10

func (w *snapWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	w.crc.Write(w.buf)
	if _, err := w.f.Write(w.buf); err != nil {
		return err
	}
	n := len(w.buf)
	w.buf = w.buf[:0]
	return w.budget.spend(w.ctx, n)
}

func (w *snapWriter) maybeFlush() error {
	if len(w.buf) < snapChunk {
		return nil
	}
	return w.flush()
}

// writeCacheSnapshot writes entries as the snapshot at point, replacing
// the previous one atomically. Cancelling ctx abandons it (the previous
// snapshot stays).
func writeCacheSnapshot(ctx context.Context, fsys flog.FS, dir string, point uint64, entries []snapEntry, budget *ioBudget) error {
	path := filepath.Join(dir, cachelog.SnapshotFile)
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("core: write cache snapshot: %w", err)
	}
	err = writeSnapshotFile(ctx, f, point, entries, budget)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("core: write cache snapshot: %w", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("core: write cache snapshot: sync dir: %w", err)
	}
	return nil
}

// writeSnapshotFile writes and fsyncs the snapshot's bytes to f.
func writeSnapshotFile(ctx context.Context, f flog.File, point uint64, entries []snapEntry, budget *ioBudget) error {
	w := &snapWriter{ctx: ctx, f: f, buf: make([]byte, 0, snapChunk+cachelog.SnapshotEntryFixedBytes+cachelog.MaxKey),
		crc: crc32.New(cachelog.CRCTable), budget: budget}
	w.buf = cachelog.AppendSnapshotHeader(w.buf, point, len(entries))
	for i := range entries {
		se := &entries[i]
		w.buf = cachelog.AppendSnapshotEntry(w.buf, se.key, se.e.loc, se.e.expiresAt)
		if err := w.maybeFlush(); err != nil {
			return err
		}
	}
	if err := w.flush(); err != nil {
		return err
	}
	if _, err := f.Write(binary.BigEndian.AppendUint32(nil, w.crc.Sum32())); err != nil {
		return err
	}
	return f.Sync()
}

// readCacheSnapshot reads the snapshot in dir (cachelog.ReadSnapshot),
// calling fn with each entry as the index holds it.
func readCacheSnapshot(fsys flog.FS, dir string, sized func(count int), fn func(key string, e storeEntry)) (point uint64, found bool, err error) {
	return cachelog.ReadSnapshot(fsys, dir, sized, func(key string, loc uint64, expiresAt int64) {
		fn(key, storeEntry{loc: loc, expiresAt: expiresAt})
	})
}
