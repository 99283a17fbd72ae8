package broker

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/roles/broker/catalogsync"
	"github.com/felixmq/felix/wire"
)

type nsKey struct{ tenant, ns string }

// catalogState applies the catalog to the broker core and remembers the
// tenants and namespaces that exist, which the core does not answer for.
// Streams and caches live in the core alone. It implements
// catalogsync.Applier; the syncer calls it from one goroutine.
type catalogState struct {
	core     *core.Broker
	verifier *auth.Verifier
	revs     *auth.Revocations
	streams  *streamRegistry
	log      *slog.Logger

	// heldStale says streams may have been kept on disk without being
	// served since the held streams were last counted.
	heldStale atomic.Bool
	// streamApplied, when set, is called after a stream was applied to
	// the core, to open the shards placed on this broker (ownership.go).
	streamApplied func(wire.StreamSpec)
	// lookups runs the on-demand passes of a miss (catalog_lookup.go);
	// nil until the sync loop starts.
	lookups atomic.Pointer[kindLookups]

	mu         sync.RWMutex
	tenants    map[string]struct{}
	namespaces map[nsKey]struct{}
}

var (
	_ catalogsync.Applier           = (*catalogState)(nil)
	_ catalogsync.RevocationApplier = (*catalogState)(nil)
)

func newCatalogState(b *core.Broker, v *auth.Verifier, streams *streamRegistry, log *slog.Logger) *catalogState {
	c := &catalogState{
		core: b, verifier: v, revs: streams.revs, streams: streams, log: log,
		tenants:    map[string]struct{}{},
		namespaces: map[nsKey]struct{}{},
	}
	c.heldStale.Store(true)
	return c
}

// SetCluster names the cluster the catalog comes from.
func (c *catalogState) SetCluster(id string) {
	c.core.SetCluster(id)
	c.heldStale.Store(true)
}

// ApplyTenant records a tenant.
func (c *catalogState) ApplyTenant(t wire.Tenant) {
	c.mu.Lock()
	c.tenants[t.TenantID] = struct{}{}
	c.mu.Unlock()
}

// RemoveTenant forgets a tenant and stops serving everything under it.
// Durable files stay: each stream the control plane deleted with the
// tenant arrives as a delete of its own.
func (c *catalogState) RemoveTenant(tenant string) {
	c.mu.Lock()
	delete(c.tenants, tenant)
	for k := range c.namespaces {
		if k.tenant == tenant {
			delete(c.namespaces, k)
		}
	}
	c.mu.Unlock()
	c.core.RemoveTenant(tenant)
	c.heldStale.Store(true)
}

// ApplyNamespace records a namespace.
func (c *catalogState) ApplyNamespace(n wire.Namespace) {
	c.mu.Lock()
	c.namespaces[nsKey{n.TenantID, n.Namespace}] = struct{}{}
	c.mu.Unlock()
}

// RemoveNamespace forgets a namespace and stops serving everything under
// it, keeping durable files as RemoveTenant does.
func (c *catalogState) RemoveNamespace(tenant, ns string) {
	c.mu.Lock()
	delete(c.namespaces, nsKey{tenant, ns})
	c.mu.Unlock()
	c.core.RemoveNamespace(tenant, ns)
	c.heldStale.Store(true)
}

// ApplyStream creates or updates a stream in the core. A durable stream
// on a broker without durable storage is served from memory; the log says
// so rather than let an operator believe its records survive a restart.
func (c *catalogState) ApplyStream(s wire.StreamSpec) error {
	if s.Durable && c.core.Config().Storage == nil {
		if _, known := c.core.Stream(core.StreamKey{Tenant: s.TenantID, Namespace: s.Namespace, Stream: s.Stream}); !known {
			c.log.Warn("stream is marked durable but this broker has no durable storage (FELIX_DURABLE_STORAGE_DIR); serving it from memory",
				"tenant", s.TenantID, "namespace", s.Namespace, "stream", s.Stream)
		}
	}
	if s.Durable {
		c.heldStale.Store(true)
	}
	if err := c.core.ApplyStream(s); err != nil {
		return err
	}
	if c.streamApplied != nil {
		c.streamApplied(s)
	}
	return nil
}

// RemoveStream deletes the incarnation of a stream the control plane
// deleted; its subscribers end, and its files go if they were written for
// that incarnation.
func (c *catalogState) RemoveStream(s wire.StreamSpec) {
	c.core.DeleteStream(core.StreamKey{Tenant: s.TenantID, Namespace: s.Namespace, Stream: s.Stream}, s.Incarnation)
	c.heldStale.Store(true)
}

// ForgetStream stops serving a stream that the catalog's snapshot no
// longer holds; its files stay.
func (c *catalogState) ForgetStream(s wire.StreamSpec) {
	k := core.StreamKey{Tenant: s.TenantID, Namespace: s.Namespace, Stream: s.Stream}
	if _, known := c.core.Stream(k); known {
		c.log.Warn("stream is missing from the catalog's snapshot, but nothing deleted it; no longer serving it, keeping any files it has",
			"tenant", s.TenantID, "namespace", s.Namespace, "stream", s.Stream, "incarnation", s.Incarnation)
	}
	c.core.RemoveStream(k)
	c.heldStale.Store(true)
}

