package broker

import (
	"sync"
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
//
// One goroutine per stream does the waiting (durableWaiter): it takes
// every answer queued so far, waits once per cache they touched, and
// sends them, then takes what queued meanwhile, until nothing is left. A
// WaitStaged that starts after a request was applied covers it, so one
// wait answers a whole burst.
func (cs *controlStream) answerWhenDurable(c *core.Cache, run func(*core.Cache) (wire.Message, *wire.Error), reqID uint64) {
	t, err := cs.out.reserveOwed(cs.ctx)
	if err != nil {
		return // the stream is ending
	}
	msg, e := run(c)
	w := &cs.durable
	w.mu.Lock()
	w.queue = append(w.queue, durableAnswer{c: c, ticket: t, msg: msg, e: e, reqID: reqID})
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start && !cs.durableAnswers.Go(cs.answerDurable) {
		// The stream is ending: nothing will wait, give the slots back.
		w.mu.Lock()
		q := w.queue
		w.queue, w.running = nil, false
		w.mu.Unlock()
		for _, a := range q {
			cs.out.cancelOwed(a.ticket)
		}
	}
}

// durableWaiter queues a stream's answers to requests on log-backed
// caches until their writes are durable.
type durableWaiter struct {
	mu      sync.Mutex
	queue   []durableAnswer
	running bool // answerDurable runs, and will take what is queued
}

// durableAnswer is one answer waiting for its cache's log.
type durableAnswer struct {
	c      *core.Cache
	ticket owedTicket
	msg    wire.Message
	e      *wire.Error
	reqID  uint64
}

// answerDurable answers the queued requests batch by batch until none is
// left.
func (cs *controlStream) answerDurable() {
	w := &cs.durable
	var spare []durableAnswer
	for {
		w.mu.Lock()
		batch := w.queue
		if len(batch) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.queue = spare[:0]
		w.mu.Unlock()
		waited := map[*core.Cache]*wire.Error{}
		for i := range batch {
			a := &batch[i]
			if a.e == nil {
				werr, done := waited[a.c]
				if !done {
					if err := a.c.WaitStaged(cs.ctx); err != nil {
						werr = asWireError(err)
					}
					waited[a.c] = werr
				}
				if werr != nil {
					a.msg, a.e = nil, werr
				}
			}
			cs.out.sendOwed(a.ticket, cs.encodeAnswer(a.msg, a.e, a.reqID))
			*a = durableAnswer{}
		}
		spare = batch
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
