package core

import (
	"fmt"
	"path/filepath"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
)

// replayBatch bounds one log read of the rebuild.
const (
	replayBatchRecords = 8192
	replayBatchBytes   = 32 << 20
)

// rebuild loads the index: the snapshot's entries when the snapshot is
// usable, then every record from its point (or from the log's start) on.
// Whether the snapshot is usable, or the open must fail, is
// cachelog.SnapshotUse's decision (which inspect shares).
func (s *CacheStore) rebuild() error {
	s.opts.FS.Remove(filepath.Join(s.opts.Dir, cachelog.SnapshotFile+".tmp")) // a compaction a crash cut short
	start, next := s.log.StartOffset(), s.log.NextOffset()
	idx := map[string]storeEntry{}
	oldest := next
	sized := func(n int) { idx = make(map[string]storeEntry, n) } // no rehashing while a million keys load
	point, found, err := readCacheSnapshot(s.opts.FS, s.opts.Dir, sized, func(k string, e storeEntry) {
		idx[k] = e
		oldest = min(oldest, e.loc)
	})
	usable, unusable, err := cachelog.SnapshotUse(point, oldest, found, err, start, next)
	if err != nil {
		return err
	}
	if unusable != nil {
		s.opts.Logger.Warn("cache store: index snapshot unusable; replaying the whole log", "dir", s.opts.Dir, "err", unusable)
	}
	if !usable {
		idx, point = map[string]storeEntry{}, 0
	}
	s.index = idx
	s.snapPoint = 0
	if usable {
		s.snapPoint = point
	}
	if err := s.replay(point, next); err != nil {
		return err
	}
	for k, e := range s.index {
		s.indexBytes += indexCost(k)
		s.withTTL += ttlCount(e)
	}
	if s.indexBytes > s.opts.MaxIndexBytes {
		s.opts.Logger.Warn("cache store: the rebuilt index is over its bound; new keys are refused until keys are deleted",
			"dir", s.opts.Dir, "index_bytes", s.indexBytes, "limit", s.opts.MaxIndexBytes, "keys", len(s.index))
	}
	return nil
}

// replay applies the records [from, to) to the index.
func (s *CacheStore) replay(from, to uint64) error {
	for from < to {
		recs, n, err := s.log.Read(from, to, replayBatchRecords, replayBatchBytes)
		if err != nil {
			return fmt.Errorf("replay from %d: %w", from, err)
		}
		if len(recs) == 0 {
			return fmt.Errorf("replay from %d: the log returned nothing before %d", from, to)
		}
		for i := range recs {
			if err := s.applyRecord(&recs[i]); err != nil {
				return err
			}
		}
		from = n
	}
	return nil
}

// applyRecord applies one record to the index (no accounting: rebuild
// sums it at the end).
func (s *CacheStore) applyRecord(r *flog.Record) error {
	rec, _, err := cachelog.ParseCacheRecord(r.Kind, r.Payload)
	if err != nil {
		return fmt.Errorf("record at offset %d: %w", r.Offset, err)
	}
	if cachelog.HoldsValue(rec.Kind) {
		s.index[rec.Key] = storeEntry{loc: r.Offset, expiresAt: rec.ExpiresAt}
	} else {
		delete(s.index, rec.Key)
	}
	return nil
}
