package controlplane

import (
	"context"

	"github.com/felixmq/felix/raftmeta/catalog"
	"github.com/felixmq/felix/wire"
)

// CreateTenant implements Store.
func (s *RaftStore) CreateTenant(ctx context.Context, t wire.Tenant) error {
	return s.write(ctx, wire.KindTenants, catalog.ModeCreate, wire.CatalogItem{Tenant: &t})
}

// PutTenant implements Store.
func (s *RaftStore) PutTenant(ctx context.Context, t wire.Tenant) error {
	return s.write(ctx, wire.KindTenants, catalog.ModePut, wire.CatalogItem{Tenant: &t})
}

// DeleteTenant implements Store.
func (s *RaftStore) DeleteTenant(ctx context.Context, id string, recursive bool) error {
	return s.drop(ctx, wire.KindTenants, tenantKey(id), recursive)
}

// Tenant implements Store.
func (s *RaftStore) Tenant(ctx context.Context, id string) (wire.Tenant, bool, error) {
	it, ok, err := s.item(ctx, wire.KindTenants, tenantKey(id))
	if !ok || err != nil || it.Tenant == nil {
		return wire.Tenant{}, false, err
	}
	return *it.Tenant, true, nil
}

// Tenants implements Store.
func (s *RaftStore) Tenants(ctx context.Context) ([]wire.Tenant, error) {
	items, err := s.items(ctx, wire.KindTenants, "")
	return resources(items, err, func(it wire.CatalogItem) *wire.Tenant { return it.Tenant })
}

// CreateNamespace implements Store.
func (s *RaftStore) CreateNamespace(ctx context.Context, n wire.Namespace) error {
	return s.write(ctx, wire.KindNamespaces, catalog.ModeCreate, wire.CatalogItem{Namespace: &n})
}

// PutNamespace implements Store.
func (s *RaftStore) PutNamespace(ctx context.Context, n wire.Namespace) error {
	return s.write(ctx, wire.KindNamespaces, catalog.ModePut, wire.CatalogItem{Namespace: &n})
}

// DeleteNamespace implements Store.
func (s *RaftStore) DeleteNamespace(ctx context.Context, tenant, ns string, recursive bool) error {
	return s.drop(ctx, wire.KindNamespaces, namespaceKey(tenant, ns), recursive)
}

// Namespace implements Store.
func (s *RaftStore) Namespace(ctx context.Context, tenant, ns string) (wire.Namespace, bool, error) {
	it, ok, err := s.item(ctx, wire.KindNamespaces, namespaceKey(tenant, ns))
	if !ok || err != nil || it.Namespace == nil {
		return wire.Namespace{}, false, err
	}
	return *it.Namespace, true, nil
}

// Namespaces implements Store.
func (s *RaftStore) Namespaces(ctx context.Context, tenant string) ([]wire.Namespace, error) {
	items, err := s.items(ctx, wire.KindNamespaces, childPrefix(tenantKey(tenant)))
	return resources(items, err, func(it wire.CatalogItem) *wire.Namespace { return it.Namespace })
}

// CreateStream implements Store.
func (s *RaftStore) CreateStream(ctx context.Context, sp wire.StreamSpec) error {
	return s.write(ctx, wire.KindStreams, catalog.ModeCreate, wire.CatalogItem{Stream: &sp})
}

// PutStream implements Store.
func (s *RaftStore) PutStream(ctx context.Context, sp wire.StreamSpec) error {
	return s.write(ctx, wire.KindStreams, catalog.ModePut, wire.CatalogItem{Stream: &sp})
}

// UpdateStream implements Store.
func (s *RaftStore) UpdateStream(ctx context.Context, sp wire.StreamSpec) error {
	return s.write(ctx, wire.KindStreams, catalog.ModeUpdate, wire.CatalogItem{Stream: &sp})
}

// DeleteStream implements Store.
func (s *RaftStore) DeleteStream(ctx context.Context, tenant, ns, stream string) error {
	return s.drop(ctx, wire.KindStreams, childKey(tenant, ns, stream), false)
}

// Stream implements Store.
func (s *RaftStore) Stream(ctx context.Context, tenant, ns, stream string) (wire.StreamSpec, bool, error) {
	it, ok, err := s.item(ctx, wire.KindStreams, childKey(tenant, ns, stream))
	if !ok || err != nil || it.Stream == nil {
		return wire.StreamSpec{}, false, err
	}
	return *it.Stream, true, nil
}

// Streams implements Store.
func (s *RaftStore) Streams(ctx context.Context, tenant, ns string) ([]wire.StreamSpec, error) {
	items, err := s.items(ctx, wire.KindStreams, childPrefix(namespaceKey(tenant, ns)))
	return resources(items, err, func(it wire.CatalogItem) *wire.StreamSpec { return it.Stream })
}

// CreateCache implements Store.
func (s *RaftStore) CreateCache(ctx context.Context, c wire.CacheSpec) error {
	return s.write(ctx, wire.KindCaches, catalog.ModeCreate, wire.CatalogItem{Cache: &c})
}

// PutCache implements Store.
func (s *RaftStore) PutCache(ctx context.Context, c wire.CacheSpec) error {
	return s.write(ctx, wire.KindCaches, catalog.ModePut, wire.CatalogItem{Cache: &c})
}

// DeleteCache implements Store.
func (s *RaftStore) DeleteCache(ctx context.Context, tenant, ns, cache string) error {
	return s.drop(ctx, wire.KindCaches, childKey(tenant, ns, cache), false)
}

// Cache implements Store.
func (s *RaftStore) Cache(ctx context.Context, tenant, ns, cache string) (wire.CacheSpec, bool, error) {
	it, ok, err := s.item(ctx, wire.KindCaches, childKey(tenant, ns, cache))
	if !ok || err != nil || it.Cache == nil {
		return wire.CacheSpec{}, false, err
	}
	return *it.Cache, true, nil
}

// Caches implements Store.
func (s *RaftStore) Caches(ctx context.Context, tenant, ns string) ([]wire.CacheSpec, error) {
	items, err := s.items(ctx, wire.KindCaches, childPrefix(namespaceKey(tenant, ns)))
	return resources(items, err, func(it wire.CatalogItem) *wire.CacheSpec { return it.Cache })
}

// resources extracts each item's resource, skipping items of another kind.
func resources[T any](items []wire.CatalogItem, err error, get func(wire.CatalogItem) *T) ([]T, error) {
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(items))
	for _, it := range items {
		if v := get(it); v != nil {
			out = append(out, *v)
		}
	}
	return out, nil
}
