package felix

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/wire"
)

// Bounds of one cache stream. Overflow policy: a caller waits for a free
// in-flight slot (until its ctx ends) before its request is queued, so
// neither the queue nor the pending map grows past these and nothing is
// dropped.
const (
	cacheQueueLen      = 256       // requests queued for one stream's writer
	cacheMaxInFlight   = 256       // requests written or queued, awaiting an answer, per stream
	cacheCoalesceBytes = 256 << 10 // one Write call carries at most about this much
)

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

// cacheCall validates msg, gives it a request id, encodes it and runs it
// on a stream picked round-robin. Failures before the frame could have
// left the client are marked not sent; that is what lets ClusterClient
// retry a delete.
func (c *Client) cacheCall(ctx context.Context, msg wire.Message, idField *uint64) ([]byte, error) {
	res, err := c.requestCall(ctx, msg, idField)
	return res.value, err
}

// requestCall runs one request/answer exchange on the request streams the
// cache calls use (they carry any request answered by request_id).
func (c *Client) requestCall(ctx context.Context, msg wire.Message, idField *uint64) (cacheResult, error) {
	if v, ok := msg.(wire.Validator); ok {
		if err := v.Validate(); err != nil {
			return cacheResult{}, notSent(fmt.Errorf("felix: %w", err))
		}
	}
	if err := c.checkUsable(); err != nil {
		return cacheResult{}, notSent(c.failure(err))
	}
	id := c.newRequestID()
	*idField = id
	frame, err := wire.AppendMessageFrame(nil, msg)
	if err != nil {
		return cacheResult{}, notSent(err)
	}
	w := c.cache.pick()
	p, err := w.enqueue(ctx, id, frame)
	if err != nil {
		return cacheResult{}, err
	}
	return w.await(ctx, id, p)
}

// cachePool is a fixed set of cache streams, each with its own writer,
// reader and pending map.
type cachePool struct {
	workers []*cacheWorker
	next    atomic.Uint32
}

// newCachePool starts one worker per configured stream. first, already
// authenticated by Connect, becomes the first worker's stream.
func newCachePool(c *Client, first *ctrlStream) *cachePool {
	p := &cachePool{}
	for i := range c.cfg.CacheStreams {
		w := newCacheWorker(c)
		if i == 0 {
			w.first = first
		}
		p.workers = append(p.workers, w)
		if !c.spawn(w.run) && w.first != nil {
			w.first.abort()
		}
	}
	return p
}

func (p *cachePool) pick() *cacheWorker {
	return p.workers[(p.next.Add(1)-1)%uint32(len(p.workers))]
}
