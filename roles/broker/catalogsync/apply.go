package catalogsync

import (
	"fmt"

	"github.com/felixmq/felix/wire"
)

// Applier receives catalog changes. The broker implements it over its
// registries. Calls come from one goroutine at a time, in catalog order.
type Applier interface {
	// ApplyTenant creates or updates a tenant.
	ApplyTenant(wire.Tenant)
	// RemoveTenant removes a tenant and everything in it.
	RemoveTenant(tenantID string)
	// ApplyNamespace creates or updates a namespace.
	ApplyNamespace(wire.Namespace)
	// RemoveNamespace removes a namespace and everything in it.
	RemoveNamespace(tenantID, namespace string)
	// ApplyStream creates or updates a stream.
	ApplyStream(wire.StreamSpec) error
	// RemoveStream deletes a stream: the control plane's change feed said
	// so, naming the incarnation it deleted (in the spec) of the cluster
	// last given to SetCluster. Only this may delete a stream's data.
	RemoveStream(wire.StreamSpec)
	// ForgetStream stops serving a stream that a snapshot no longer holds.
	// Nobody said it was deleted (the control plane may have lost its
	// state, or be another cluster's), so its data must stay.
	ForgetStream(wire.StreamSpec)
	// ApplyCache creates or updates a cache.
	ApplyCache(wire.CacheSpec) error
	// RemoveCache deletes a cache, as RemoveStream deletes a stream.
	RemoveCache(wire.CacheSpec)
	// ForgetCache stops serving a cache that a snapshot no longer holds,
	// as ForgetStream does for a stream.
	ForgetCache(wire.CacheSpec)
	// SetCluster names the cluster whose catalog the calls after it come
	// from (wire.CatalogPage.ClusterID). It is called before the first
	// item of a cluster is applied, and again if the source starts
	// answering for another cluster.
	SetCluster(id string)
}

// RevocationApplier is implemented by an Applier that also follows the
// revocations feed (wire.KindRevocations). The Syncer follows that feed
// only for such an Applier.
type RevocationApplier interface {
	// ApplyRevocation records a revocation, replacing an earlier one of
	// the same principal.
	ApplyRevocation(wire.Revocation)
	// RemoveRevocation lifts the revocation of tenant's subject.
	RemoveRevocation(tenantID, subject string)
}

// itemID returns the identity of it within kind ("tenant", "tenant/ns",
// "tenant/ns/name"), or an error when the item lacks kind's resource.
func itemID(kind wire.CatalogKind, it *wire.CatalogItem) (string, error) {
	switch {
	case kind == wire.KindTenants && it.Tenant != nil:
		return it.Tenant.TenantID, nil
	case kind == wire.KindNamespaces && it.Namespace != nil:
		return it.Namespace.TenantID + "/" + it.Namespace.Namespace, nil
	case kind == wire.KindStreams && it.Stream != nil:
		s := it.Stream
		return s.TenantID + "/" + s.Namespace + "/" + s.Stream, nil
	case kind == wire.KindCaches && it.Cache != nil:
		c := it.Cache
		return c.TenantID + "/" + c.Namespace + "/" + c.Cache, nil
	case kind == wire.KindRevocations && it.Revocation != nil:
		return it.Revocation.TenantID + "/" + it.Revocation.Subject, nil
	}
	return "", fmt.Errorf("catalogsync: %s item seq %d has no %s resource", kind, it.Seq, kind)
}

// checkPage refuses a page that carries an item the syncer could not
// apply, before anything of it is applied.
func checkPage(kind wire.CatalogKind, p *wire.CatalogPage) error {
	for i := range p.Items {
		it := &p.Items[i]
		if _, err := itemID(kind, it); err != nil {
			return err
		}
		if it.Op != wire.OpPut && it.Op != wire.OpDelete && it.Op != "" {
			return fmt.Errorf("catalogsync: %s item seq %d has unknown op %q", kind, it.Seq, it.Op)
		}
	}
	return nil
}

// put applies a created or updated resource.
func put(a Applier, kind wire.CatalogKind, it *wire.CatalogItem) error {
	var err error
	switch kind {
	case wire.KindTenants:
		a.ApplyTenant(*it.Tenant)
	case wire.KindNamespaces:
		a.ApplyNamespace(*it.Namespace)
	case wire.KindStreams:
		err = a.ApplyStream(*it.Stream)
	case wire.KindCaches:
		err = a.ApplyCache(*it.Cache)
	case wire.KindRevocations:
		if ra, ok := a.(RevocationApplier); ok {
			ra.ApplyRevocation(*it.Revocation)
		}
	}
	if err != nil {
		id, _ := itemID(kind, it)
		return fmt.Errorf("catalogsync: apply %s %s: %w", kind, id, err)
	}
	return nil
}

// forget applies the disappearance of a resource from a snapshot: like
// a removal, except that streams and caches keep their data.
func forget(a Applier, kind wire.CatalogKind, it *wire.CatalogItem) {
	switch kind {
	case wire.KindStreams:
		a.ForgetStream(*it.Stream)
	case wire.KindCaches:
		a.ForgetCache(*it.Cache)
	default:
		remove(a, kind, it)
	}
}

// remove applies the removal of a resource.
func remove(a Applier, kind wire.CatalogKind, it *wire.CatalogItem) {
	switch kind {
	case wire.KindTenants:
		a.RemoveTenant(it.Tenant.TenantID)
	case wire.KindNamespaces:
		a.RemoveNamespace(it.Namespace.TenantID, it.Namespace.Namespace)
	case wire.KindStreams:
		a.RemoveStream(*it.Stream)
	case wire.KindCaches:
		a.RemoveCache(*it.Cache)
	case wire.KindRevocations:
		if ra, ok := a.(RevocationApplier); ok {
			ra.RemoveRevocation(it.Revocation.TenantID, it.Revocation.Subject)
		}
	}
}
