package broker

import (
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// cacheFor validates a cache request, authorizes action on its key and
// resolves the cache. Refusals are answered here.
func (cs *controlStream) cacheFor(v wire.Validator, action auth.Action, tenant, ns, cache, key string, reqID uint64) (*core.Cache, bool) {
	if err := v.Validate(); err != nil {
		cs.sendError(asWireError(err), &reqID)
		return nil, false
	}
	if e := cs.authorize(tenant, action, auth.CacheResource(tenant, ns, cache, key)); e != nil {
		cs.sendError(e, &reqID)
		return nil, false
	}
	c, e := cs.srv.resolveCache(tenant, ns, cache)
	if e != nil {
		cs.sendError(e, &reqID)
		return nil, false
	}
	return c, true
}

func (cs *controlStream) handleCachePut(m *wire.CachePut) {
	c, ok := cs.cacheFor(m, auth.ActionCacheWrite, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID)
	if !ok || cs.forwardCache(m, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID) {
		return
	}
	msg, e := putIn(c, m)
	cs.answerCache(msg, e, m.RequestID)
}

func (cs *controlStream) handleCacheGet(m *wire.CacheGet) {
	c, ok := cs.cacheFor(m, auth.ActionCacheRead, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID)
	if !ok || cs.forwardCache(m, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID) {
		return
	}
	msg, e := getIn(c, m, cs.versions())
	cs.answerCache(msg, e, m.RequestID)
}

func (cs *controlStream) handleCacheDelete(m *wire.CacheDelete) {
	c, ok := cs.cacheFor(m, auth.ActionCacheWrite, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID)
	if !ok || cs.forwardCache(m, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID) {
		return
	}
	msg, e := deleteIn(c, m)
	cs.answerCache(msg, e, m.RequestID)
}

// answerCache sends a cache operation's answer or refusal.
func (cs *controlStream) answerCache(m wire.Message, e *wire.Error, reqID uint64) {
	if e != nil {
		cs.sendError(e, &reqID)
		return
	}
	cs.sendMsg(m)
}

// putIn, getIn and deleteIn run one operation on a cache this
// broker serves: for its own clients, and for those another broker
// forwards (forward.go).
func putIn(c *core.Cache, m *wire.CachePut) (wire.Message, *wire.Error) {
	if err := c.Put(m.Key, m.Value, ttlOf(m.TTLMs), time.Now()); err != nil {
		return nil, asWireError(err)
	}
	return &wire.CacheOK{RequestID: m.RequestID}, nil
}

// getIn answers a get; versions: the client offered
// FEATURE_CACHE_CONDITIONAL, so the answer carries the value's version.
func getIn(c *core.Cache, m *wire.CacheGet, versions bool) (wire.Message, *wire.Error) {
	return versionedValue(c, m.Key, m.RequestID, versions), nil
}

func deleteIn(c *core.Cache, m *wire.CacheDelete) (wire.Message, *wire.Error) {
	v, found := c.Delete(m.Key, time.Now())
	return &wire.CacheValue{RequestID: m.RequestID, Key: m.Key, Value: present(v, found)}, nil
}

// present makes a found value non-nil, so an empty value is sent as ""
// and only an absent one as null.
func present(v []byte, found bool) []byte {
	if found && v == nil {
		return []byte{}
	}
	if !found {
		return nil
	}
	return v
}
