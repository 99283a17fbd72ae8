package cachelog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	flog "github.com/felixmq/felix/log"
)

// The index snapshot a compaction writes: every live key of the store as
// of a log offset (the point), so an open loads it and replays only the
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
// The writer (core's compaction) writes it to SnapshotFile+".tmp",
// fsyncs it, renames it over the old one and fsyncs the directory, so a
// crash leaves the old snapshot or the new, never a torn one. A snapshot
// whose CRC fails is not used.
const (
	SnapshotFile    = "index.snap"
	snapshotMagic   = "FXCI"
	snapshotVersion = 1
	// SnapshotHeaderBytes and SnapshotEntryFixedBytes are the header's
	// size and an entry's size without its key.
	SnapshotHeaderBytes     = 4 + 1 + 8 + 8
	SnapshotEntryFixedBytes = 2 + 8 + 8
)

// ErrSnapshotCorrupt says a snapshot file cannot be used.
var ErrSnapshotCorrupt = errors.New("cache index snapshot is damaged")

// CRCTable is the CRC32C table of the snapshot's checksum.
var CRCTable = crc32.MakeTable(crc32.Castagnoli)

// AppendSnapshotHeader appends the snapshot's header (magic, version,
// point, entry count) to buf.
func AppendSnapshotHeader(buf []byte, point uint64, count int) []byte {
	buf = append(buf, snapshotMagic...)
	buf = append(buf, snapshotVersion)
	buf = binary.BigEndian.AppendUint64(buf, point)
	return binary.BigEndian.AppendUint64(buf, uint64(count))
}

// AppendSnapshotEntry appends one entry: key (at most MaxKey bytes), the
// offset of the record holding its value, and its expiry (Unix ns, 0
// never).
func AppendSnapshotEntry(buf []byte, key string, loc uint64, expiresAt int64) []byte {
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(key)))
	buf = append(buf, key...)
	buf = binary.BigEndian.AppendUint64(buf, loc)
	return binary.BigEndian.AppendUint64(buf, uint64(expiresAt))
}

// ReadSnapshot reads the snapshot in dir through fsys (nil: the real file
// system), calling sized with the entry count (checked against the
// file's size) and then fn for each entry in file order: the key, the
// offset of the record holding its value and its expiry. found is false
// when there is none. A damaged snapshot (bad magic, version, length or
// CRC) is an error wrapping ErrSnapshotCorrupt, found after fn may
// already have been called: the caller builds into a fresh index and
// drops it then.
func ReadSnapshot(fsys flog.FS, dir string, sized func(count int), fn func(key string, loc uint64, expiresAt int64)) (point uint64, found bool, err error) {
	if fsys == nil {
		fsys = flog.OSFS()
	}
	f, err := fsys.OpenFile(filepath.Join(dir, SnapshotFile), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read cache snapshot: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, true, fmt.Errorf("read cache snapshot: %w", err)
	}
	size := st.Size()
	if size < SnapshotHeaderBytes+4 {
		return 0, true, fmt.Errorf("%w: %d bytes", ErrSnapshotCorrupt, size)
	}
	crc := crc32.New(CRCTable)
	r := bufio.NewReaderSize(io.TeeReader(io.NewSectionReader(f, 0, size-4), crc), 256<<10)
	point, err = readSnapshotBody(r, size-4, sized, fn)
	if err != nil {
		return 0, true, err
	}
	var tail [4]byte
	if _, err := f.ReadAt(tail[:], size-4); err != nil && !errors.Is(err, io.EOF) {
		return 0, true, fmt.Errorf("read cache snapshot: %w", err)
	}
	if binary.BigEndian.Uint32(tail[:]) != crc.Sum32() {
		return 0, true, fmt.Errorf("%w: crc mismatch", ErrSnapshotCorrupt)
	}
	return point, true, nil
}

