package core

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	select {
	case s.compact <- struct{}{}:
	case <-ctx.Done():
		return CompactResult{}, ctx.Err()
	}
	defer func() { <-s.compact }()
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
		if !holdsValue(r.Kind) {
			continue
		}
		rec, _, err := parseCacheRecord(r.Kind, r.Payload)
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
		c := cacheRecord{Kind: flog.KindCacheCopy, Key: rec.Key, ExpiresAt: rec.ExpiresAt, Version: versionOf(r.Offset, rec), Value: rec.Value}
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

// sweepBatch bounds the expiry records of one append.
const sweepBatch = 4096

// SweepExpired appends an expiry record for every entry lapsed at now
// and removes it from the index, so that a watcher sees the expiry as a
// change. It returns how many it expired, once their records are durable.
// A scan visits every key, so it runs only while some entry has an
// expiry.
func (s *CacheStore) SweepExpired(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for {
		n, w, err := s.sweepOnce(now.UnixNano())
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, nil
		}
		total += n
		if err := s.Wait(ctx, w); err != nil {
			return total, err
		}
		if n < sweepBatch {
			return total, nil
		}
	}
}

// sweepOnce expires up to sweepBatch lapsed entries in one append.
func (s *CacheStore) sweepOnce(now int64) (int, CacheStoreWrite, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.withTTL == 0 {
		return 0, CacheStoreWrite{}, nil
	}
	var keys []string
	var entries []flog.Entry
	for k, e := range s.index {
		if !e.expired(now) {
			continue
		}
		rec := cacheRecord{Kind: flog.KindCacheExpiry, Key: k}
		keys = append(keys, k)
		entries = append(entries, flog.Entry{Kind: flog.KindCacheExpiry, Payload: rec.Append(make([]byte, 0, rec.Len()))})
		if len(keys) == sweepBatch {
			break
		}
	}
	if len(keys) == 0 {
		return 0, CacheStoreWrite{}, nil
	}
	w, err := s.appendLocked(entries...)
	if err != nil {
		return 0, CacheStoreWrite{}, err
	}
	for _, k := range keys {
		s.removeLocked(k, s.index[k])
	}
	return len(keys), w, nil
}

// ErrCacheCompacted is matched (errors.Is) by the *CacheCompactedError of
// a history read below the log's start: a watcher resuming there must
// resnapshot (start from current values) instead.
var ErrCacheCompacted = errors.New("core: cache history compacted")

// CacheCompactedError says the history asked for was compacted away.
type CacheCompactedError struct {
	Requested, Start uint64
}

func (e *CacheCompactedError) Error() string {
	return fmt.Sprintf("cache history from offset %d is compacted; the oldest retained offset is %d", e.Requested, e.Start)
}

// Is makes the error match ErrCacheCompacted.
func (e *CacheCompactedError) Is(target error) bool { return target == ErrCacheCompacted }

// ReadChanges returns the changes of the records in [from, min(end,
// next offset)), from at most maxRecords records and about maxBytes of
// values, and the offset to continue from: a watch's history read from
// the log. Compaction's copies are skipped (they are not writes), so the
// offsets of the changes may skip some.
// Pass DurableOffset as end to read only what is durable. A from below
// StartOffset is a *CacheCompactedError; one past the next offset a
// *wire.Error (invalid_request, reason in_future).
func (s *CacheStore) ReadChanges(from, end uint64, maxRecords, maxBytes int) ([]*CacheChange, uint64, error) {
	end = min(end, s.log.NextOffset())
	if from >= end {
		if start := s.log.StartOffset(); from < start {
			return nil, from, &CacheCompactedError{Requested: from, Start: start}
		}
		if next := s.log.NextOffset(); from > next {
			return nil, from, wire.NewError(wire.CodeInvalidRequest, "offset %d is past the cache's next offset %d", from, next).
				WithDetail(wire.DetailReason, "in_future")
		}
		return nil, from, nil
	}
	recs, next, err := s.log.Read(from, end, maxRecords, maxBytes)
	var ce *flog.CursorError
	if errors.As(err, &ce) && ce.TooOld {
		return nil, from, &CacheCompactedError{Requested: from, Start: ce.Available}
	}
	if err != nil {
		return nil, from, s.storeError(err)
	}
	out := make([]*CacheChange, 0, len(recs))
	for i := range recs {
		if recs[i].Kind == flog.KindCacheCopy {
			continue // compaction's copy of a value: not a write
		}
		rec, _, err := parseCacheRecord(recs[i].Kind, recs[i].Payload)
		if err != nil {
			return out, recs[i].Offset, wire.NewError(wire.CodeInternal, "cache shard %s: record at offset %d: %v", s.opts.Dir, recs[i].Offset, err)
		}
		out = append(out, changeOf(recs[i].Offset, rec))
	}
	return out, next, nil
}

// changeOf is the watch change a record stands for.
func changeOf(off uint64, rec cacheRecord) *CacheChange {
	ch := &CacheChange{Offset: off, Key: rec.Key}
	switch rec.Kind {
	case flog.KindCachePut:
		ch.Op, ch.Value, ch.ExpiresAt = wire.CacheOpPut, rec.Value, rec.ExpiresAt
	case flog.KindCacheTombstone:
		ch.Op = wire.CacheOpDelete
	case flog.KindCacheExpiry:
		ch.Op = wire.CacheOpExpire
	}
	return ch
}

// maintain is the store's one background goroutine: it sweeps lapsed
// entries every SweepEvery and considers a compaction every
// CompactEvery. Close stops it, cancelling a compaction in progress (the
// previous snapshot stays).
func (s *CacheStore) maintain() {
	defer s.wg.Done()
	ctx := s.ctx
	sweepC, stopSweep := tickerC(s.opts.SweepEvery)
	defer stopSweep()
	compactC, stopCompact := tickerC(s.opts.CompactEvery)
	defer stopCompact()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweepC:
			if _, err := s.SweepExpired(ctx, s.opts.Now()); err != nil && ctx.Err() == nil {
				s.opts.Logger.Warn("cache store: expiry sweep", "dir", s.opts.Dir, "err", err)
			}
		case <-compactC:
			if !s.compactDue() {
				continue
			}
			if _, err := s.Compact(ctx); err != nil && ctx.Err() == nil {
				s.opts.Logger.Warn("cache store: compaction", "dir", s.opts.Dir, "err", err)
			}
		}
	}
}

// compactDue says whether enough records followed the last snapshot:
// CompactMinRecords, and at least half as many as there are live keys,
// so a compaction's write is paid for by what it lets go.
func (s *CacheStore) compactDue() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	since := s.log.NextOffset() - s.snapPoint
	return since >= s.opts.CompactMinRecords && since >= uint64(len(s.index)/2)
}

// tickerC returns a ticker's channel, or nil (never ready) for d == 0.
func tickerC(d time.Duration) (<-chan time.Time, func()) {
	if d <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(d)
	return t.C, t.Stop
}
