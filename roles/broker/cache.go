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
	if !ok {
		return
	}
	var ttl time.Duration
	if m.TTLMs != nil {
		ttl = time.Duration(min(*m.TTLMs, uint64(1<<63-1)/uint64(time.Millisecond))) * time.Millisecond
	}
	if err := c.Put(m.Key, m.Value, ttl, time.Now()); err != nil {
		cs.sendError(asWireError(err), &m.RequestID)
		return
	}
	cs.sendMsg(&wire.CacheOK{RequestID: m.RequestID})
}

func (cs *controlStream) handleCacheGet(m *wire.CacheGet) {
	c, ok := cs.cacheFor(m, auth.ActionCacheRead, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID)
	if !ok {
		return
	}
	v, found := c.Get(m.Key, time.Now())
	cs.sendMsg(&wire.CacheValue{RequestID: m.RequestID, Key: m.Key, Value: present(v, found)})
}

func (cs *controlStream) handleCacheDelete(m *wire.CacheDelete) {
	c, ok := cs.cacheFor(m, auth.ActionCacheWrite, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID)
	if !ok {
		return
	}
	v, found := c.Delete(m.Key, time.Now())
	cs.sendMsg(&wire.CacheValue{RequestID: m.RequestID, Key: m.Key, Value: present(v, found)})
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
