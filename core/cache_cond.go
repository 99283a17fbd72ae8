package core

import (
	"context"
	"time"

	"github.com/felixmq/felix/wire"
)

// Conditional writes and versions (FEATURE_CACHE_CONDITIONAL).
//
// A value's version is the offset of the put that wrote it: the offset
// the cache's change log gave that write, the one a watch sees on its
// put change. A conditional write checks and writes under the key's shard
// lock, and the offset is taken under that lock too, so of a conditional
// write and any other write to the same key one is wholly before the
// other. A refused condition writes nothing, records no change and takes
// no offset. On a log-backed cache a conditional write answers only once
// the writes appended before its answer are durable, so a write to the
// key still waiting for its fsync is waited for, not reported early
// (put_if_absent_waits_for_a_staged_write_to_the_key). An expired entry counts as absent: a conditional write does
// not remove it (that would record an expiry), a put that finds the key
// absent replaces it as Put does.

// CacheCondition is what a conditional put requires of its key: no live
// entry (Absent), or a live entry at Version.
type CacheCondition struct {
	Absent  bool
	Version uint64 // without Absent
}

// CondAbsent is the condition "the key has no live entry".
func CondAbsent() CacheCondition { return CacheCondition{Absent: true} }

// CondVersion is the condition "the key's live entry is at version v".
func CondVersion(v uint64) CacheCondition { return CacheCondition{Version: v} }

// holds reports whether the condition holds for the key's entry e (live
// says whether there is a live one).
func (cond CacheCondition) holds(e cacheEntry, live bool) bool {
	if cond.Absent {
		return !live
	}
	return live && e.offset == cond.Version
}

// CondResult is the outcome of a conditional write, as cache_condition_result
// carries it. Applied, Version is the version the put wrote (an applied
// delete leaves the key without one). Refused, it is the key's current
// version; HasVersion is false when the key has no live entry.
type CondResult struct {
	Applied    bool
	Version    uint64
	HasVersion bool
}

// refusedBy is the result of a condition refused at the key's entry e.
func refusedBy(e cacheEntry, live bool) CondResult {
	if !live {
		return CondResult{}
	}
	return CondResult{Version: e.offset, HasVersion: true}
}

// liveLocked returns key's entry in s (whose lock the caller holds) and
// whether it is live at now; an expired entry is returned as not live and
// left in place.
func liveLocked(s *cacheShard, key string, now int64) (cacheEntry, bool) {
	e, ok := s.m[key]
	return e, ok && !e.expired(now)
}

// checkEntry refuses, as Put does, a negative ttl and an entry larger than
// the whole byte bound.
func (c *Cache) checkEntry(key string, value []byte, ttl time.Duration) error {
	if ttl < 0 {
		return wire.NewError(wire.CodeInvalidRequest, "negative ttl %v", ttl)
	}
	if size := entrySize(key, value); size > c.maxBytes.Load() {
		return wire.NewError(wire.CodeInvalidRequest, "cache entry of %d bytes exceeds the cache's %d byte bound", size, c.maxBytes.Load()).
			WithDetail("reason", "value_too_large")
	}
	return nil
}

// PutIf stores a copy of value under key, as Put does, only if cond holds
// for the key at now; ttl 0 means no expiry. A refusal is a result, not an
// error. The errors are Put's: a bad ttl or an oversized entry
// (invalid_request), or a write that would pass the cache's bounds
// (overloaded, reason cache_full), checked only once the condition holds.
func (c *Cache) PutIf(key string, value []byte, ttl time.Duration, cond CacheCondition, now time.Time) (CondResult, error) {
	r, err := c.PutIfStaged(key, value, ttl, cond, now)
	if err == nil {
		err = c.WaitStaged(context.Background())
	}
	if err != nil {
		return CondResult{}, err
	}
	return r, nil
}

// PutIfStaged is PutIf without the wait for the log (see WaitStaged).
// It is counted in felix_cache_conditional_writes_total by how its
// condition was decided (a later failed wait for the log is not).
func (c *Cache) PutIfStaged(key string, value []byte, ttl time.Duration, cond CacheCondition, now time.Time) (CondResult, error) {
	r, err := c.putIfStaged(key, value, ttl, cond, now)
	c.log.env.metrics.condWrites.count(false, r, err)
	return r, err
}

