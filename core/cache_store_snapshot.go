package core

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	flog "github.com/felixmq/felix/log"
)

// The index snapshot a compaction writes: every live key of the store as
// of a log offset (the point), so Open loads it and replays only the
// records from the point on. Big-endian (docs/storage.md, "Index
// snapshot"):
//
//	magic    4 bytes "FXCI"
//	version  u8      1
//	point    u64     every record below it is reflected
//	count    u64     entries that follow
//	entries  count × (key_len u16 | key | offset u64 | expires_at i64)
//	         offset: the record holding the value (its put, or compaction's copy)
//	crc      u32     CRC32C of every byte before it
//
// It is written to a temporary file, fsynced, renamed over the old one
// and the directory fsynced, so a crash leaves the old snapshot or the
// new, never a torn one. A snapshot whose CRC fails is not used.
const (
	cacheSnapshotFile    = "index.snap"
	cacheSnapshotMagic   = "FXCI"
	cacheSnapshotVersion = 1
	cacheSnapHeader      = 4 + 1 + 8 + 8
	cacheSnapEntryFixed  = 2 + 8 + 8
)

// snapEntry is one live key as a snapshot holds it.
type snapEntry struct {
	key string
	e   storeEntry
}

// errSnapshotCorrupt says a snapshot file cannot be used.
var errSnapshotCorrupt = errors.New("cache index snapshot is damaged")

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
	path := filepath.Join(dir, cacheSnapshotFile)
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
	w := &snapWriter{ctx: ctx, f: f, buf: make([]byte, 0, snapChunk+cacheSnapEntryFixed+maxCacheStoreKey),
		crc: crc32.New(castagnoliTable), budget: budget}
	w.buf = append(w.buf, cacheSnapshotMagic...)
	w.buf = append(w.buf, cacheSnapshotVersion)
	w.buf = binary.BigEndian.AppendUint64(w.buf, point)
	w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(len(entries)))
	for i := range entries {
		se := &entries[i]
		w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(len(se.key)))
		w.buf = append(w.buf, se.key...)
		w.buf = binary.BigEndian.AppendUint64(w.buf, se.e.loc)
		w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(se.e.expiresAt))
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

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// readCacheSnapshot reads the snapshot in dir, calling sized with the
// entry count (checked against the file's size) and then fn for each
// entry in file order. found is false when there is none. A damaged snapshot
// (bad magic, version, length or CRC) is an error wrapping
// errSnapshotCorrupt, found after fn may already have been called: the
// caller builds into a fresh index and drops it then.
func readCacheSnapshot(fsys flog.FS, dir string, sized func(count int), fn func(key string, e storeEntry)) (point uint64, found bool, err error) {
	f, err := fsys.OpenFile(filepath.Join(dir, cacheSnapshotFile), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("core: read cache snapshot: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, true, fmt.Errorf("core: read cache snapshot: %w", err)
	}
	size := st.Size()
	if size < cacheSnapHeader+4 {
		return 0, true, fmt.Errorf("%w: %d bytes", errSnapshotCorrupt, size)
	}
	crc := crc32.New(castagnoliTable)
	r := bufio.NewReaderSize(io.TeeReader(io.NewSectionReader(f, 0, size-4), crc), 256<<10)
	point, err = readSnapshotBody(r, size-4, sized, fn)
	if err != nil {
		return 0, true, err
	}
	var tail [4]byte
	if _, err := f.ReadAt(tail[:], size-4); err != nil && !errors.Is(err, io.EOF) {
		return 0, true, fmt.Errorf("core: read cache snapshot: %w", err)
	}
	if binary.BigEndian.Uint32(tail[:]) != crc.Sum32() {
		return 0, true, fmt.Errorf("%w: crc mismatch", errSnapshotCorrupt)
	}
	return point, true, nil
}

// readSnapshotBody reads the header and entries of a body of size bytes,
// checking each length against what is left before it allocates.
func readSnapshotBody(r *bufio.Reader, size int64, sized func(int), fn func(string, storeEntry)) (uint64, error) {
	var h [cacheSnapHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, fmt.Errorf("%w: header: %v", errSnapshotCorrupt, err)
	}
	if string(h[:4]) != cacheSnapshotMagic || h[4] != cacheSnapshotVersion {
		return 0, fmt.Errorf("%w: magic %q version %d", errSnapshotCorrupt, h[:4], h[4])
	}
	point := binary.BigEndian.Uint64(h[5:])
	count := binary.BigEndian.Uint64(h[13:])
	left := size - cacheSnapHeader
	if count > uint64(left)/cacheSnapEntryFixed {
		return 0, fmt.Errorf("%w: %d entries in %d bytes", errSnapshotCorrupt, count, left)
	}
	sized(int(count))
	key := make([]byte, 0, 256)
	var fixed [8 + 8]byte
	for i := uint64(0); i < count; i++ {
		var kl [2]byte
		if _, err := io.ReadFull(r, kl[:]); err != nil {
			return 0, fmt.Errorf("%w: entry %d: %v", errSnapshotCorrupt, i, err)
		}
		n := int(binary.BigEndian.Uint16(kl[:]))
		if int64(n)+cacheSnapEntryFixed > left {
			return 0, fmt.Errorf("%w: entry %d: key of %d bytes", errSnapshotCorrupt, i, n)
		}
		if cap(key) < n {
			key = make([]byte, n)
		}
		key = key[:n]
		if _, err := io.ReadFull(r, key); err != nil {
			return 0, fmt.Errorf("%w: entry %d: %v", errSnapshotCorrupt, i, err)
		}
		if _, err := io.ReadFull(r, fixed[:]); err != nil {
			return 0, fmt.Errorf("%w: entry %d: %v", errSnapshotCorrupt, i, err)
		}
		left -= int64(n) + cacheSnapEntryFixed
		e := storeEntry{loc: binary.BigEndian.Uint64(fixed[:8]), expiresAt: int64(binary.BigEndian.Uint64(fixed[8:]))}
		if e.loc >= point || e.expiresAt < 0 {
			return 0, fmt.Errorf("%w: entry %d: offset %d (point %d), expiry %d", errSnapshotCorrupt, i, e.loc, point, e.expiresAt)
		}
		fn(string(key), e)
	}
	if left != 0 {
		return 0, fmt.Errorf("%w: %d bytes after the last entry", errSnapshotCorrupt, left)
	}
	return point, nil
}
