package broker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/roles/broker/catalogsync"
	"github.com/felixmq/felix/wire"
)

type nsKey struct{ tenant, ns string }

// catalogState applies the catalog to the broker core and remembers the
// tenants, namespaces and caches that exist, which the core does not
// answer for. It implements catalogsync.Applier.
type catalogState struct {
	core     *core.Broker
	verifier *auth.Verifier
	revs     *auth.Revocations
	streams  *streamRegistry
	log      *slog.Logger

	mu         sync.RWMutex
	tenants    map[string]struct{}
	namespaces map[nsKey]struct{}
	caches     map[core.CacheKey]struct{}
}

var (
	_ catalogsync.Applier           = (*catalogState)(nil)
	_ catalogsync.RevocationApplier = (*catalogState)(nil)
)

func newCatalogState(b *core.Broker, v *auth.Verifier, streams *streamRegistry, log *slog.Logger) *catalogState {
	return &catalogState{
		core: b, verifier: v, revs: streams.revs, streams: streams, log: log,
		tenants:    map[string]struct{}{},
		namespaces: map[nsKey]struct{}{},
		caches:     map[core.CacheKey]struct{}{},
	}
}

// ApplyTenant records a tenant.
func (c *catalogState) ApplyTenant(t wire.Tenant) {
	c.mu.Lock()
	c.tenants[t.TenantID] = struct{}{}
	c.mu.Unlock()
}

// RemoveTenant forgets a tenant and everything under it.
func (c *catalogState) RemoveTenant(tenant string) {
	c.mu.Lock()
	delete(c.tenants, tenant)
	for k := range c.namespaces {
		if k.tenant == tenant {
			delete(c.namespaces, k)
		}
	}
	for k := range c.caches {
		if k.Tenant == tenant {
			delete(c.caches, k)
		}
	}
	c.mu.Unlock()
	c.core.RemoveTenant(tenant)
}

// ApplyNamespace records a namespace.
func (c *catalogState) ApplyNamespace(n wire.Namespace) {
	c.mu.Lock()
	c.namespaces[nsKey{n.TenantID, n.Namespace}] = struct{}{}
	c.mu.Unlock()
}

// RemoveNamespace forgets a namespace and everything under it.
func (c *catalogState) RemoveNamespace(tenant, ns string) {
	c.mu.Lock()
	delete(c.namespaces, nsKey{tenant, ns})
	for k := range c.caches {
		if k.Tenant == tenant && k.Namespace == ns {
			delete(c.caches, k)
		}
	}
	c.mu.Unlock()
	c.core.RemoveNamespace(tenant, ns)
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
	return c.core.ApplyStream(s)
}

// RemoveStream deletes a stream; its subscribers end.
func (c *catalogState) RemoveStream(s wire.StreamSpec) {
	c.core.RemoveStream(core.StreamKey{Tenant: s.TenantID, Namespace: s.Namespace, Stream: s.Stream})
}

// ApplyCache creates or updates a cache in the core.
func (c *catalogState) ApplyCache(s wire.CacheSpec) error {
	if err := c.core.ApplyCache(s); err != nil {
		return err
	}
	c.mu.Lock()
	c.caches[core.CacheKey{Tenant: s.TenantID, Namespace: s.Namespace, Cache: s.Cache}] = struct{}{}
	c.mu.Unlock()
	return nil
}

// RemoveCache deletes a cache and its entries.
func (c *catalogState) RemoveCache(s wire.CacheSpec) {
	k := core.CacheKey{Tenant: s.TenantID, Namespace: s.Namespace, Cache: s.Cache}
	c.mu.Lock()
	delete(c.caches, k)
	c.mu.Unlock()
	c.core.RemoveCache(k)
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
		return wire.NewError(wire.CodeNotFound, "tenant not found: tenant=%s", tenant)
	}
	if !okN {
		return wire.NewError(wire.CodeNotFound, "namespace not found: tenant=%s namespace=%s", tenant, ns)
	}
	return nil
}

func (c *catalogState) cacheKeys() []core.CacheKey {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]core.CacheKey, 0, len(c.caches))
	for k := range c.caches {
		out = append(out, k)
	}
	return out
}

// syncLoop keeps the catalog, the signing keys and the revocations
// current until ctx ends. The syncer hands every JWKS it fetches to the
// verifier.
func (s *Server) syncLoop(ctx context.Context) {
	defer s.bgWG.Done()
	syncer := catalogsync.NewSyncer(s.catalog, s.state, s.cfg.CatalogSyncInterval, s.log)
	syncer.OnJWKS = s.state.OnJWKS
	t := time.NewTicker(s.cfg.CatalogSyncInterval)
	defer t.Stop()
	var lastErr string
	for {
		err := syncer.SyncOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if syncer.Synced() {
			s.markSynced()
		}
		switch {
		case err == nil && lastErr != "":
			s.log.Info("catalog sync recovered")
			lastErr = ""
		case err != nil && err.Error() != lastErr:
			lastErr = err.Error()
			s.log.Warn("catalog sync failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) markSynced() {
	s.syncOnce.Do(func() { close(s.synced) })
}

// Synced is closed after the first complete catalog sync.
func (s *Server) Synced() <-chan struct{} { return s.synced }

// sweepLoop removes expired cache entries every CacheSweepInterval.
func (s *Server) sweepLoop(ctx context.Context) {
	defer s.bgWG.Done()
	t := time.NewTicker(s.cfg.CacheSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, k := range s.state.cacheKeys() {
				if c, ok := s.core.Cache(k); ok {
					c.Sweep(now)
				}
			}
		}
	}
}

// retentionLoop applies durable-stream retention periodically, so that
// age bounds act even on a stream nobody writes to.
func (s *Server) retentionLoop(ctx context.Context) {
	defer s.bgWG.Done()
	t := time.NewTicker(s.cfg.RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.core.ApplyRetention()
		}
	}
}
