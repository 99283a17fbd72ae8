// Package log is Felix's segmented append-only log: one per stream shard,
// and the storage under caches, counters, group cursors and replication.
//
// # Records and files
//
// A log is a directory of segment files named by the offset of their first
// record (20 decimal digits, ".log"). Each record carries a layout version,
// a Kind, its offset, the generation it was written in, its append time in
// µs, an optional publisher, the payload, and a CRC32C over all of it.
// Records of the old layout (version 0, before kinds existed) are read as
// KindData at generation 0; new records are always written in version 1.
// Beside each segment sit a sparse offset index (".index") and a time index
// (".timeindex"); both are derived data, rebuilt whenever they are missing
// or disagree with the segment. The byte layout is documented in
// docs/storage.md.
//
// # Usage contract
//
//  1. Open recovers the directory. A torn tail of the last segment is cut
//     and reported; any other damage (a record of an unknown layout
//     version included) makes Open return a *CorruptionError and touch
//     nothing. An interrupted TruncateTo is finished. Inspect reaches the
//     same verdict read-only.
//  2. Append (or AppendAt, or AppendEntries for other kinds and
//     generations) writes a batch at the next offsets and returns once the
//     bytes are in the OS. Appends are serialized; offsets are contiguous.
//     AppendRecords writes records at the offsets they carry (a follower)
//     and refuses, writing nothing, a batch not starting at NextOffset.
//  3. Wait(a) before acknowledging a: under FsyncAlways it returns after
//     an fsync that covered a (one fsync serves every append written while
//     the previous one ran); under FsyncPeriodic and FsyncNone it returns
//     at once. FsyncPeriodic fsyncs every FsyncInterval, so a machine crash
//     can lose up to that much acknowledged data; FsyncNone fsyncs only at
//     Open, when a segment is sealed, on Sync and on Close. An owner that
//     must learn when records become durable without waiting for them
//     (a cache releasing changes to its watches) sets Options.OnDurable,
//     which the flusher calls after its runs, and calls SyncSoon after
//     an append that no Wait will follow.
//  4. A write error (ENOSPC included) consumes no offsets and leaves the
//     log usable. With Options.BufferAppends (FsyncAlways only) Append
//     keeps the records in memory, readable, and the flusher writes every
//     buffered record in one write before its fsync: a full disk then
//     keeps them buffered and refuses later appends (ErrNoSpace, nothing
//     consumed) until a retry writes them (the flusher retries every
//     100 ms), their Waits waiting meanwhile; any other error writing them
//     fails the log, and they are lost (no Wait reported them durable). A failed fsync, or a failed rollback after a write error,
//     fails the log for good: every later Append returns an error wrapping
//     ErrFailed, and so does every Wait for records no fsync covered.
//     Reopen the directory to recover.
//  5. Read, ReadRecord (a point read) and OffsetForTime may run
//     concurrently with everything else.
//     A read below StartOffset (retention deleted it, possibly while the
//     read ran) returns a *CursorError with TooOld set.
//  6. Call ApplyRetention periodically for age retention; the log applies
//     retention itself after every segment roll. An owner that made old
//     records redundant (a cache's index snapshot) calls DropBefore(off),
//     which deletes the sealed segments wholly below off. The active
//     segment is never deleted, and no record is rewritten or renumbered.
//  7. TruncateTo(off) removes every record at or after off, below the
//     durable point too (a diverged follower must), and is atomic across a
//     crash: a marker file is its commit point and Open finishes it. A
//     failure after the marker fails the log. Wait for removed records
//     returns ErrTruncated.
//  8. Close fsyncs, writes the active segment's indexes and stops the one
//     background goroutine (the flusher). Close every log you open.
//
// The package registers no metrics; Stats gives the counters to export.
package log