// ApplyCache creates or updates a cache in the core.
func (c *catalogState) ApplyCache(s wire.CacheSpec) error { return c.core.ApplyCache(s) }

// RemoveCache deletes a cache: its entries, and the files of its
// incarnation when it is durable.
func (c *catalogState) RemoveCache(s wire.CacheSpec) {
	c.core.DeleteCache(core.CacheKey{Tenant: s.TenantID, Namespace: s.Namespace, Cache: s.Cache}, s.Incarnation)
}

// ForgetCache stops serving a cache the catalog's snapshot no longer
// holds, as ForgetStream does: nothing deleted it, so a durable cache's
// files are kept (and served again if it comes back).
func (c *catalogState) ForgetCache(s wire.CacheSpec) {
	c.core.RemoveCache(core.CacheKey{Tenant: s.TenantID, Namespace: s.Namespace, Cache: s.Cache})
}

// countHeld counts (and logs) the durable streams kept on disk without
// being served, when something may have changed them. The syncer calls it
// after a pass, when the catalog is complete; before that every stream
// on disk would look held.
func (c *catalogState) countHeld() {
	if !c.heldStale.Swap(false) {
		return
	}
	if _, err := c.core.HeldStreams(); err != nil {
		c.log.Warn("counting the durable streams kept without being served", "err", err)
	}
}

// OnJWKS hands a JWKS document from the catalog to the token verifier.
func (c *catalogState) OnJWKS(b []byte) {
	if err := c.verifier.SetJWKS(b); err != nil {
		c.log.Warn("ignored a JWKS from the catalog", "err", err)
	}
}

// checkNamespace reports not_found for a tenant or namespace the catalog
// does not hold.
func (c *catalogState) checkNamespace(tenant, ns string) error {
	c.mu.RLock()
	_, okT := c.tenants[tenant]
	_, okN := c.namespaces[nsKey{tenant, ns}]
	c.mu.RUnlock()
	if !okT {
		return wire.NewError(wire.CodeNotFound, "tenant not found: tenant=%s", tenant).WithDetail(wire.DetailReason, wire.ReasonTenantNotFound)
	}
	if !okN {
		return wire.NewError(wire.CodeNotFound, "namespace not found: tenant=%s namespace=%s", tenant, ns).
			WithDetail(wire.DetailReason, wire.ReasonNamespaceNotFound)
	}
	return nil
}

// kindLookups holds one catalogLookup per kind a miss can be for; each
// also reads the tenants and namespaces, which a new name may need too.
type kindLookups struct {
	streams, caches *catalogLookup
}

func newKindLookups(syncer *catalogsync.Syncer) *kindLookups {
	passOf := func(kind wire.CatalogKind) func(context.Context) error {
		return func(ctx context.Context) error {
			return syncer.SyncKinds(ctx, wire.KindTenants, wire.KindNamespaces, kind)
		}
	}
	return &kindLookups{streams: newCatalogLookup(passOf(wire.KindStreams)), caches: newCatalogLookup(passOf(wire.KindCaches))}
}

// askCatalog runs (or joins) an on-demand pass for a missed name of kind
// and reports whether one read the catalog without a failure, so what
// the broker holds now is what the catalog held when the pass began.
func (c *catalogState) askCatalog(ctx context.Context, kind wire.CatalogKind) bool {
	ls := c.lookups.Load()
	if ls == nil {
		return false
	}
	l := ls.streams
	if kind == wire.KindCaches {
		l = ls.caches
	}
	return l.refresh(ctx)
}

// runSync keeps the catalog, the signing keys and the revocations
// current until ctx ends, with the catalogsync loop.
func (s *Server) runSync(ctx context.Context) {
	defer s.bgWG.Done()
	syncer := catalogsync.NewSyncer(s.catalog, s.state, s.cfg.CatalogSyncInterval, s.log)
	syncer.OnJWKS = s.state.OnJWKS
	s.state.lookups.Store(newKindLookups(syncer))
	syncer.OnSynced = func() {
		s.markSynced()
		s.state.countHeld()
	}
	syncer.Run(ctx)
}

func (s *Server) markSynced() {
	s.syncOnce.Do(func() { close(s.synced) })
}

// Synced is closed after the first complete catalog sync.
func (s *Server) Synced() <-chan struct{} { return s.synced }

// sweepLoop removes expired cache entries every CacheSweepInterval.
func (s *Server) sweepLoop(ctx context.Context) {
	defer s.bgWG.Done()
	every(ctx, s.cfg.CacheSweepInterval, nil, func(now time.Time) { s.core.SweepCaches(now) })
}

// retentionLoop applies durable-stream retention periodically, so that
// age bounds act even on a stream nobody writes to.
func (s *Server) retentionLoop(ctx context.Context) {
	defer s.bgWG.Done()
	every(ctx, s.cfg.RetentionInterval, nil, func(time.Time) { s.core.ApplyRetention() })
}
