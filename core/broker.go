package core

import (
	"os"
	"sync"
	"time"

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
	// cluster names the cluster whose catalog the broker follows (see
	// SetCluster); durable streams are opened for it.
	cluster string
	// heldReported are the held stream directories already logged.
	heldReported map[string]bool
}

// NewBroker returns an empty broker core; zero Config fields take their
// defaults.
func NewBroker(cfg Config) *Broker {
	cfg = cfg.withDefaults()
	cfg.metrics = newCoreMetrics()
	cfg.promises = &promiseStore{}
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
	old, id, updated, err := b.updateStream(k, spec, policy)
	if updated || err != nil {
		return err
	}
	if old != nil {
		// The old stream's logs close before the new one opens the same
		// directories (or sets them aside, for another incarnation).
		old.close(ErrStreamDeleted, false)
		old.closeLogs()
	}
	// Opening logs runs recovery, which reads disk: not under the lock.
	st := newStream(b.cfg, spec, policy, id)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		st.close(ErrSubscriberClosed, true)
		st.closeLogs()
		return errBrokerClosed()
	}
	b.streams[k] = st
	b.mu.Unlock()
	return nil
}

// SetCluster names the cluster whose catalog the broker follows. Durable
// streams applied from now on are opened for it: their files must have
// been written for this cluster (or before clusters had ids).
func (b *Broker) SetCluster(id string) {
	b.mu.Lock()
	b.cluster = id
	b.mu.Unlock()
}

// updateStream updates the stream in place when its shard count,
// durability and identity are unchanged. Otherwise it takes the stream out
// of the registry and returns it for the caller to replace, with the
// identity the replacement is opened for.
func (b *Broker) updateStream(k StreamKey, spec wire.StreamSpec, policy QueuePolicy) (old *Stream, id StreamIdentity, updated bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, id, false, errBrokerClosed()
	}
	id = StreamIdentity{Cluster: b.cluster, Incarnation: spec.Incarnation}
	cur := b.streams[k]
	if cur != nil && cur.Shards() == max(spec.Shards, 1) && cur.Spec().Durable == spec.Durable && cur.identity == id {
		cur.update(spec, policy)
		return nil, id, true, nil
	}
	delete(b.streams, k)
	return cur, id, false, nil
}

// RemoveStream stops serving a stream, ending its subscribers with
// ErrStreamDeleted; later publishes to a *Stream still held fail with
// not_found. A durable stream's files stay where they are: only
// DeleteStream deletes them.
func (b *Broker) RemoveStream(k StreamKey) {
	b.mu.Lock()
	st := b.streams[k]
	delete(b.streams, k)
	b.mu.Unlock()
	if st != nil {
		st.close(ErrStreamDeleted, false)
		st.closeLogs()
	}
}

