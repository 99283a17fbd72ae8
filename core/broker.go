package core

import (
	"sync"

	"github.com/felixmq/felix/wire"
)

// Broker is the registry of streams and caches. Only registry operations
// take its mutex; publishing, subscribing and cache access work on the
// *Stream and *Cache a lookup returned.
type Broker struct {
	cfg Config

	mu      sync.Mutex
	closed  bool
	streams map[StreamKey]*Stream
	caches  map[CacheKey]*Cache
	watch   *watchEnv
}

// NewBroker returns an empty broker core; zero Config fields take their
// defaults.
func NewBroker(cfg Config) *Broker {
	cfg = cfg.withDefaults()
	cfg.metrics = newCoreMetrics()
	b := &Broker{
		cfg:     cfg,
		streams: map[StreamKey]*Stream{},
		caches:  map[CacheKey]*Cache{},
		watch:   newWatchEnv(cfg),
	}
	return b
}

// Config returns the configuration in effect, defaults filled in.
func (b *Broker) Config() Config { return b.cfg }

func errBrokerClosed() *wire.Error {
	return wire.NewError(wire.CodeDraining, "broker core is closed")
}

func checkNames(kind string, names ...string) error {
	for _, n := range names {
		if n == "" {
			return wire.NewError(wire.CodeInvalidRequest, "%s spec has an empty name", kind)
		}
	}
	return nil
}

// ApplyStream creates the stream spec names or updates it. An update keeps
// the stream, its offsets and subscribers and changes the overflow policy;
// a different shard count replaces the stream, ending the old one's
// subscribers with ErrStreamDeleted.
func (b *Broker) ApplyStream(spec wire.StreamSpec) error {
	if err := checkNames("stream", spec.TenantID, spec.Namespace, spec.Stream); err != nil {
		return err
	}
	if spec.Shards > MaxStreamShards {
		return wire.NewError(wire.CodeInvalidRequest, "stream %s has %d shards; at most %d are supported", spec.Stream, spec.Shards, MaxStreamShards)
	}
	policy := b.cfg.DefaultPolicy
	if spec.SubQueuePolicy != "" {
		p, err := ParseQueuePolicy(spec.SubQueuePolicy)
		if err != nil {
			return err
		}
		policy = p
	}
	k := StreamKey{Tenant: spec.TenantID, Namespace: spec.Namespace, Stream: spec.Stream}
	old, updated, err := b.updateStream(k, spec, policy)
	if updated || err != nil {
		return err
	}
	if old != nil {
		// The old stream's logs close before the new one opens the same
		// directories.
		old.close(ErrStreamDeleted, false)
		old.closeLogs(false)
	}
	// Opening logs runs recovery, which reads disk: not under the lock.
	st := newStream(b.cfg, spec, policy)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		st.close(ErrSubscriberClosed, true)
		st.closeLogs(false)
		return errBrokerClosed()
	}
	b.streams[k] = st
	b.mu.Unlock()
	return nil
}

// updateStream updates the stream in place when its shard count and
// durability are unchanged. Otherwise it takes the stream out of the
// registry and returns it for the caller to replace.
func (b *Broker) updateStream(k StreamKey, spec wire.StreamSpec, policy QueuePolicy) (old *Stream, updated bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, false, errBrokerClosed()
	}
	cur := b.streams[k]
	if cur != nil && cur.Shards() == max(spec.Shards, 1) && cur.Spec().Durable == spec.Durable {
		cur.update(spec, policy)
		return nil, true, nil
	}
	delete(b.streams, k)
	return cur, false, nil
}

// RemoveStream removes a stream, ending its subscribers with
// ErrStreamDeleted; later publishes to a *Stream still held fail with
// not_found.
func (b *Broker) RemoveStream(k StreamKey) {
	b.mu.Lock()
	st := b.streams[k]
	delete(b.streams, k)
	b.mu.Unlock()
	if st != nil {
		st.close(ErrStreamDeleted, false)
		st.closeLogs(true)
	}
}

// Stream looks a stream up.
func (b *Broker) Stream(k StreamKey) (*Stream, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.streams[k]
	return st, ok
}

