package cli

import (
	"context"
	"net/http"
	"time"

	"github.com/felixmq/felix/wire"
)

// Typed calls of the control plane's REST API.

// CreateTenant creates a tenant.
func (a *AdminClient) CreateTenant(ctx context.Context, t wire.Tenant) (wire.Tenant, error) {
	return create(ctx, a, apiPath("tenants"), t)
}

// Tenants lists every tenant.
func (a *AdminClient) Tenants(ctx context.Context) ([]wire.Tenant, error) {
	return list[wire.Tenant](ctx, a, apiPath("tenants"), "tenants")
}

// Tenant fetches one tenant.
func (a *AdminClient) Tenant(ctx context.Context, id string) (wire.Tenant, error) {
	return get[wire.Tenant](ctx, a, apiPath("tenants", id))
}

// DeleteTenant deletes a tenant; recursive also deletes what it holds.
func (a *AdminClient) DeleteTenant(ctx context.Context, id string, recursive bool) error {
	return a.delete(ctx, apiPath("tenants", id), recursive)
}

// CreateNamespace creates a namespace in a tenant.
func (a *AdminClient) CreateNamespace(ctx context.Context, tenant, ns string) (wire.Namespace, error) {
	return create(ctx, a, apiPath("tenants", tenant, "namespaces"), wire.Namespace{TenantID: tenant, Namespace: ns})
}

// Namespaces lists a tenant's namespaces.
func (a *AdminClient) Namespaces(ctx context.Context, tenant string) ([]wire.Namespace, error) {
	return list[wire.Namespace](ctx, a, apiPath("tenants", tenant, "namespaces"), "namespaces")
}

// Namespace fetches one namespace.
func (a *AdminClient) Namespace(ctx context.Context, tenant, ns string) (wire.Namespace, error) {
	return get[wire.Namespace](ctx, a, apiPath("tenants", tenant, "namespaces", ns))
}

// DeleteNamespace deletes a namespace; recursive also deletes its streams
// and caches.
func (a *AdminClient) DeleteNamespace(ctx context.Context, tenant, ns string, recursive bool) error {
	return a.delete(ctx, apiPath("tenants", tenant, "namespaces", ns), recursive)
}

// CreateStream creates the stream s names (tenant and namespace included).
func (a *AdminClient) CreateStream(ctx context.Context, s wire.StreamSpec) (wire.StreamSpec, error) {
	return a.createStream(ctx, s, s.Shards != 0)
}

// streamCreateBody sends shards only when asked for, so that 0 means
// "the default" when absent and is refused by the control plane when a
// user gave it.
type streamCreateBody struct {
	wire.StreamSpec
	Shards *uint32 `json:"shards,omitempty"`
}

// createStream creates s, sending its shard count when shardsSet (even
// 0, which the control plane refuses) and leaving it to the default
// otherwise.
func (a *AdminClient) createStream(ctx context.Context, s wire.StreamSpec, shardsSet bool) (wire.StreamSpec, error) {
	body := streamCreateBody{StreamSpec: s}
	if shardsSet {
		body.Shards = &s.Shards
	}
	out := s
	err := a.do(ctx, http.MethodPost, apiPath("tenants", s.TenantID, "namespaces", s.Namespace, "streams"), nil, body, &out)
	return out, err
}

// Streams lists a namespace's streams.
func (a *AdminClient) Streams(ctx context.Context, tenant, ns string) ([]wire.StreamSpec, error) {
	return list[wire.StreamSpec](ctx, a, apiPath("tenants", tenant, "namespaces", ns, "streams"), "streams")
}

// Stream fetches one stream.
func (a *AdminClient) Stream(ctx context.Context, tenant, ns, stream string) (wire.StreamSpec, error) {
	return get[wire.StreamSpec](ctx, a, apiPath("tenants", tenant, "namespaces", ns, "streams", stream))
}

// DeleteStream deletes a stream.
func (a *AdminClient) DeleteStream(ctx context.Context, tenant, ns, stream string) error {
	return a.delete(ctx, apiPath("tenants", tenant, "namespaces", ns, "streams", stream), false)
}

// CreateCache creates the cache c names.
func (a *AdminClient) CreateCache(ctx context.Context, c wire.CacheSpec) (wire.CacheSpec, error) {
	return create(ctx, a, apiPath("tenants", c.TenantID, "namespaces", c.Namespace, "caches"), c)
}

// Caches lists a namespace's caches.
func (a *AdminClient) Caches(ctx context.Context, tenant, ns string) ([]wire.CacheSpec, error) {
	return list[wire.CacheSpec](ctx, a, apiPath("tenants", tenant, "namespaces", ns, "caches"), "caches")
}

// Cache fetches one cache.
func (a *AdminClient) Cache(ctx context.Context, tenant, ns, cache string) (wire.CacheSpec, error) {
	return get[wire.CacheSpec](ctx, a, apiPath("tenants", tenant, "namespaces", ns, "caches", cache))
}

// DeleteCache deletes a cache.
func (a *AdminClient) DeleteCache(ctx context.Context, tenant, ns, cache string) error {
	return a.delete(ctx, apiPath("tenants", tenant, "namespaces", ns, "caches", cache), false)
}

// TokenRequest asks the control plane to mint a token for a tenant.
type TokenRequest struct {
	Subject    string   `json:"sub"`
	Perms      []string `json:"perms"`
	TTLSeconds int64    `json:"ttl_seconds,omitempty"`
}

// TokenResponse is a minted token and when it expires (RFC 3339).
type TokenResponse struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

// CreateToken mints a token for tenant.
func (a *AdminClient) CreateToken(ctx context.Context, tenant string, r TokenRequest) (TokenResponse, error) {
	var out TokenResponse
	err := a.do(ctx, "POST", apiPath("tenants", tenant, "tokens"), nil, r, &out)
	return out, err
}

// ttlSeconds rounds a TTL up to whole seconds.
func ttlSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// StreamPatch is the body of a stream update: the fields that may change
// after creation. A nil field is left as it is; Retention, when set,
// replaces the stream's retention as a whole.
type StreamPatch struct {
	Retention      *wire.Retention `json:"retention,omitempty"`
	SubQueuePolicy *string         `json:"sub_queue_policy,omitempty"`
}

// UpdateStream changes a stream's retention and/or subscriber queue policy
// (PATCH) and returns the stream as stored.
func (a *AdminClient) UpdateStream(ctx context.Context, tenant, ns, stream string, p StreamPatch) (wire.StreamSpec, error) {
	var out wire.StreamSpec
	err := a.do(ctx, http.MethodPatch, apiPath("tenants", tenant, "namespaces", ns, "streams", stream), nil, p, &out)
	return out, err
}
