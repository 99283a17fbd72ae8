package controlplane

import (
	"context"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/felixmq/felix/wire"
)

// putMode says how a write treats an existing resource.
type putMode int

const (
	modeCreate putMode = iota // refuse when it exists
	modePut                   // create or replace
	modeUpdate                // refuse when it does not exist
)

// parentRef names the resource a write needs to exist first.
type parentRef struct {
	kind wire.CatalogKind
	key  string
	what string // for messages, e.g. `namespace "acme/prod"`
}

// write is one resource mutation: kind, key, the item to store, and its
// parent (zero for tenants).
func (s *BoltStore) write(ctx context.Context, kind wire.CatalogKind, key, what string, parent parentRef, item wire.CatalogItem, mode putMode) error {
	return s.update(ctx, func(w *writer) error {
		if parent.kind != "" && !w.exists(parent.kind, parent.key) {
			return notFound(parent.what + " does not exist")
		}
		has := w.exists(kind, key)
		if mode == modeCreate && has {
			return conflict(what + " already exists")
		}
		if mode == modeUpdate && !has {
			return notFound(what + " does not exist")
		}
		return w.put(kind, key, item)
	})
}

// drop removes a resource; children lists the kinds that live under
// prefix and must be empty unless recursive.
func (s *BoltStore) drop(ctx context.Context, kind wire.CatalogKind, key, what string, children []wire.CatalogKind, recursive bool) error {
	return s.update(ctx, func(w *writer) error {
		if !w.exists(kind, key) {
			return notFound(what + " does not exist")
		}
		prefix := childPrefix(key)
		if !recursive {
			if held := describeChildren(w, children, prefix); held != "" {
				return conflict(fmt.Sprintf("%s still holds %s; delete them first or pass recursive=true", what, held))
			}
		}
		for _, ck := range children {
			if err := w.removePrefix(ck, prefix); err != nil {
				return err
			}
		}
		_, err := w.remove(kind, key)
		return err
	})
}

func describeChildren(w *writer, kinds []wire.CatalogKind, prefix string) string {
	var parts []string
	for _, k := range kinds {
		if n := len(w.keysWithPrefix(k, prefix)); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return strings.Join(parts, ", ")
}

// get reads one live item.
func (s *BoltStore) get(ctx context.Context, kind wire.CatalogKind, key string) (wire.CatalogItem, bool, error) {
	var (
		it wire.CatalogItem
		ok bool
	)
	err := s.view(ctx, func(tx *bolt.Tx) error {
		raw := tx.Bucket(liveBuckets[kind]).Get([]byte(key))
		if raw == nil {
			return nil
		}
		var err error
		it, err = decodeItem(raw)
		ok = err == nil
		return err
	})
	return it, ok, err
}

// list reads every live item of kind under prefix, in key order.
func (s *BoltStore) list(ctx context.Context, kind wire.CatalogKind, prefix string) ([]wire.CatalogItem, error) {
	var out []wire.CatalogItem
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(liveBuckets[kind]).Cursor()
		p := []byte(prefix)
		for k, v := c.Seek(p); k != nil && hasPrefix(k, p); k, v = c.Next() {
			it, err := decodeItem(v)
			if err != nil {
				return fmt.Errorf("%s %q: %w", kind, k, err)
			}
			out = append(out, it)
		}
		return nil
	})
	return out, err
}

func tenantWhat(t string) string        { return fmt.Sprintf("tenant %q", t) }
func namespaceWhat(t, ns string) string { return fmt.Sprintf("namespace %q", namespaceKey(t, ns)) }
func streamWhat(t, ns, s string) string { return fmt.Sprintf("stream %q", childKey(t, ns, s)) }
func cacheWhat(t, ns, c string) string  { return fmt.Sprintf("cache %q", childKey(t, ns, c)) }

func tenantParent(t string) parentRef {
	return parentRef{kind: wire.KindTenants, key: tenantKey(t), what: tenantWhat(t)}
}

func namespaceParent(t, ns string) parentRef {
	return parentRef{kind: wire.KindNamespaces, key: namespaceKey(t, ns), what: namespaceWhat(t, ns)}
}

// CreateTenant implements Store.
func (s *BoltStore) CreateTenant(ctx context.Context, t wire.Tenant) error {
	return s.write(ctx, wire.KindTenants, tenantKey(t.TenantID), tenantWhat(t.TenantID), parentRef{}, wire.CatalogItem{Tenant: &t}, modeCreate)
}

// PutTenant implements Store.
func (s *BoltStore) PutTenant(ctx context.Context, t wire.Tenant) error {
	return s.write(ctx, wire.KindTenants, tenantKey(t.TenantID), tenantWhat(t.TenantID), parentRef{}, wire.CatalogItem{Tenant: &t}, modePut)
}

// DeleteTenant implements Store.
func (s *BoltStore) DeleteTenant(ctx context.Context, id string, recursive bool) error {
	children := []wire.CatalogKind{wire.KindStreams, wire.KindCaches, wire.KindNamespaces}
	return s.drop(ctx, wire.KindTenants, tenantKey(id), tenantWhat(id), children, recursive)
}

// Tenant implements Store.
func (s *BoltStore) Tenant(ctx context.Context, id string) (wire.Tenant, bool, error) {
	it, ok, err := s.get(ctx, wire.KindTenants, tenantKey(id))
	if !ok || err != nil || it.Tenant == nil {
		return wire.Tenant{}, false, err
	}
	return *it.Tenant, true, nil
}