// ApplyCache creates a cache or updates its limits; entries survive an
// update.
func (b *Broker) ApplyCache(spec wire.CacheSpec) error {
	if err := checkNames("cache", spec.TenantID, spec.Namespace, spec.Cache); err != nil {
		return err
	}
	k := CacheKey{Tenant: spec.TenantID, Namespace: spec.Namespace, Cache: spec.Cache}
	maxEntries, maxBytes := b.cacheLimits(spec)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errBrokerClosed()
	}
	if c := b.caches[k]; c != nil {
		c.setLimits(maxEntries, maxBytes)
		return nil
	}
	b.caches[k] = newCache(k, b.cfg.CacheShards, maxEntries, maxBytes, b.watch)
	return nil
}

func (b *Broker) cacheLimits(spec wire.CacheSpec) (entries, bytes int64) {
	entries, bytes = b.cfg.CacheMaxEntries, b.cfg.CacheMaxBytes
	if spec.MaxEntries > 0 && spec.MaxEntries < 1<<62 {
		entries = int64(spec.MaxEntries)
	}
	if spec.MaxBytes > 0 && spec.MaxBytes < 1<<62 {
		bytes = int64(spec.MaxBytes)
	}
	return entries, bytes
}

// RemoveCache removes a cache and its entries, ending its watches with
// ErrCacheDeleted.
func (b *Broker) RemoveCache(k CacheKey) {
	b.mu.Lock()
	c := b.caches[k]
	delete(b.caches, k)
	b.mu.Unlock()
	if c != nil {
		c.close(ErrCacheDeleted)
	}
}

// Cache looks a cache up.
func (b *Broker) Cache(k CacheKey) (*Cache, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.caches[k]
	return c, ok
}

// RemoveTenant removes every stream and cache of a tenant.
func (b *Broker) RemoveTenant(tenant string) {
	b.removeWhere(func(t, _ string) bool { return t == tenant })
}

// RemoveNamespace removes every stream and cache of one namespace.
func (b *Broker) RemoveNamespace(tenant, ns string) {
	b.removeWhere(func(t, n string) bool { return t == tenant && n == ns })
}

func (b *Broker) removeWhere(match func(tenant, ns string) bool) {
	var gone []*Stream
	var goneCaches []*Cache
	b.mu.Lock()
	for k, st := range b.streams {
		if match(k.Tenant, k.Namespace) {
			gone = append(gone, st)
			delete(b.streams, k)
		}
	}
	for k, c := range b.caches {
		if match(k.Tenant, k.Namespace) {
			goneCaches = append(goneCaches, c)
			delete(b.caches, k)
		}
	}
	b.mu.Unlock()
	for _, c := range goneCaches {
		c.close(ErrCacheDeleted)
	}
	for _, st := range gone {
		st.close(ErrStreamDeleted, false)
		st.closeLogs(true)
	}
}

// Close ends every subscriber with ErrSubscriberClosed (releasing any
// publisher waiting on a full queue) and empties the registry; later
// Apply calls fail with draining. Core runs no goroutines of its own, so
// nothing outlives Close.
func (b *Broker) Close() {
	b.mu.Lock()
	b.closed = true
	streams, caches := b.streams, b.caches
	b.streams = map[StreamKey]*Stream{}
	b.caches = map[CacheKey]*Cache{}
	b.mu.Unlock()
	for _, c := range caches {
		c.close(ErrSubscriberClosed)
	}
	for _, st := range streams {
		st.close(ErrSubscriberClosed, true)
		st.closeLogs(false)
	}
}

// ApplyRetention deletes, on every durable stream, the sealed segments its
// retention no longer keeps. The broker calls it periodically so that
// age-based retention acts without waiting for a segment to roll.
func (b *Broker) ApplyRetention() {
	b.mu.Lock()
	streams := make([]*Stream, 0, len(b.streams))
	for _, st := range b.streams {
		if st.durable() {
			streams = append(streams, st)
		}
	}
	b.mu.Unlock()
	for _, st := range streams {
		st.applyRetention()
	}
}