// DeleteStream deletes one incarnation of a stream, named by the catalog
// that deleted it: the stream stops being served if that is the
// incarnation served, and its files are deleted if they were written for
// it, in the cluster the broker follows. Files of any other identity stay.
func (b *Broker) DeleteStream(k StreamKey, incarnation string) {
	b.mu.Lock()
	id := StreamIdentity{Cluster: b.cluster, Incarnation: incarnation}
	st := b.streams[k]
	if st != nil && st.identity.matches(id) {
		delete(b.streams, k)
	} else {
		st = nil
	}
	b.mu.Unlock()
	if st != nil {
		st.close(ErrStreamDeleted, false)
		st.closeLogs()
	}
	if c := b.cfg.Storage; c != nil && c.Dir != "" {
		b.cfg.promises.forgetStream(c, k, incarnation)
		for _, dir := range c.deleteStreamFiles(k, id) {
			c.logger().Info("deleted a deleted stream's files", "stream", k.Stream, "tenant", k.Tenant, "namespace", k.Namespace, "identity", id.String(), "dir", dir)
		}
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
// update. With durable storage the cache is log-backed: its log is opened
// (and its entries loaded) here, outside the broker's lock, and a log
// that cannot be opened leaves the cache unserved and is the error. A
// durable cache applied again under another incarnation replaced one
// deleted while the broker was not looking: the old one is closed (its
// files kept) and the new one opened.
func (b *Broker) ApplyCache(spec wire.CacheSpec) error {
	if err := checkNames("cache", spec.TenantID, spec.Namespace, spec.Cache); err != nil {
		return err
	}
	k := CacheKey{Tenant: spec.TenantID, Namespace: spec.Namespace, Cache: spec.Cache}
	maxEntries, maxBytes := b.cacheLimits(spec)
	durable := b.cfg.Storage.durableCaches()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errBrokerClosed()
	}
	if c := b.caches[k]; c != nil && (!durable || c.incarnation == spec.Incarnation) {
		c.setLimits(maxEntries, maxBytes)
		c.placed.Store(max(spec.Shards, 1))
		b.mu.Unlock()
		return nil
	}
	old := b.caches[k]
	delete(b.caches, k)
	b.mu.Unlock()
	if old != nil {
		old.close(ErrCacheDeleted)
		old.closeStore()
	}
	c := newCache(k, b.cfg.CacheShards, maxEntries, maxBytes, b.watch)
	c.placed.Store(max(spec.Shards, 1))
	c.incarnation = spec.Incarnation
	if durable {
		st, base, err := b.openCacheStore(k, spec.Incarnation)
		if err == nil {
			if err = c.attachStore(st, base); err != nil {
				st.Close()
			}
		}
		if err == nil {
			if c.counters, err = b.openCounterStore(k, spec.Incarnation); err != nil {
				st.Close()
			}
		}
		if err != nil {
			b.cfg.Storage.logger().Error("durable cache not served: its log cannot be opened",
				"tenant", k.Tenant, "namespace", k.Namespace, "cache", k.Cache, "incarnation", spec.Incarnation, "err", err)
			return errCacheStorage(k, err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.caches[k] != nil {
		// Closed, or applied by someone else meanwhile: theirs stands.
		c.closeStore()
		if b.closed {
			return errBrokerClosed()
		}
		return nil
	}
	b.caches[k] = c
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

// RemoveCache stops serving a cache, ending its watches with
// ErrCacheDeleted. An in-memory cache's entries go with it; a durable
// cache's log is closed and its files kept (DeleteCache deletes them).
func (b *Broker) RemoveCache(k CacheKey) {
	b.mu.Lock()
	c := b.caches[k]
	delete(b.caches, k)
	b.mu.Unlock()
	if c != nil {
		c.close(ErrCacheDeleted)
		c.closeStore()
	}
}

// DeleteCache removes a deleted cache: as RemoveCache, and then the files
// of its incarnation incarnation, if it is durable. Files of any other
// incarnation stay.
func (b *Broker) DeleteCache(k CacheKey, incarnation string) {
	b.RemoveCache(k)
	c := b.cfg.Storage
	if !c.durableCaches() {
		return
	}
	dir, err := CacheDir(c.Dir, k, incarnation)
	if err != nil {
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		c.logger().Warn("removing a deleted cache's log", "dir", dir, "err", err)
		return
	}
	c.logger().Info("deleted a deleted cache's files", "cache", k.Cache, "tenant", k.Tenant, "namespace", k.Namespace, "dir", dir)
}

// Cache looks a cache up.
func (b *Broker) Cache(k CacheKey) (*Cache, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.caches[k]
	return c, ok
}

// SweepCaches removes the expired entries of every cache and returns how
// many it removed.
func (b *Broker) SweepCaches(now time.Time) int {
	b.mu.Lock()
	caches := make([]*Cache, 0, len(b.caches))
	for _, c := range b.caches {
		caches = append(caches, c)
	}
	b.mu.Unlock()
	n := 0
	for _, c := range caches {
		n += c.Sweep(now)
	}
	return n
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
		c.closeStore()
	}
	for _, st := range gone {
		st.close(ErrStreamDeleted, false)
		st.closeLogs()
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
		c.closeStore()
	}
	for _, st := range streams {
		st.close(ErrSubscriberClosed, true)
		st.closeLogs()
	}
}

// HeldStreams lists the durable stream directories under the storage
// root that no served stream owns (nobody deleted them, so they are kept)
// and every directory set aside for another incarnation; it sets
// felix_durable_streams_held and logs, once each, the ones it had not
// reported before.
func (b *Broker) HeldStreams() ([]HeldStream, error) {
	c := b.cfg.Storage
	if c == nil || c.Dir == "" {
		return nil, nil
	}
	b.mu.Lock()
	served := make(map[StreamKey]bool, len(b.streams))
	for k, st := range b.streams {
		served[k] = st.durable()
	}
	b.mu.Unlock()
	held, err := c.heldStreams(func(k StreamKey) bool { return served[k] })
	if err != nil {
		return nil, err
	}
	b.cfg.metrics.durable.streamsHeld.Set(float64(len(held)))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.heldReported == nil {
		b.heldReported = map[string]bool{}
	}
	now := make(map[string]bool, len(held))
	for _, h := range held {
		now[h.Dir] = true
		if !b.heldReported[h.Dir] {
			c.logger().Warn("durable stream files on disk that the catalog does not hold; keeping them, not serving them (they are served again if the stream comes back with the same identity)",
				"stream", h.Key.Stream, "tenant", h.Key.Tenant, "namespace", h.Key.Namespace, "identity", h.Identity.String(), "dir", h.Dir)
		}
	}
	b.heldReported = now
	return held, nil
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

// OpenStreamShard opens shard of the stream k for an ownership of
// generation (with Config.PlacedShards; without it every shard is open
// already). A durable shard opens its log and continues its offsets; an
// in-memory one starts empty. An open shard stays open, taking the new
// generation. A stream the broker does not hold refuses with not_found,
// a shard it does not have with invalid_request.
func (b *Broker) OpenStreamShard(k StreamKey, shard uint32, generation uint64) error {
	st, ok := b.Stream(k)
	if !ok {
		return wire.NewError(wire.CodeNotFound, "stream %s/%s/%s is not known to this broker", k.Tenant, k.Namespace, k.Stream)
	}
	return st.open(shard, generation)
}

// CloseStreamShard closes shard of the stream k on this broker: its
// subscribers end with cause (a *ShardMovedError when the shard moved),
// later requests to it are refused (Stream.Shard: shard_unavailable), and
// a durable shard's log closes; its files stay. It reports whether the
// shard was open.
func (b *Broker) CloseStreamShard(k StreamKey, shard uint32, cause error) bool {
	st, ok := b.Stream(k)
	if !ok {
		return false
	}
	return st.closeShard(shard, cause)
}
