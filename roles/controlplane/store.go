package controlplane

import (
	"context"
	"errors"

	"github.com/felixmq/felix/wire"
)

// Store is the control plane's durable catalog: tenants, namespaces,
// streams and caches, a change log per kind, and a small meta map. Every
// method is atomic: a mutation writes the resource, its change-log entries
// and any cascaded removals in one transaction, or nothing at all.
//
// Create methods fail with ErrConflict when the resource exists; Put
// methods create or replace; Update methods replace and fail with
// ErrNotFound when the resource does not exist. Every mutation below a
// tenant fails with ErrNotFound when its parent is missing. Delete methods
// fail with ErrNotFound when the resource is missing; a tenant or
// namespace delete fails with ErrConflict when it still has children,
// unless recursive is set, in which case the children are removed and
// their removals recorded in their own kinds' change logs.
type Store interface {
	// CreateTenant adds a new tenant.
	CreateTenant(ctx context.Context, t wire.Tenant) error
	// PutTenant creates or replaces a tenant.
	PutTenant(ctx context.Context, t wire.Tenant) error
	// DeleteTenant removes a tenant (and, with recursive, all it holds).
	DeleteTenant(ctx context.Context, id string, recursive bool) error
	// Tenant returns one tenant.
	Tenant(ctx context.Context, id string) (wire.Tenant, bool, error)
	// Tenants lists every tenant, ordered by id.
	Tenants(ctx context.Context) ([]wire.Tenant, error)

	// CreateNamespace adds a namespace to an existing tenant.
	CreateNamespace(ctx context.Context, ns wire.Namespace) error
	// PutNamespace creates or replaces a namespace.
	PutNamespace(ctx context.Context, ns wire.Namespace) error
	// DeleteNamespace removes a namespace (and, with recursive, its streams and caches).
	DeleteNamespace(ctx context.Context, tenant, ns string, recursive bool) error
	// Namespace returns one namespace.
	Namespace(ctx context.Context, tenant, ns string) (wire.Namespace, bool, error)
	// Namespaces lists a tenant's namespaces, ordered by name.
	Namespaces(ctx context.Context, tenant string) ([]wire.Namespace, error)

	// CreateStream adds a stream to an existing namespace.
	CreateStream(ctx context.Context, s wire.StreamSpec) error
	// PutStream creates or replaces a stream.
	PutStream(ctx context.Context, s wire.StreamSpec) error
	// UpdateStream replaces an existing stream.
	UpdateStream(ctx context.Context, s wire.StreamSpec) error
	// DeleteStream removes a stream.
	DeleteStream(ctx context.Context, tenant, ns, stream string) error
	// Stream returns one stream.
	Stream(ctx context.Context, tenant, ns, stream string) (wire.StreamSpec, bool, error)
	// Streams lists a namespace's streams, ordered by name.
	Streams(ctx context.Context, tenant, ns string) ([]wire.StreamSpec, error)

	// CreateCache adds a cache to an existing namespace.
	CreateCache(ctx context.Context, c wire.CacheSpec) error
	// PutCache creates or replaces a cache.
	PutCache(ctx context.Context, c wire.CacheSpec) error
	// DeleteCache removes a cache.
	DeleteCache(ctx context.Context, tenant, ns, cache string) error
	// Cache returns one cache.
	Cache(ctx context.Context, tenant, ns, cache string) (wire.CacheSpec, bool, error)
	// Caches lists a namespace's caches, ordered by name.
	Caches(ctx context.Context, tenant, ns string) ([]wire.CacheSpec, error)

	// Snapshot returns every live resource of a kind (Op put) and the
	// kind's current sequence number as the page cursor.
	Snapshot(ctx context.Context, kind wire.CatalogKind) (*wire.CatalogPage, error)
	// Changes returns at most limit changes with a sequence number above
	// since (limit <= 0 means DefaultChangesLimit). The page cursor is the
	// last returned item's sequence number, or the current one when there
	// are none. When changes after since are no longer kept (or since is
	// ahead of the kind's sequence), the page has Reset set and no items.
	Changes(ctx context.Context, kind wire.CatalogKind, since uint64, limit int) (*wire.CatalogPage, error)

	// Meta reads a meta value (bootstrap flags, signing keys).
	Meta(ctx context.Context, key string) ([]byte, bool, error)
	// PutMeta writes a meta value.
	PutMeta(ctx context.Context, key string, v []byte) error
	// PutMetaIfAbsent writes v unless key is set, and returns the value
	// the key holds afterwards (v, or what was already there).
	PutMetaIfAbsent(ctx context.Context, key string, v []byte) ([]byte, error)

	// Bootstrap, unless meta flag is already set, creates t and ns (each
	// only if missing) and sets flag, all in one transaction. It reports
	// whether it did so.
	Bootstrap(ctx context.Context, flag string, t wire.Tenant, ns wire.Namespace) (bool, error)

	// Close releases the store.
	Close() error
}

// DefaultChangesLimit is the page size of Changes when none is given.
const DefaultChangesLimit = 1000

// MaxChangesLimit bounds the page size a caller may ask for.
const MaxChangesLimit = 10000

// Sentinel errors of the Store. Errors returned by a Store wrap one of them
// and carry a message naming the resource.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
)

// storeError is a Store failure with a readable message that unwraps to a
// sentinel.
type storeError struct {
	kind error
	msg  string
}

func (e *storeError) Error() string { return e.msg }
func (e *storeError) Unwrap() error { return e.kind }

func notFound(msg string) error { return &storeError{kind: ErrNotFound, msg: msg} }
func conflict(msg string) error { return &storeError{kind: ErrConflict, msg: msg} }

// Resource paths: the keys a Store files resources under. Names never hold
// '/', so a path prefix selects exactly one parent's children.
func tenantKey(t string) string           { return t }
func namespaceKey(t, ns string) string    { return t + "/" + ns }
func childKey(t, ns, name string) string  { return t + "/" + ns + "/" + name }
func childPrefix(parentKey string) string { return parentKey + "/" }
func streamKey(s wire.StreamSpec) string  { return childKey(s.TenantID, s.Namespace, s.Stream) }
func cacheKey(c wire.CacheSpec) string    { return childKey(c.TenantID, c.Namespace, c.Cache) }
func nsKey(n wire.Namespace) string       { return namespaceKey(n.TenantID, n.Namespace) }
func validKind(k wire.CatalogKind) bool {
	for _, x := range wire.CatalogKinds {
		if x == k {
			return true
		}
	}
	return false
}
