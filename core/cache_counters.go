package core

import (
	"path/filepath"

	"github.com/felixmq/felix/core/cachelog"
	"github.com/felixmq/felix/wire"
)

// openCounterStore opens (or creates) the counter log of a cache
// incarnation, beside its cache log and under the same fsync policy.
func (b *Broker) openCounterStore(k CacheKey, incarnation string) (*CounterStore, error) {
	c := b.cfg.Storage
	dir, err := CacheDir(c.Dir, k, incarnation)
	if err != nil {
		return nil, err
	}
	return OpenCounterStore(CounterStoreOptions{StoreLogOptions: c.cacheLogOptions(filepath.Join(dir, cachelog.CounterDir))})
}

// errCountersNeedStorage refuses a counter operation on a cache without
// a log: counters are durable only.
func (c *Cache) errCountersNeedStorage() *wire.Error {
	return wire.NewError(wire.CodeUnsupported,
		"cache %s/%s/%s: counters need durable storage, and this broker keeps its caches in memory (start it with a data directory)",
		c.key.Tenant, c.key.Namespace, c.key.Cache).WithDetail(wire.DetailReason, "counters_need_durable_storage")
}

// CounterAddStaged adds delta to the counter key and returns the sum
// including it, once the delta is in the counter log (not yet durable:
// answer after WaitStaged), and counts it in felix_counter_adds_total. A cache without a log refuses it
// (unsupported); so does a sum that would overflow int64
// (invalid_request, reason counter_overflow).
func (c *Cache) CounterAddStaged(key string, delta int64) (int64, error) {
	if c.counters == nil {
		return 0, c.errCountersNeedStorage()
	}
	sum, _, err := c.counters.AppendAdd(key, delta)
	if err == nil {
		c.log.env.metrics.counterAdds.Inc()
	}
	return sum, err
}

// CounterGetStaged returns the sum of the counter key, ok false when it
// was never written; answer after WaitStaged, so the adds it saw are
// durable.
func (c *Cache) CounterGetStaged(key string) (sum int64, ok bool, err error) {
	if c.counters == nil {
		return 0, false, c.errCountersNeedStorage()
	}
	return c.counters.Peek(key)
}

// forgetShardCounters forgets the counters whose key in reports (see
// DropShard) and asks for their records to be made durable.
func (c *Cache) forgetShardCounters(in func(string) bool) {
	if c.counters == nil {
		return
	}
	if _, _, err := c.counters.AppendForget(in); err != nil {
		c.counters.opts.Logger.Warn("a dropped cache shard's counters could not be forgotten; they stay", "cache", c.key.Cache, "err", err)
		return
	}
	c.counters.log.SyncSoon()
}

// HasCounters reports whether the cache serves counters (it has a log).
func (c *Cache) HasCounters() bool { return c.counters != nil }

// closeCounters closes the counter log, keeping its files.
func (c *Cache) closeCounters() {
	if c.counters == nil {
		return
	}
	if err := c.counters.Close(); err != nil {
		c.counters.opts.Logger.Warn("closing a durable cache's counter log", "cache", c.key.Cache, "err", err)
	}
}
