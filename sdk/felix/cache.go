package felix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/wire"
)

const cacheQueueLen = 256 // requests queued per cache worker

// CachePut stores value under key in namespace/cache. ttl 0 means no
// expiry. A nil value is stored as an empty one.
func (c *Client) CachePut(ctx context.Context, namespace, cache, key string, value []byte, ttl time.Duration) error {
	if ttl < 0 {
		return invalidArg("negative ttl %v", ttl)
	}
	m := &wire.CachePut{TenantID: c.cfg.Tenant, Namespace: namespace, Cache: cache, Key: key, Value: nonNil(value)}
	if ttl > 0 {
		ms := uint64((ttl + time.Millisecond - 1) / time.Millisecond)
		m.TTLMs = &ms
	}
	_, err := c.cacheCall(ctx, m, &m.RequestID)
	return err
}

// CacheGet reads key. found is false when the key is absent or expired; a
// stored empty value is returned as a non-nil empty slice with found true.
func (c *Client) CacheGet(ctx context.Context, namespace, cache, key string) (value []byte, found bool, err error) {
	m := &wire.CacheGet{TenantID: c.cfg.Tenant, Namespace: namespace, Cache: cache, Key: key}
	value, err = c.cacheCall(ctx, m, &m.RequestID)
	return value, value != nil, err
}

// CacheDelete removes key and returns the value it held (found false when
// there was none). It needs a broker that advertised FEATURE_CACHE_DELETE;
// otherwise it fails with a *BrokerError of code unsupported, sending
// nothing.
func (c *Client) CacheDelete(ctx context.Context, namespace, cache, key string) (value []byte, found bool, err error) {
	if c.serverFeatures&wire.FeatureCacheDelete == 0 {
		return nil, false, notSent(unsupported("cache_delete (FEATURE_CACHE_DELETE)"))
	}
	m := &wire.CacheDelete{TenantID: c.cfg.Tenant, Namespace: namespace, Cache: cache, Key: key}
	value, err = c.cacheCall(ctx, m, &m.RequestID)
	return value, value != nil, err
}

// cacheReq is one cache round trip handed to a worker.
type cacheReq struct {
	ctx  context.Context
	msg  wire.Message
	id   uint64
	resC chan cacheResult // buffered 1
}

type cacheResult struct {
	value []byte
	err   error
}

// cacheCall validates msg, gives it a request id and runs it on a worker
// picked round-robin.
func (c *Client) cacheCall(ctx context.Context, msg wire.Message, idField *uint64) ([]byte, error) {
	if v, ok := msg.(wire.Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, notSent(fmt.Errorf("felix: %w", err))
		}
	}
	if err := c.checkUsable(); err != nil {
		return nil, err
	}
	*idField = c.newRequestID()
	r := &cacheReq{ctx: ctx, msg: msg, id: *idField, resC: make(chan cacheResult, 1)}
	w := c.cache.pick()
	select {
	case w.reqC <- r:
	case <-ctx.Done():
		return nil, notSent(ctx.Err())
	case <-c.closedC:
		return nil, notSent(ErrClosed)
	}
	select {
	case res := <-r.resC:
		return res.value, res.err
	case <-ctx.Done():
		return nil, ctx.Err() // the worker finishes the round trip and drops the answer
	case <-c.closedC:
		return nil, ErrClosed
	}
}

// cachePool is a fixed set of workers, each doing sequential round trips
// on its own stream.
type cachePool struct {
	workers []*cacheWorker
	next    atomic.Uint32
}

func newCachePool(c *Client, first *ctrlStream) *cachePool {
	p := &cachePool{}
	for i := range c.cfg.CacheStreams {
		w := &cacheWorker{c: c, reqC: make(chan *cacheReq, cacheQueueLen)}
		if i == 0 {
			w.cs = first
		}
		p.workers = append(p.workers, w)
		c.spawn(w.run)
	}
	return p
}

func (p *cachePool) pick() *cacheWorker {
	return p.workers[(p.next.Add(1)-1)%uint32(len(p.workers))]
}

// cacheWorker owns one authenticated stream (reopened after a failure).
type cacheWorker struct {
	c    *Client
	reqC chan *cacheReq
	cs   *ctrlStream
}

func (w *cacheWorker) run() {
	defer func() {
		if w.cs != nil {
			w.cs.abort()
		}
	}()
	for {
		select {
		case r := <-w.reqC:
			if r.ctx.Err() != nil {
				r.resC <- cacheResult{err: notSent(r.ctx.Err())}
				continue
			}
			r.resC <- w.roundTrip(r)
		case <-w.c.ctx.Done():
			return
		}
	}
}

// roundTrip writes one request and reads its answer. Any failure drops the
// stream; the next request opens a new one.
func (w *cacheWorker) roundTrip(r *cacheReq) cacheResult {
	if w.cs == nil {
		cs, err := w.c.openStream(w.c.ctx)
		if err != nil {
			return cacheResult{err: err}
		}
		w.cs = cs
	}
	frame, err := wire.AppendMessageFrame(nil, r.msg)
	if err != nil {
		return cacheResult{err: notSent(err)}
	}
	// A caller that stops waiting resets the stream, so a broker that never
	// answers holds this worker only as long as someone waits.
	cs := w.cs
	stop := context.AfterFunc(r.ctx, cs.abort)
	defer stop()
	if _, err := cs.s.Write(frame); err != nil {
		w.drop()
		return cacheResult{err: w.roundTripErr(r, err)}
	}
	value, err := w.readAnswer(r.id)
	if err != nil {
		w.drop()
		var be *BrokerError
		if !errors.As(err, &be) {
			err = w.roundTripErr(r, err)
		}
	}
	return cacheResult{value: value, err: err}
}

func (w *cacheWorker) roundTripErr(r *cacheReq, err error) error {
	if r.ctx.Err() != nil && !w.c.dead() {
		return r.ctx.Err()
	}
	return w.c.failure(err)
}

func (w *cacheWorker) drop() {
	w.cs.abort()
	w.cs = nil
}

// readAnswer reads until the answer to id arrives. A refusal is a
// *BrokerError (the broker ends the stream after one).
func (w *cacheWorker) readAnswer(id uint64) ([]byte, error) {
	for {
		msg, err := readMessage(w.cs.fr)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("felix: the broker ended the cache stream")
			}
			return nil, err
		}
		switch m := msg.(type) {
		case *wire.CacheOK:
			if m.RequestID == id {
				return nil, nil
			}
		case *wire.CacheValue:
			if m.RequestID == id {
				return m.Value, nil
			}
		case *wire.ErrorMsg:
			if m.RequestID == nil || *m.RequestID == id {
				return nil, fromWire(m.Err())
			}
		case *wire.Unsupported:
			return nil, unsupported(m.RequestType)
		}
	}
}
