package controlplane

import (
	"context"
	"net/http"
	"strconv"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// pathNames reads and validates the named path values, in order.
func pathNames(r *http.Request, names ...string) ([]string, error) {
	var p problems
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = r.PathValue(n)
		p.name(n+" (path)", out[i])
	}
	return out, p.err()
}

// recursive reads the ?recursive= flag.
func recursive(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("recursive")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalid("recursive: " + strconv.Quote(v) + " is not true or false")
	}
	return b, nil
}

// samePath checks that a body field naming a parent, when given, agrees
// with the path.
func (p *problems) samePath(field, body, path string) {
	if body != "" && body != path {
		p.add(field, "%q disagrees with the path's %q (it may be omitted)", body, path)
	}
}

func (s *Service) createTenant(r *http.Request, _ *auth.Identity) (int, any, error) {
	var t wire.Tenant
	if err := decodeBody(r, &t); err != nil {
		return 0, nil, err
	}
	if err := validateTenant(t); err != nil {
		return 0, nil, err
	}
	if err := s.store.CreateTenant(r.Context(), t); err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, t, nil
}

func (s *Service) listTenants(r *http.Request, _ *auth.Identity) (int, any, error) {
	ts, err := s.store.Tenants(r.Context())
	return http.StatusOK, listBody[wire.Tenant]{Items: ts}, err
}

func (s *Service) getTenant(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	t, ok, err := s.store.Tenant(r.Context(), n[0])
	return found(t, ok, err, tenantWhat(n[0]))
}

func (s *Service) deleteTenant(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	rec, err := recursive(r)
	if err != nil {
		return 0, nil, err
	}
	if err := s.store.DeleteTenant(r.Context(), n[0], rec); err != nil {
		return 0, nil, err
	}
	// A tenant created again under the same name starts without the old
	// one's identity provider. Failing here only leaves the record behind.
	if err := s.store.DeleteMeta(r.Context(), metaOIDCPrefix+n[0]); err != nil {
		s.log.Warn("removing a deleted tenant's OIDC issuer", "tenant", n[0], "err", err)
	}
	return http.StatusNoContent, nil, nil
}

// found turns a (value, ok, err) lookup into a route result.
func found[T any](v T, ok bool, err error, what string) (int, any, error) {
	if err != nil {
		return 0, nil, err
	}
	if !ok {
		return 0, nil, notFound(what + " does not exist")
	}
	return http.StatusOK, v, nil
}

// namespaceRequest is the body of a namespace create.
type namespaceRequest struct {
	TenantID  string `json:"tenant_id,omitempty"`
	Namespace string `json:"namespace"`
}

func (s *Service) createNamespace(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	var req namespaceRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	var p problems
	p.samePath("tenant_id", req.TenantID, n[0])
	p.name("namespace", req.Namespace)
	if err := p.err(); err != nil {
		return 0, nil, err
	}
	ns := wire.Namespace{TenantID: n[0], Namespace: req.Namespace}
	if err := s.store.CreateNamespace(r.Context(), ns); err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, ns, nil
}

func (s *Service) listNamespaces(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	if err := s.mustTenant(r.Context(), n[0]); err != nil {
		return 0, nil, err
	}
	items, err := s.store.Namespaces(r.Context(), n[0])
	return http.StatusOK, listBody[wire.Namespace]{Items: items}, err
}

func (s *Service) getNamespace(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace")
	if err != nil {
		return 0, nil, err
	}
	ns, ok, err := s.store.Namespace(r.Context(), n[0], n[1])
	return found(ns, ok, err, namespaceWhat(n[0], n[1]))
}

func (s *Service) deleteNamespace(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace")
	if err != nil {
		return 0, nil, err
	}
	rec, err := recursive(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, s.store.DeleteNamespace(r.Context(), n[0], n[1], rec)
}

// mustTenant fails with not_found when the tenant does not exist.
func (s *Service) mustTenant(ctx context.Context, tenant string) error {
	_, ok, err := s.store.Tenant(ctx, tenant)
	if err == nil && !ok {
		err = notFound(tenantWhat(tenant) + " does not exist")
	}
	return err
}

// mustNamespace fails with not_found when the namespace does not exist.
func (s *Service) mustNamespace(ctx context.Context, tenant, ns string) error {
	_, ok, err := s.store.Namespace(ctx, tenant, ns)
	if err == nil && !ok {
		err = notFound(namespaceWhat(tenant, ns) + " does not exist")
	}
	return err
}

func (s *Service) createCache(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace")
	if err != nil {
		return 0, nil, err
	}
	var c wire.CacheSpec
	if err := decodeBody(r, &c); err != nil {
		return 0, nil, err
	}
	var p problems
	p.samePath("tenant_id", c.TenantID, n[0])
	p.samePath("namespace", c.Namespace, n[1])
	if err := p.err(); err != nil {
		return 0, nil, err
	}
	c.TenantID, c.Namespace = n[0], n[1]
	if err := validateCache(c); err != nil {
		return 0, nil, err
	}
	if err := s.store.CreateCache(r.Context(), c); err != nil {
		return 0, nil, err
	}
	s.awaitPlaced(r.Context(), placedRef{wire.PlacementCache, c.TenantID, c.Namespace, c.Cache})
	return http.StatusCreated, c, nil
}

func (s *Service) listCaches(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace")
	if err != nil {
		return 0, nil, err
	}
	if err := s.mustNamespace(r.Context(), n[0], n[1]); err != nil {
		return 0, nil, err
	}
	items, err := s.store.Caches(r.Context(), n[0], n[1])
	return http.StatusOK, listBody[wire.CacheSpec]{Items: items}, err
}

func (s *Service) getCache(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace", "cache")
	if err != nil {
		return 0, nil, err
	}
	c, ok, err := s.store.Cache(r.Context(), n[0], n[1], n[2])
	return found(c, ok, err, cacheWhat(n[0], n[1], n[2]))
}

func (s *Service) deleteCache(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace", "cache")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, s.store.DeleteCache(r.Context(), n[0], n[1], n[2])
}
