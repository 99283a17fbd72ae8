package core

import (
	"errors"
	"fmt"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

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
		rec, _, err := cachelog.ParseCacheRecord(recs[i].Kind, recs[i].Payload)
		if err != nil {
			return out, recs[i].Offset, wire.NewError(wire.CodeInternal, "cache shard %s: record at offset %d: %v", s.opts.Dir, recs[i].Offset, err)
		}
		out = append(out, changeOf(recs[i].Offset, rec))
	}
	return out, next, nil
}

// changeOf is the watch change a record stands for.
func changeOf(off uint64, rec cachelog.CacheRecord) *CacheChange {
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
