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
	cs.serveKeyed(m, auth.ActionCacheWrite, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID, func(c *core.Cache) (wire.Message, *wire.Error) {
		return putIn(c, m)
	})
}

func (cs *controlStream) handleCacheGet(m *wire.CacheGet) {
	cs.serveKeyed(m, auth.ActionCacheRead, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID, func(c *core.Cache) (wire.Message, *wire.Error) {
		return getIn(c, m, cs.versions())
	})
}

func (cs *controlStream) handleCacheDelete(m *wire.CacheDelete) {
	cs.serveKeyed(m, auth.ActionCacheWrite, m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID, func(c *core.Cache) (wire.Message, *wire.Error) {
		return deleteIn(c, m)
	})
}

// keyedRequest is a client's request for one cache key.
type keyedRequest interface {
	wire.Message
	wire.Validator
}

// serveKeyed serves one request for a cache key: authorized for action,
// forwarded when another broker owns the key's shard, else run here and
// answered.
func (cs *controlStream) serveKeyed(m keyedRequest, action auth.Action, tenant, ns, cache, key string, reqID uint64,
	run func(*core.Cache) (wire.Message, *wire.Error)) {
	c, ok := cs.cacheFor(m, action, tenant, ns, cache, key, reqID)
	if !ok || cs.forwardCache(m, tenant, ns, cache, key, reqID) {
		return
	}
	if c.LogBacked() && cs.out != nil {
		cs.answerWhenDurable(c, run, reqID)
		return
	}
	msg, e := run(c)
	cs.answerCache(msg, e, reqID)
}

// answerWhenDurable runs a request on a log-backed cache here, in the
// stream's order, and answers it once what it applied or read is durable
// (core.Cache.WaitStaged), off the read loop: the stream's next requests
// are applied meanwhile, so the requests in flight on one stream share
// fsyncs. Each takes one of the stream's owed-answer slots, so at most
// MaxOwedAcks wait at once (the read loop waits for a slot); the stream's
// end waits for them.
func (cs *controlStream) answerWhenDurable(c *core.Cache, run func(*core.Cache) (wire.Message, *wire.Error), reqID uint64) {
	t, err := cs.out.reserveOwed(cs.ctx)
	if err != nil {
		return // the stream is ending
	}
	msg, e := run(c)
	started := cs.durableAnswers.Go(func() {
		if e == nil {
			if err := c.WaitStaged(cs.ctx); err != nil {
				msg, e = nil, asWireError(err)
			}
		}
		cs.out.sendOwed(t, cs.encodeAnswer(msg, e, reqID))
	})
	if !started {
		cs.out.cancelOwed(t)
	}
}

// encodeAnswer encodes a cache operation's answer or refusal.
func (cs *controlStream) encodeAnswer(m wire.Message, e *wire.Error, reqID uint64) []byte {
	if e != nil {
		em := e.ErrorMessage(cs.withCodes())
		em.RequestID = &reqID
		m = em
	}
	b, err := wire.AppendMessageFrame(nil, m)
	if err != nil {
		cs.srv.log.Error("cannot encode an answer", "type", m.MessageType(), "err", err)
		e := wire.NewError(wire.CodeInternal, "cannot encode the answer: %v", err).ErrorMessage(cs.withCodes())
		e.RequestID = &reqID
		b, _ = wire.AppendMessageFrame(nil, e)
	}
	return b
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
// forwards (forward.go). They use the Staged forms: on a log-backed cache
// the caller answers only after core.Cache.WaitStaged.
func putIn(c *core.Cache, m *wire.CachePut) (wire.Message, *wire.Error) {
	if err := c.PutStaged(m.Key, m.Value, ttlOf(m.TTLMs), time.Now()); err != nil {
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
	v, found, err := c.DeleteStaged(m.Key, time.Now())
	if err != nil {
		return nil, asWireError(err)
	}
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