// Tenants implements Store.
func (s *BoltStore) Tenants(ctx context.Context) ([]wire.Tenant, error) {
	items, err := s.list(ctx, wire.KindTenants, "")
	return resources(items, err, func(it wire.CatalogItem) *wire.Tenant { return it.Tenant })
}

// CreateNamespace implements Store.
func (s *BoltStore) CreateNamespace(ctx context.Context, n wire.Namespace) error {
	return s.write(ctx, wire.KindNamespaces, nsKey(n), namespaceWhat(n.TenantID, n.Namespace), tenantParent(n.TenantID), wire.CatalogItem{Namespace: &n}, modeCreate)
}

// PutNamespace implements Store.
func (s *BoltStore) PutNamespace(ctx context.Context, n wire.Namespace) error {
	return s.write(ctx, wire.KindNamespaces, nsKey(n), namespaceWhat(n.TenantID, n.Namespace), tenantParent(n.TenantID), wire.CatalogItem{Namespace: &n}, modePut)
}

// DeleteNamespace implements Store.
func (s *BoltStore) DeleteNamespace(ctx context.Context, tenant, ns string, recursive bool) error {
	children := []wire.CatalogKind{wire.KindStreams, wire.KindCaches}
	return s.drop(ctx, wire.KindNamespaces, namespaceKey(tenant, ns), namespaceWhat(tenant, ns), children, recursive)
}

// Namespace implements Store.
func (s *BoltStore) Namespace(ctx context.Context, tenant, ns string) (wire.Namespace, bool, error) {
	it, ok, err := s.get(ctx, wire.KindNamespaces, namespaceKey(tenant, ns))
	if !ok || err != nil || it.Namespace == nil {
		return wire.Namespace{}, false, err
	}
	return *it.Namespace, true, nil
}

// Namespaces implements Store.
func (s *BoltStore) Namespaces(ctx context.Context, tenant string) ([]wire.Namespace, error) {
	items, err := s.list(ctx, wire.KindNamespaces, childPrefix(tenantKey(tenant)))
	return resources(items, err, func(it wire.CatalogItem) *wire.Namespace { return it.Namespace })
}

func (s *BoltStore) writeStream(ctx context.Context, sp wire.StreamSpec, mode putMode) error {
	return s.write(ctx, wire.KindStreams, streamKey(sp), streamWhat(sp.TenantID, sp.Namespace, sp.Stream),
		namespaceParent(sp.TenantID, sp.Namespace), wire.CatalogItem{Stream: &sp}, mode)
}

// CreateStream implements Store.
func (s *BoltStore) CreateStream(ctx context.Context, sp wire.StreamSpec) error {
	return s.writeStream(ctx, sp, modeCreate)
}

// PutStream implements Store.
func (s *BoltStore) PutStream(ctx context.Context, sp wire.StreamSpec) error {
	return s.writeStream(ctx, sp, modePut)
}

// UpdateStream implements Store.
func (s *BoltStore) UpdateStream(ctx context.Context, sp wire.StreamSpec) error {
	return s.writeStream(ctx, sp, modeUpdate)
}

// DeleteStream implements Store.
func (s *BoltStore) DeleteStream(ctx context.Context, tenant, ns, stream string) error {
	return s.drop(ctx, wire.KindStreams, childKey(tenant, ns, stream), streamWhat(tenant, ns, stream), nil, false)
}

// Stream implements Store.
func (s *BoltStore) Stream(ctx context.Context, tenant, ns, stream string) (wire.StreamSpec, bool, error) {
	it, ok, err := s.get(ctx, wire.KindStreams, childKey(tenant, ns, stream))
	if !ok || err != nil || it.Stream == nil {
		return wire.StreamSpec{}, false, err
	}
	return *it.Stream, true, nil
}

// Streams implements Store.
func (s *BoltStore) Streams(ctx context.Context, tenant, ns string) ([]wire.StreamSpec, error) {
	items, err := s.list(ctx, wire.KindStreams, childPrefix(namespaceKey(tenant, ns)))
	return resources(items, err, func(it wire.CatalogItem) *wire.StreamSpec { return it.Stream })
}

func (s *BoltStore) writeCache(ctx context.Context, c wire.CacheSpec, mode putMode) error {
	return s.write(ctx, wire.KindCaches, cacheKey(c), cacheWhat(c.TenantID, c.Namespace, c.Cache),
		namespaceParent(c.TenantID, c.Namespace), wire.CatalogItem{Cache: &c}, mode)
}

// CreateCache implements Store.
func (s *BoltStore) CreateCache(ctx context.Context, c wire.CacheSpec) error {
	return s.writeCache(ctx, c, modeCreate)
}

// PutCache implements Store.
func (s *BoltStore) PutCache(ctx context.Context, c wire.CacheSpec) error {
	return s.writeCache(ctx, c, modePut)
}

// DeleteCache implements Store.
func (s *BoltStore) DeleteCache(ctx context.Context, tenant, ns, cache string) error {
	return s.drop(ctx, wire.KindCaches, childKey(tenant, ns, cache), cacheWhat(tenant, ns, cache), nil, false)
}

// Cache implements Store.
func (s *BoltStore) Cache(ctx context.Context, tenant, ns, cache string) (wire.CacheSpec, bool, error) {
	it, ok, err := s.get(ctx, wire.KindCaches, childKey(tenant, ns, cache))
	if !ok || err != nil || it.Cache == nil {
		return wire.CacheSpec{}, false, err
	}
	return *it.Cache, true, nil
}

// Caches implements Store.
func (s *BoltStore) Caches(ctx context.Context, tenant, ns string) ([]wire.CacheSpec, error) {
	items, err := s.list(ctx, wire.KindCaches, childPrefix(namespaceKey(tenant, ns)))
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
