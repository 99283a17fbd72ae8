package core

import (
	"context"
	"fmt"
	"time"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
)

// CounterCompactResult reports one compaction of a counter log.
type CounterCompactResult struct {
	// Point is the log's next offset when the keys were taken: every
	// counter has a checkpoint at or after it.
	Point uint64
	// Checkpoints is how many checkpoints were written; Dropped how many
	// segments the log deleted; Start its oldest offset after it.
	Checkpoints int
	Dropped     int
	Start       uint64
}

// counterCheckpointBatch bounds the checkpoints appended under the lock
// at once, so adders wait at most one batch.
const counterCheckpointBatch = 4096

// Compact collapses the deltas into checkpoints: it takes the keys and
// the log's next offset (the point) under the lock, appends, in batches
// under the lock, one checkpoint per key carrying its sum at that moment,
// makes them durable whatever the policy, and has the log delete the
// sealed segments wholly below the point. Every key then has a
// checkpoint at or after the point (a key first written after it has all
// its records after it), so the fold of what is left gives every sum.
// Nothing is rewritten or renumbered: a checkpoint is a new record at a
// new offset. One compaction runs at a time; a second call waits for it
// or ctx.
func (s *CounterStore) Compact(ctx context.Context) (CounterCompactResult, error) {
	leave, err := s.enterCompaction(ctx)
	if err != nil {
		return CounterCompactResult{}, err
	}
	defer leave()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return CounterCompactResult{}, s.storeError(flog.ErrClosed)
	}
	point := s.log.NextOffset()
	keys := make([]string, 0, len(s.sums))
	for k := range s.sums {
		keys = append(keys, k)
	}
	s.compactedAt = point
	s.mu.Unlock()
	res := CounterCompactResult{Point: point}
	for len(keys) > 0 {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		n := min(len(keys), counterCheckpointBatch)
		if err := s.checkpoint(keys[:n]); err != nil {
			return res, err
		}
		res.Checkpoints += n
		keys = keys[n:]
	}
	// The checkpoints stand in for the records below point: they must be
	// on disk before those go, whatever the fsync policy.
	if err := s.log.Sync(); err != nil {
		return res, s.storeError(err)
	}
	n, err := s.log.DropBefore(point)
	res.Dropped, res.Start = n, s.log.StartOffset()
	if err != nil {
		return res, fmt.Errorf("core: counter log %s: compaction: %w", s.opts.Dir, err)
	}
	return res, nil
}

// checkpoint appends one checkpoint per key with its current sum.
func (s *CounterStore) checkpoint(keys []string) error {
	entries := make([]flog.Entry, len(keys))
	s.mu.Lock()
	defer s.mu.Unlock()
	entries = entries[:0]
	for _, k := range keys {
		sum, ok := s.sums[k]
		if !ok {
			continue // forgotten since the point: a checkpoint would bring it back
		}
		rec := cachelog.CounterRecord{Kind: flog.KindCounterCheckpoint, Key: k, Value: sum}
		entries = append(entries, flog.Entry{Kind: flog.KindCounterCheckpoint, Payload: rec.Append(make([]byte, 0, rec.Len()))})
	}
	if len(entries) == 0 {
		return nil
	}
	_, err := s.appendLocked(entries...)
	return err
}

// maintain compacts every CompactEvery once enough records followed the
// last compaction, until Close.
func (s *CounterStore) maintain() {
	t := time.NewTicker(s.opts.CompactEvery)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if !s.compactDue() {
			continue
		}
		if _, err := s.Compact(s.ctx); err != nil && s.ctx.Err() == nil {
			s.opts.Logger.Warn("counter log compaction failed", "dir", s.opts.Dir, "err", err)
		}
	}
}

// compactDue reports whether enough records followed the last
// compaction (or the log's start) to pay for one.
func (s *CounterStore) compactDue() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	since := s.log.NextOffset() - max(s.compactedAt, s.log.StartOffset())
	return since >= s.opts.CompactMinRecords && since >= 2*uint64(len(s.sums))
}
