package core

import (
	"context"
	"fmt"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// CompactResult reports one compaction.
type CompactResult struct {
	// Point is the snapshot's point: every record below it is reflected.
	Point uint64
	// Keys is how many live keys the snapshot holds; Copied how many
	// live values it copied forward out of old segments.
	Keys   int
	Copied int
	// Dropped is how many segments the log deleted; Start the log's
	// oldest offset after it.
	Dropped int
	Start   uint64
}

// Compact sweeps lapsed entries (unless the owner sweeps them), copies
// forward the live values still held below the previous snapshot's point
// when the records there are mostly dead, writes a snapshot of the live
// index, and then has the log delete the sealed segments wholly below
// both the snapshot's point and the oldest record holding a live value:
// every record in them is superseded, deleted, expired or copied. Nothing
// is rewritten in place or renumbered; a copy is a new record at a new
// offset that carries the value's version (the offset of its put), so a
// version never changes. Writers are held off only while the index is
// copied (a few tens of milliseconds per million keys) and while each
// batch of copies is appended, never during the snapshot's write. Reads,
// copies and the snapshot share the CompactBytesPerSec budget. One
// compaction runs at a time; a second call waits for it or ctx.
func (s *CacheStore) Compact(ctx context.Context) (CompactResult, error) {
	leave, err := s.enterCompaction(ctx)
	if err != nil {
		return CompactResult{}, err
	}
	defer leave()
	if !s.opts.ownerSweeps {
		if _, err := s.SweepExpired(ctx, s.opts.Now()); err != nil {
			return CompactResult{}, err
		}
	}
	budget := newIOBudget(s.opts.CompactBytesPerSec, s.opts.Now)
	s.mu.RLock()
	prev := s.snapPoint
	s.mu.RUnlock()
	copied, err := s.copyForward(ctx, prev, budget)
	if err != nil {
		return CompactResult{}, err
	}
	point, entries, oldest, err := s.copyIndex()
	if err != nil {
		return CompactResult{}, err
	}
	// The snapshot names records below point: they must be on disk
	// before it is, whatever the fsync policy.
	if err := s.log.Sync(); err != nil {
		return CompactResult{}, s.storeError(err)
	}
	if err := writeCacheSnapshot(ctx, s.opts.FS, s.opts.Dir, point, entries, budget); err != nil {
		return CompactResult{}, err
	}
	s.mu.Lock()
	s.snapPoint = point
	s.mu.Unlock()
	n, err := s.log.DropBefore(min(oldest, point))
	res := CompactResult{Point: point, Keys: len(entries), Copied: copied, Dropped: n, Start: s.log.StartOffset()}
	if err != nil {
		// The snapshot stands; the segments go at the next compaction.
		return res, fmt.Errorf("core: cache store %s: compaction: %w", s.opts.Dir, err)
	}
	return res, nil
}

// copyForward copies the live values held below `below` to the end of
// the log (KindCacheCopy records carrying their versions), so that the
// segments under it hold nothing live and can go. It copies nothing when
// more than half the records there are live: dropping them would not pay
// for the copies. Values are read in one sequential pass, and each batch
// of copies is appended under the lock with only the keys still pointing
// at the record read (a key written meanwhile needs no copy). It returns
// how many values it copied.
func (s *CacheStore) copyForward(ctx context.Context, below uint64, budget *ioBudget) (int, error) {
	start := s.log.StartOffset()
	if below <= start {
		return 0, nil
	}
	s.mu.RLock()
	live := 0
	for _, e := range s.index {
		if e.loc < below {
			live++
		}
	}
	s.mu.RUnlock()
	if live == 0 || uint64(live) > (below-start)/2 {
		return 0, nil
	}
	cp := &copier{s: s, ctx: ctx, budget: budget}
	for from := start; from < below; {
		recs, next, err := s.log.Read(from, below, replayBatchRecords, 4<<20)
		if err != nil {
			return cp.copied, s.storeError(err)
		}
		if err := cp.take(recs); err != nil {
			return cp.copied, err
		}
		from = next
	}
	return cp.copied, cp.flush()
}

// copier batches the copies of one copyForward.
type copier struct {
	s       *CacheStore
	ctx     context.Context
	budget  *ioBudget
	keys    []string
	locs    []uint64 // the record each key pointed at when read
	entries []flog.Entry
	bytes   int
	copied  int
}

// copyBatchBytes bounds the copies appended under the lock at once.
const copyBatchBytes = 1 << 20

// take queues a copy of every record that still holds its key's value.
func (cp *copier) take(recs []flog.Record) error {
	for i := range recs {
		r := &recs[i]
		if !cachelog.HoldsValue(r.Kind) {
			continue
		}
		rec, _, err := cachelog.ParseCacheRecord(r.Kind, r.Payload)
		if err != nil {
			return wire.NewError(wire.CodeInternal, "cache shard %s: record at offset %d: %v", cp.s.opts.Dir, r.Offset, err)
		}
		if err := cp.budget.spend(cp.ctx, len(r.Payload)); err != nil {
			return err
		}
		cp.s.mu.RLock()
		e, ok := cp.s.index[rec.Key]
		cp.s.mu.RUnlock()
		if !ok || e.loc != r.Offset {
			continue
		}
		c := cachelog.CacheRecord{Kind: flog.KindCacheCopy, Key: rec.Key, ExpiresAt: rec.ExpiresAt, Version: versionOf(r.Offset, rec), Value: rec.Value}
		cp.keys, cp.locs = append(cp.keys, rec.Key), append(cp.locs, r.Offset)
		cp.entries = append(cp.entries, flog.Entry{Kind: flog.KindCacheCopy, Payload: c.Append(make([]byte, 0, c.Len()))})
		cp.bytes += c.Len()
		if cp.bytes >= copyBatchBytes {
			if err := cp.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush appends the queued copies whose keys did not change since they
// were read, and points the index at them.
func (cp *copier) flush() error {
	if len(cp.entries) == 0 {
		return nil
	}
	s := cp.s
	n := cp.bytes
	s.mu.Lock()
	keep := cp.entries[:0]
	var keys []string
	for i, k := range cp.keys {
		if e, ok := s.index[k]; ok && e.loc == cp.locs[i] {
			keep = append(keep, cp.entries[i])
			keys = append(keys, k)
		}
	}
	var err error
	if len(keep) > 0 {
		var w CacheStoreWrite
		if w, err = s.appendLocked(keep...); err == nil {
			for i, k := range keys {
				s.index[k] = storeEntry{loc: w.Offset + uint64(i), expiresAt: s.index[k].expiresAt}
			}
			cp.copied += len(keys)
		}
	}
	s.mu.Unlock()
	cp.keys, cp.locs, cp.entries, cp.bytes = cp.keys[:0], cp.locs[:0], cp.entries[:0], 0
	if err != nil {
		return err
	}
	return cp.budget.spend(cp.ctx, n)
}

// copyIndex copies the live index with the log's next offset, under the
// read lock so that no write lands in between.
func (s *CacheStore) copyIndex() (point uint64, entries []snapEntry, oldest uint64, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, nil, 0, s.storeError(flog.ErrClosed)
	}
	point = s.log.NextOffset()
	oldest = point
	entries = make([]snapEntry, 0, len(s.index))
	for k, e := range s.index {
		entries = append(entries, snapEntry{key: k, e: e})
		oldest = min(oldest, e.loc)
	}
	return point, entries, oldest, nil
}
