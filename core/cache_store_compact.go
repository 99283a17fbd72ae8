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
	// Keys is how many live keys the snapshot holds.
	Keys int
	// Dropped is how many segments the log deleted; Start the log's
	// oldest offset after it.
	Dropped int
	Start   uint64
}

// Compact sweeps lapsed entries (unless the owner sweeps them), writes a snapshot of the live index
// (paced by CompactBytesPerSec), and then has the log delete the sealed
// segments wholly below both the snapshot's point and the oldest live
// version: every record in them is superseded, deleted or expired.
// Nothing is rewritten or renumbered; a version stays the offset of its
// put. Writers are held off only while the index is copied (a few tens
// of milliseconds per million keys), never during the write. One
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
	point, entries, oldest, err := s.copyIndex()
	if err != nil {
		return CompactResult{}, err
	}
	// The snapshot names records below point: they must be on disk
	// before it is, whatever the fsync policy.
	if err := s.log.Sync(); err != nil {
		return CompactResult{}, s.storeError(err)
	}
	budget := newIOBudget(s.opts.CompactBytesPerSec, s.opts.Now)
	if err := writeCacheSnapshot(ctx, s.opts.FS, s.opts.Dir, point, entries, budget); err != nil {
		return CompactResult{}, err
	}
	s.mu.Lock()
	s.snapPoint = point
	s.mu.Unlock()
	n, err := s.log.DropBefore(min(oldest, point))
	res := CompactResult{Point: point, Keys: len(entries), Dropped: n, Start: s.log.StartOffset()}
	if err != nil {
		// The snapshot stands; the segments go at the next compaction.
		return res, fmt.Errorf("core: cache store %s: compaction: %w", s.opts.Dir, err)
	}
	return res, nil
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
		oldest = min(oldest, e.version)
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
// next offset)), at most maxRecords of them and about maxBytes of values,
// and the offset to continue from: a watch's history read from the log.
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
