package core

import (
	"context"
	"time"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
)

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
		rec := cachelog.CacheRecord{Kind: flog.KindCacheExpiry, Key: k}
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

// maintain is the store's one background goroutine: it sweeps lapsed
// entries every SweepEvery and considers a compaction every
// CompactEvery. Close stops it, cancelling a compaction in progress (the
// previous snapshot stays).
func (s *CacheStore) maintain() {
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
