package core

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/wire"
)

// CacheKey names a cache.
type CacheKey struct{ Tenant, Namespace, Cache string }

// Cache is an in-memory key/value cache with optional per-entry TTL. Keys
// are spread over lock shards by FNV-1a hash; the entry and byte bounds
// apply to the whole cache. An entry's size is len(key)+len(value).
// Expiry is an absolute time: an entry whose expiry has passed is absent
// to every reader and is removed by the first Get/Delete/Sweep to see it.
type Cache struct {
	key CacheKey
	// maxEntries and maxBytes are the bounds. Invariant: entries <=
	// maxEntries and bytes <= maxBytes, except transiently after a limit
	// was lowered.
	maxEntries atomic.Int64
	maxBytes   atomic.Int64
	// entries and bytes count what the shards hold, expired entries
	// included until removed.
	entries atomic.Int64
	bytes   atomic.Int64
	mask    uint64
	shards  []cacheShard
	// placed is the cache's shard count from its spec (at least 1): how
	// many parts the cluster splits its keys into, not its lock shards.
	placed atomic.Uint32
	// log assigns offsets to applied writes and feeds watches.
	log cacheLog
	// store, when the broker has durable storage, is the cache's log on
	// disk: every applied write is one of its records, at the offset the
	// write takes. nil for an in-memory cache. Set before the cache is
	// shared and never changed.
	store *CacheStore
	// counters is the cache's counter log, beside store; nil exactly
	// when store is. Set before the cache is shared and never changed.
	counters *CounterStore
	// incarnation is the catalog's incarnation of the cache (its files
	// are the incarnation's).
	incarnation string
}

type cacheShard struct {
	mu sync.Mutex
	m  map[string]cacheEntry
	_  [48]byte // keep neighbouring locks off one cache line
}

type cacheEntry struct {
	value []byte
	// expiresAt is the expiry in Unix nanoseconds; 0 means never.
	expiresAt int64
	// offset is the offset of the write that set the entry.
	offset uint64
}

func (e cacheEntry) expired(now int64) bool { return e.expiresAt != 0 && now >= e.expiresAt }

func entrySize(key string, value []byte) int64 { return int64(len(key) + len(value)) }

// newCache returns an empty cache. Its first offset is the creation time
// in Unix nanoseconds, so offsets of an earlier cache of the same name (or
// an earlier broker process) are below it and read as older than the
// history.
func newCache(k CacheKey, shards int, maxEntries, maxBytes int64, env *watchEnv) *Cache {
	c := &Cache{key: k, mask: uint64(shards - 1), shards: make([]cacheShard, shards)}
	c.log.env, c.log.next = env, uint64(time.Now().UnixNano())
	c.log.setReleasedLocked(c.log.next)
	for i := range c.shards {
		c.shards[i].m = map[string]cacheEntry{}
	}
	c.setLimits(maxEntries, maxBytes)
	return c
}

func (c *Cache) setLimits(maxEntries, maxBytes int64) {
	c.maxEntries.Store(maxEntries)
	c.maxBytes.Store(maxBytes)
}

// Key returns the cache's name.
func (c *Cache) Key() CacheKey { return c.key }

// Limits returns the cache's entry and byte bounds.
func (c *Cache) Limits() (maxEntries, maxBytes int64) {
	return c.maxEntries.Load(), c.maxBytes.Load()
}

func (c *Cache) shard(key string) *cacheShard {
	return &c.shards[wire.KeyHash(key)&c.mask]
}

// Put stores a copy of value under key, replacing any previous value; ttl
// 0 means no expiry. A write that would pass the cache's bounds (counting
// only the size difference when it replaces a key) is refused with an
// overloaded *wire.Error, detail reason "cache_full"; one entry larger
// than the whole byte bound is refused as invalid_request. On a durable
// cache it returns once the put is in the log under the fsync policy; a
// write the log refuses (a full disk, a failed log, the key index at its
// bound) is refused and changes nothing.
func (c *Cache) Put(key string, value []byte, ttl time.Duration, now time.Time) error {
	if err := c.PutStaged(key, value, ttl, now); err != nil {
		return err
	}
	return c.WaitStaged(context.Background())
}

// PutStaged is Put without the wait for the log (see WaitStaged).
func (c *Cache) PutStaged(key string, value []byte, ttl time.Duration, now time.Time) error {
	if ttl < 0 {
		return wire.NewError(wire.CodeInvalidRequest, "negative ttl %v", ttl)
	}
	size := entrySize(key, value)
	if size > c.maxBytes.Load() {
		return wire.NewError(wire.CodeInvalidRequest, "cache entry of %d bytes exceeds the cache's %d byte bound", size, c.maxBytes.Load()).
			WithDetail("reason", "value_too_large")
	}
	e := cacheEntry{value: append(make([]byte, 0, len(value)), value...), expiresAt: expiry(now, ttl)}
	s := c.shard(key)
	s.mu.Lock()
	dEntries, dBytes, ok := c.reserve(s, key, size)
	if !ok {
		c.sweepLocked(s, now.UnixNano())
		if dEntries, dBytes, ok = c.reserve(s, key, size); !ok {
			s.mu.Unlock()
			return c.fullError()
		}
	}
	off, err := c.record(wire.CacheOpPut, key, e.value, e.expiresAt)
	if err != nil {
		c.entries.Add(-dEntries)
		c.bytes.Add(-dBytes)
		s.mu.Unlock()
		return err
	}
	e.offset = off
	s.m[key] = e
	s.mu.Unlock()
	return nil
}

