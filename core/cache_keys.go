package core

import (
	"slices"
	"strings"
	"time"
)

// MaxCacheKeysPage bounds the keys one Keys call returns.
const MaxCacheKeysPage = 1000

// Keys returns, in byte order, up to limit keys of the cache that start
// with prefix and sort after after ("" starts at the beginning), leaving
// out expired entries; more says whether keys past the last one remain.
// A caller pages through the cache by passing the last key it got as the
// next after. limit is clamped to 1..MaxCacheKeysPage.
//
// It takes one lock shard at a time and keeps at most limit+1 keys, so a
// page costs a scan of the cache but memory bounded by the page; keys
// written during the scan may or may not appear.
func (c *Cache) Keys(prefix, after string, limit int, now time.Time) (keys []string, more bool) {
	limit = min(max(limit, 1), MaxCacheKeysPage)
	ns := now.UnixNano()
	// best holds the smallest limit+1 matching keys seen, sorted.
	best := make([]string, 0, limit+1)
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k, e := range s.m {
			if k <= after || !strings.HasPrefix(k, prefix) || e.expired(ns) {
				continue
			}
			if len(best) == limit+1 && k >= best[limit] {
				continue
			}
			at, _ := slices.BinarySearch(best, k)
			if len(best) == limit+1 {
				best = best[:limit]
			}
			best = slices.Insert(best, at, k)
		}
		s.mu.Unlock()
	}
	if len(best) > limit {
		return best[:limit], true
	}
	return best, false
}
