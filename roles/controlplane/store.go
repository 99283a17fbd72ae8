package controlplane

import (
	"context"
	"fmt"

	"github.com/felixmq/felix/raftmeta"
	"github.com/felixmq/felix/raftmeta/catalog"
	"github.com/felixmq/felix/wire"
)

// Store is the control plane's durable catalog: tenants, namespaces,
// streams, caches and revocations, a change log per kind, a small meta map
// and RBAC records. Every
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
	// DeleteMeta removes a meta key; an absent key is not an error.
	DeleteMeta(ctx context.Context, key string) error

	// Bootstrap, unless meta flag is already set, creates t and ns (each
	// only if missing) and sets flag, all in one transaction. It reports
	// whether it did so.
	Bootstrap(ctx context.Context, flag string, t wire.Tenant, ns wire.Namespace) (bool, error)

	// BatchCreate creates every stream and cache of one namespace in one
	// step, or nothing (ErrNotFound/ErrConflict naming the first culprit).
	// With an idempotency key, repeating a batch that was applied succeeds
	// again and reports replayed; the same key with other content is
	// ErrConflict.
	BatchCreate(ctx context.Context, b Batch) (replayed bool, err error)

	// PutRevocation creates or replaces the revocation of one principal
	// of an existing tenant.
	PutRevocation(ctx context.Context, r wire.Revocation) error
	// DeleteRevocation lifts a revocation (ErrNotFound when there is none).
	DeleteRevocation(ctx context.Context, tenant, subject string) error
	// Revocations lists a tenant's revocations, ordered by subject.
	Revocations(ctx context.Context, tenant string) ([]wire.Revocation, error)

	// PutPolicy creates or replaces a tenant's role.
	PutPolicy(ctx context.Context, p Policy) error
	// DeletePolicy removes a role (ErrNotFound when missing).
	DeletePolicy(ctx context.Context, tenant, role string) error
	// Policies lists a tenant's roles, ordered by name.
	Policies(ctx context.Context, tenant string) ([]Policy, error)
	// PutAssignment gives a principal a role.
	PutAssignment(ctx context.Context, a Assignment) error
	// DeleteAssignment takes a role from a principal (ErrNotFound when missing).
	DeleteAssignment(ctx context.Context, tenant, principal, role string) error
	// Assignments lists a tenant's assignments, ordered by principal, role.
	Assignments(ctx context.Context, tenant string) ([]Assignment, error)

	// BrokerRegistry keeps the brokers and the fleet feature gate.
	BrokerRegistry
	// PlacementStore keeps the shard assignments.
	PlacementStore

	// Ready reports whether this member can serve consistent calls (it is
	// part of a working quorum).
	Ready() bool
	// ClusterStatus returns the Raft group as this member sees it.
	ClusterStatus(ctx context.Context) (raftmeta.Status, error)

	// Close releases the store.
	Close() error
}

// DefaultChangesLimit is the page size of Changes when none is given.
const DefaultChangesLimit = 1000

// MaxChangesLimit bounds the page size a caller may ask for.
const MaxChangesLimit = catalog.MaxChangesLimit

// Sentinel errors of the Store, the same values as the catalog state
// machine's. Errors returned by a Store wrap one of them and carry a
// message naming the resource.
var (
	ErrNotFound = catalog.ErrNotFound
	ErrConflict = catalog.ErrConflict
)

func notFound(msg string) error { return &catalog.CatalogError{Kind: ErrNotFound, Msg: msg} }

// Resource paths: the keys a Store files resources under. Names never hold
// '/', so a path prefix selects exactly one parent's children.
func tenantKey(t string) string           { return t }
func namespaceKey(t, ns string) string    { return t + "/" + ns }
func childKey(t, ns, name string) string  { return t + "/" + ns + "/" + name }
func childPrefix(parentKey string) string { return parentKey + "/" }
func validKind(k wire.CatalogKind) bool {
	for _, x := range wire.CatalogKinds {
		if x == k {
			return true
		}
	}
	return false
}

func tenantWhat(t string) string        { return fmt.Sprintf("tenant %q", t) }
func namespaceWhat(t, ns string) string { return fmt.Sprintf("namespace %q", namespaceKey(t, ns)) }
func streamWhat(t, ns, s string) string { return fmt.Sprintf("stream %q", childKey(t, ns, s)) }
func cacheWhat(t, ns, c string) string  { return fmt.Sprintf("cache %q", childKey(t, ns, c)) }