func expiry(now time.Time, ttl time.Duration) int64 {
	if ttl == 0 {
		return 0
	}
	n := now.UnixNano()
	if n > math.MaxInt64-int64(ttl) {
		return math.MaxInt64
	}
	return n + int64(ttl)
}

// reserve accounts for writing an entry of size under key in s (whose lock
// the caller holds), or reports that the bounds would be passed. It
// returns the entry and byte deltas it applied, to undo them.
func (c *Cache) reserve(s *cacheShard, key string, size int64) (dEntries, dBytes int64, ok bool) {
	dEntries, dBytes = 1, size
	if old, ok := s.m[key]; ok {
		dEntries, dBytes = 0, size-entrySize(key, old.value)
	}
	if dEntries > 0 && c.entries.Add(dEntries) > c.maxEntries.Load() {
		c.entries.Add(-dEntries)
		return 0, 0, false
	}
	if dBytes > 0 && c.bytes.Add(dBytes) > c.maxBytes.Load() {
		c.bytes.Add(-dBytes)
		c.entries.Add(-dEntries)
		return 0, 0, false
	}
	if dBytes <= 0 {
		c.bytes.Add(dBytes)
	}
	return dEntries, dBytes, true
}

func (c *Cache) fullError() error {
	return wire.NewError(wire.CodeOverloaded, "cache %s is full (%d entries, %d bytes)", c.key.Cache, c.entries.Load(), c.bytes.Load()).
		WithDetail("reason", "cache_full")
}

// Get returns the value under key; an expired entry is absent (and
// removed). The returned slice is shared with the cache: do not modify it.
// On a log-backed cache it answers once every write appended before it
// is durable, so it never returns a write a crash could take back; a log
// that failed meanwhile makes the key read as absent (writes report the
// failure).
func (c *Cache) Get(key string, now time.Time) ([]byte, bool) {
	v, ok := c.GetStaged(key, now)
	if c.WaitStaged(context.Background()) != nil {
		return nil, false
	}
	return v, ok
}

// GetStaged is Get without the wait for the log (see WaitStaged).
func (c *Cache) GetStaged(key string, now time.Time) ([]byte, bool) {
	s := c.shard(key)
	s.mu.Lock()
	e, ok := s.m[key]
	if ok && e.expired(now.UnixNano()) {
		// A log-backed cache that cannot write the expiry keeps the
		// entry for a later sweep; it is absent either way.
		c.removeLocked(s, key, e, wire.CacheOpExpire)
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	return e.value, true
}

// Delete removes key and returns the value it held; an expired entry is
// removed but reported absent. On a durable cache it returns once the
// tombstone is in the log under the fsync policy; a tombstone the log
// refuses leaves the key in place and is the error.
func (c *Cache) Delete(key string, now time.Time) ([]byte, bool, error) {
	v, ok, err := c.DeleteStaged(key, now)
	if err == nil {
		err = c.WaitStaged(context.Background())
	}
	if err != nil {
		return nil, false, err
	}
	return v, ok, nil
}

// DeleteStaged is Delete without the wait for the log (see WaitStaged).
func (c *Cache) DeleteStaged(key string, now time.Time) ([]byte, bool, error) {
	s := c.shard(key)
	s.mu.Lock()
	e, ok := s.m[key]
	if !ok {
		s.mu.Unlock()
		return nil, false, nil
	}
	if e.expired(now.UnixNano()) {
		err := c.removeLocked(s, key, e, wire.CacheOpExpire)
		s.mu.Unlock()
		return nil, false, err
	}
	err := c.removeLocked(s, key, e, wire.CacheOpDelete)
	s.mu.Unlock()
	if err != nil {
		return nil, false, err
	}
	return e.value, true, nil
}

// removeLocked removes key's entry e from s (whose lock the caller holds)
// as an applied write of op. A write the log refuses removes nothing.
func (c *Cache) removeLocked(s *cacheShard, key string, e cacheEntry, op wire.CacheChangeOp) error {
	if _, err := c.record(op, key, nil, 0); err != nil {
		return err
	}
	delete(s.m, key)
	c.entries.Add(-1)
	c.bytes.Add(-entrySize(key, e.value))
	return nil
}

// Sweep removes every entry expired at now and returns how many it
// removed. It takes one lock shard at a time.
func (c *Cache) Sweep(now time.Time) int {
	n := 0
	ns := now.UnixNano()
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += c.sweepLocked(s, ns)
		s.mu.Unlock()
	}
	return n
}

func (c *Cache) sweepLocked(s *cacheShard, now int64) int {
	n := 0
	for k, e := range s.m {
		if !e.expired(now) {
			continue
		}
		if err := c.removeLocked(s, k, e, wire.CacheOpExpire); err != nil {
			return n // the log refuses writes: the next sweep tries again
		}
		n++
	}
	return n
}

// Len returns the entries and bytes held, counting expired entries not
// yet removed.
func (c *Cache) Len() (entries int64, bytes int64) {
	return c.entries.Load(), c.bytes.Load()
}