// readSnapshotBody reads the header and entries of a body of size bytes,
// checking each length against what is left before it allocates.
func readSnapshotBody(r *bufio.Reader, size int64, sized func(int), fn func(string, uint64, int64)) (uint64, error) {
	var h [SnapshotHeaderBytes]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, fmt.Errorf("%w: header: %v", ErrSnapshotCorrupt, err)
	}
	if string(h[:4]) != snapshotMagic || h[4] != snapshotVersion {
		return 0, fmt.Errorf("%w: magic %q version %d", ErrSnapshotCorrupt, h[:4], h[4])
	}
	point := binary.BigEndian.Uint64(h[5:])
	count := binary.BigEndian.Uint64(h[13:])
	left := size - SnapshotHeaderBytes
	if count > uint64(left)/SnapshotEntryFixedBytes {
		return 0, fmt.Errorf("%w: %d entries in %d bytes", ErrSnapshotCorrupt, count, left)
	}
	sized(int(count))
	key := make([]byte, 0, 256)
	var fixed [8 + 8]byte
	for i := uint64(0); i < count; i++ {
		var kl [2]byte
		if _, err := io.ReadFull(r, kl[:]); err != nil {
			return 0, fmt.Errorf("%w: entry %d: %v", ErrSnapshotCorrupt, i, err)
		}
		n := int(binary.BigEndian.Uint16(kl[:]))
		if int64(n)+SnapshotEntryFixedBytes > left {
			return 0, fmt.Errorf("%w: entry %d: key of %d bytes", ErrSnapshotCorrupt, i, n)
		}
		if cap(key) < n {
			key = make([]byte, n)
		}
		key = key[:n]
		if _, err := io.ReadFull(r, key); err != nil {
			return 0, fmt.Errorf("%w: entry %d: %v", ErrSnapshotCorrupt, i, err)
		}
		if _, err := io.ReadFull(r, fixed[:]); err != nil {
			return 0, fmt.Errorf("%w: entry %d: %v", ErrSnapshotCorrupt, i, err)
		}
		left -= int64(n) + SnapshotEntryFixedBytes
		loc, expiresAt := binary.BigEndian.Uint64(fixed[:8]), int64(binary.BigEndian.Uint64(fixed[8:]))
		if loc >= point || expiresAt < 0 {
			return 0, fmt.Errorf("%w: entry %d: offset %d (point %d), expiry %d", ErrSnapshotCorrupt, i, loc, point, expiresAt)
		}
		fn(string(key), loc, expiresAt)
	}
	if left != 0 {
		return 0, fmt.Errorf("%w: %d bytes after the last entry", ErrSnapshotCorrupt, left)
	}
	return point, nil
}

// SnapshotUse is what opening a store decides about its snapshot, given
// what ReadSnapshot returned (point, found, err), the oldest value offset
// the snapshot names (oldest; the log's next offset when it names none)
// and the log's retained range [start, next).
//
// A snapshot is usable when its CRC holds, its point lies in [start,
// next] and every value it names is still retained. Without a usable one
// the whole log is replayed, which is only possible while the log still
// starts at 0: otherwise the records a snapshot covered are gone, and
// the open fails (refusal is set) rather than serve a partial index.
// Unusable, when not nil, says why a snapshot that exists is not used.
func SnapshotUse(point, oldest uint64, found bool, err error, start, next uint64) (usable bool, unusable, refusal error) {
	usable = found && err == nil && point >= start && point <= next && oldest >= start
	if found && !usable {
		unusable = err
		if unusable == nil {
			unusable = fmt.Errorf("snapshot point %d, oldest version %d, log [%d, %d)", point, oldest, start, next)
		}
		if start > 0 {
			return false, unusable, fmt.Errorf("the log starts at %d and its index snapshot cannot be used (%w): the records before it are gone; restore the shard from a replica or a backup", start, unusable)
		}
	}
	if !usable && start > 0 {
		return false, unusable, fmt.Errorf("the log starts at %d and there is no index snapshot covering the records before it", start)
	}
	return usable, unusable, nil
}
