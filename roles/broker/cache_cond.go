package broker

import (
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// Conditional cache writes and versioned gets (FEATURE_CACHE_CONDITIONAL).
// They are served like cache_put, cache_delete and cache_get: the same
// permissions, the same pipelining on a cache stream, and forwarded to the
// key's owner in a cluster, where the check and the write are atomic on
// the key. A forwarded conditional write whose answer is lost is answered
// outcome_unknown and never sent again (forwardCall with changes).

func (cs *controlStream) handleCachePutIf(m *wire.CachePutIf) {
	cs.serveKeyed(m, auth.ActionCacheWrite, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID, func(c *core.Cache) (wire.Message, *wire.Error) {
		return putIfIn(c, m)
	})
}

func (cs *controlStream) handleCacheDeleteIf(m *wire.CacheDeleteIf) {
	cs.serveKeyed(m, auth.ActionCacheWrite, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID, func(c *core.Cache) (wire.Message, *wire.Error) {
		return deleteIfIn(c, m)
	})
}

func (cs *controlStream) handleCacheGetVersioned(m *wire.CacheGetVersioned) {
	cs.serveKeyed(m, auth.ActionCacheRead, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID, func(c *core.Cache) (wire.Message, *wire.Error) {
		return getVersionedIn(c, m)
	})
}

// versions reports whether the client offered FEATURE_CACHE_CONDITIONAL,
// so the cache_value answering its get carries the value's version.
func (cs *controlStream) versions() bool { return cs.features&wire.FeatureCacheConditional != 0 }

// putIfIn, deleteIfIn and getVersionedIn run one operation on a cache this
// broker serves, for its own clients and forwarded ones, in their Staged
// forms (see putIn).
func putIfIn(c *core.Cache, m *wire.CachePutIf) (wire.Message, *wire.Error) {
	cond := core.CondAbsent()
	if !m.Condition.Absent {
		cond = core.CondVersion(m.Condition.Version)
	}
	r, err := c.PutIfStaged(m.Key, m.Value, ttlOf(m.TTLMs), cond, time.Now())
	if err != nil {
		return nil, asWireError(err)
	}
	return conditionResult(r, m.RequestID), nil
}

func deleteIfIn(c *core.Cache, m *wire.CacheDeleteIf) (wire.Message, *wire.Error) {
	r, err := c.DeleteIfStaged(m.Key, *m.Version, time.Now())
	if err != nil {
		return nil, asWireError(err)
	}
	return conditionResult(r, m.RequestID), nil
}

func getVersionedIn(c *core.Cache, m *wire.CacheGetVersioned) (wire.Message, *wire.Error) {
	return versionedValue(c, m.Key, m.RequestID, true), nil
}

// versionedValue is the cache_value answering a get of key: with the
// value's version when withVersion and the key was found.
func versionedValue(c *core.Cache, key string, reqID uint64, withVersion bool) *wire.CacheValue {
	v, ver, found := c.GetVersionedStaged(key, time.Now())
	m := &wire.CacheValue{RequestID: reqID, Key: key, Value: present(v, found)}
	if found && withVersion {
		m.Version = &ver
	}
	return m
}

func conditionResult(r core.CondResult, reqID uint64) *wire.CacheConditionResult {
	m := &wire.CacheConditionResult{Applied: r.Applied, RequestID: reqID}
	if r.HasVersion {
		v := r.Version
		m.Version = &v
	}
	return m
}

// ttlOf is a request's ttl_ms as a duration (nil: no expiry), clamped to
// what a time.Duration holds.
func ttlOf(ms *uint64) time.Duration {
	if ms == nil {
		return 0
	}
	return time.Duration(min(*ms, uint64(1<<63-1)/uint64(time.Millisecond))) * time.Millisecond
}