func (c *Cache) putIfStaged(key string, value []byte, ttl time.Duration, cond CacheCondition, now time.Time) (CondResult, error) {
	if err := c.checkEntry(key, value, ttl); err != nil {
		return CondResult{}, err
	}
	ns := now.UnixNano()
	s := c.shard(key)
	s.mu.Lock()
	if cur, live := liveLocked(s, key, ns); !cond.holds(cur, live) {
		s.mu.Unlock()
		return refusedBy(cur, live), nil
	}
	size := entrySize(key, value)
	dEntries, dBytes, ok := c.reserve(s, key, size)
	if !ok {
		c.sweepLocked(s, ns)
		if dEntries, dBytes, ok = c.reserve(s, key, size); !ok {
			s.mu.Unlock()
			return CondResult{}, c.fullError()
		}
	}
	e := cacheEntry{value: append(make([]byte, 0, len(value)), value...), expiresAt: expiry(now, ttl)}
	off, err := c.record(wire.CacheOpPut, key, e.value, e.expiresAt)
	if err != nil {
		c.entries.Add(-dEntries)
		c.bytes.Add(-dBytes)
		s.mu.Unlock()
		return CondResult{}, err
	}
	e.offset = off
	s.m[key] = e
	s.mu.Unlock()
	return CondResult{Applied: true, Version: e.offset, HasVersion: true}, nil
}

// DeleteIf removes key only if its live entry is at version at now. An
// applied delete is recorded as Delete's is and leaves the key without a
// version; a refusal reports the key's current version, if any. The
// in-memory cache never fails one; the log-backed cache's tombstone is a
// write that can.
func (c *Cache) DeleteIf(key string, version uint64, now time.Time) (CondResult, error) {
	r, err := c.DeleteIfStaged(key, version, now)
	if err == nil {
		err = c.WaitStaged(context.Background())
	}
	if err != nil {
		return CondResult{}, err
	}
	return r, nil
}

// DeleteIfStaged is DeleteIf without the wait for the log (see
// WaitStaged), counted as PutIfStaged is.
func (c *Cache) DeleteIfStaged(key string, version uint64, now time.Time) (CondResult, error) {
	r, err := c.deleteIfStaged(key, version, now)
	c.log.env.metrics.condWrites.count(true, r, err)
	return r, err
}

func (c *Cache) deleteIfStaged(key string, version uint64, now time.Time) (CondResult, error) {
	s := c.shard(key)
	s.mu.Lock()
	cur, live := liveLocked(s, key, now.UnixNano())
	if !CondVersion(version).holds(cur, live) {
		s.mu.Unlock()
		return refusedBy(cur, live), nil
	}
	err := c.removeLocked(s, key, cur, wire.CacheOpDelete)
	s.mu.Unlock()
	if err != nil {
		return CondResult{}, err
	}
	return CondResult{Applied: true}, nil
}

// GetVersioned is Get with the value's version: the offset of the put
// that wrote it. An expired entry is absent (and removed, as Get does).
// The returned slice is shared with the cache: do not modify it.
func (c *Cache) GetVersioned(key string, now time.Time) (value []byte, version uint64, ok bool) {
	value, version, ok = c.GetVersionedStaged(key, now)
	if c.WaitStaged(context.Background()) != nil {
		return nil, 0, false
	}
	return value, version, ok
}

// GetVersionedStaged is GetVersioned without the wait for the log (see
// WaitStaged).
func (c *Cache) GetVersionedStaged(key string, now time.Time) (value []byte, version uint64, ok bool) {
	s := c.shard(key)
	s.mu.Lock()
	e, found := s.m[key]
	if found && e.expired(now.UnixNano()) {
		c.removeLocked(s, key, e, wire.CacheOpExpire)
		found = false
	}
	s.mu.Unlock()
	if !found {
		return nil, 0, false
	}
	return e.value, e.offset, true
}
