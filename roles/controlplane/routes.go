package controlplane

import "net/http"

// scope is what a route demands of the caller's token.
type scope int

const (
	scopeNone    scope = iota // no token
	scopeCluster              // cluster.manage on "cluster"
	scopeTenant               // tenant.manage on tenant:{tenant} (or cluster.manage)
	scopeToken                // token.create on tenant:{tenant} (or cluster.manage)
	scopeRead                 // tenant.manage, or reading the path's stream or cache (see readResource), or cluster.manage
)

// param is a query parameter, for the OpenAPI document.
type param struct {
	name, typ, doc string
}

// route is one REST endpoint: how it is matched, who may call it, how it
// is served and how the OpenAPI document describes it.
type route struct {
	method, path string
	scope        scope
	summary      string
	query        []param
	request      string // component schema of the body, "" for none
	response     string // component schema of the success body, "" for none
	status       int    // success status
	notModified  bool   // may also answer 304 Not Modified (no body)
	handle       handlerFunc
}

// pattern is the ServeMux pattern, e.g. "GET /v1/tenants/{tenant}".
func (rt route) pattern() string {
	if rt.method == "" {
		return rt.path
	}
	return rt.method + " " + rt.path
}

const (
	pTenants     = "/v1/tenants"
	pTenant      = pTenants + "/{tenant}"
	pNamespaces  = pTenant + "/namespaces"
	pNamespace   = pNamespaces + "/{namespace}"
	pStreams     = pNamespace + "/streams"
	pStream      = pStreams + "/{stream}"
	pCaches      = pNamespace + "/caches"
	pCache       = pCaches + "/{cache}"
	pRevocations = pTenant + "/revocations"
	pPolicies    = pTenant + "/policies"
	pPrincipal   = pTenant + "/principals/{principal}"
)

var recursiveParam = param{"recursive", "boolean", "also delete everything the resource holds"}

// routes lists every endpoint of the API.
func (s *Service) routes() []route {
	ok, created, gone := http.StatusOK, http.StatusCreated, http.StatusNoContent
	return []route{
		{method: "GET", path: "/v1/openapi.json", summary: "This OpenAPI document", response: "Object", status: ok, handle: s.getOpenAPI},
		{method: "GET", path: "/v1/jwks", summary: "Public keys that verify Felix tokens", response: "JWKS", status: ok, handle: s.getJWKS},
		{method: "GET", path: "/.well-known/jwks.json", summary: "Public keys that verify Felix tokens", response: "JWKS", status: ok, handle: s.getJWKS},
		{method: "GET", path: "/live", summary: "Liveness", response: "Status", status: ok, handle: s.getLive},
		{method: "GET", path: "/ready", summary: "Readiness: this member is part of a working Raft quorum", response: "Status", status: ok, handle: s.getReady},
		{method: "GET", path: "/v1/members", scope: scopeCluster, summary: "The control plane's Raft members, leader, term and indexes", response: "Members", status: ok, handle: s.getMembers},

		{method: "POST", path: pTenants, scope: scopeCluster, summary: "Create a tenant", request: "Tenant", response: "Tenant", status: created, handle: s.createTenant},
		{method: "GET", path: pTenants, scope: scopeCluster, summary: "List tenants", response: "TenantList", status: ok, handle: s.listTenants},
		{method: "GET", path: pTenant, scope: scopeCluster, summary: "Get a tenant", response: "Tenant", status: ok, handle: s.getTenant},
		{method: "DELETE", path: pTenant, scope: scopeCluster, summary: "Delete a tenant", query: []param{recursiveParam}, status: gone, handle: s.deleteTenant},

		{method: "POST", path: pNamespaces, scope: scopeTenant, summary: "Create a namespace", request: "NamespaceRequest", response: "Namespace", status: created, handle: s.createNamespace},
		{method: "GET", path: pNamespaces, scope: scopeTenant, summary: "List a tenant's namespaces", response: "NamespaceList", status: ok, handle: s.listNamespaces},
		{method: "GET", path: pNamespace, scope: scopeTenant, summary: "Get a namespace", response: "Namespace", status: ok, handle: s.getNamespace},
		{method: "DELETE", path: pNamespace, scope: scopeTenant, summary: "Delete a namespace", query: []param{recursiveParam}, status: gone, handle: s.deleteNamespace},

		{method: "POST", path: pStreams, scope: scopeTenant, summary: "Create a stream", request: "StreamSpec", response: "StreamSpec", status: created, handle: s.createStream},
		{method: "GET", path: pStreams, scope: scopeTenant, summary: "List a namespace's streams", response: "StreamList", status: ok, handle: s.listStreams},
		{method: "GET", path: pStream, scope: scopeTenant, summary: "Get a stream", response: "StreamSpec", status: ok, handle: s.getStream},
		{method: "PATCH", path: pStream, scope: scopeTenant, summary: "Change a stream's retention or subscriber queue policy", request: "StreamPatch", response: "StreamSpec", status: ok, handle: s.patchStream},
		{method: "DELETE", path: pStream, scope: scopeTenant, summary: "Delete a stream", status: gone, handle: s.deleteStream},

		{method: "POST", path: pCaches, scope: scopeTenant, summary: "Create a cache", request: "CacheSpec", response: "CacheSpec", status: created, handle: s.createCache},
		{method: "GET", path: pCaches, scope: scopeTenant, summary: "List a namespace's caches", response: "CacheList", status: ok, handle: s.listCaches},
		{method: "GET", path: pCache, scope: scopeTenant, summary: "Get a cache", response: "CacheSpec", status: ok, handle: s.getCache},
		{method: "DELETE", path: pCache, scope: scopeTenant, summary: "Delete a cache", status: gone, handle: s.deleteCache},

		{method: "POST", path: pNamespace + "/batch", scope: scopeTenant, summary: "Create streams and caches of a namespace all together or not at all (retry-safe with an idempotency key)", request: "BatchRequest", response: "BatchResponse", status: created, handle: s.createBatch},

		{method: "POST", path: pRevocations, scope: scopeTenant, summary: "Revoke every token of a principal issued until now", request: "RevocationRequest", response: "Revocation", status: created, handle: s.createRevocation},
		{method: "GET", path: pRevocations, scope: scopeTenant, summary: "List a tenant's revocations", response: "RevocationList", status: ok, handle: s.listRevocations},
		{method: "DELETE", path: pRevocations + "/{subject}", scope: scopeTenant, summary: "Lift a principal's revocation", status: gone, handle: s.deleteRevocation},

		{method: "POST", path: pTenant + "/tokens", scope: scopeToken, summary: "Mint a Felix token for the tenant", request: "TokenRequest", response: "TokenResponse", status: ok, handle: s.createToken},

		{method: "PUT", path: pTenant + "/oidc", scope: scopeTenant, summary: "Set the tenant's upstream OIDC issuer (whose tokens /token/exchange accepts)", request: "OIDCConfig", response: "OIDCConfig", status: ok, handle: s.putOIDC},
		{method: "GET", path: pTenant + "/oidc", scope: scopeTenant, summary: "Get the tenant's upstream OIDC issuer", response: "OIDCConfig", status: ok, handle: s.getOIDC},
		{method: "POST", path: pTenant + "/token/exchange", summary: "Exchange an upstream OIDC token (the credential: no Felix token) for a Felix token and a refresh token", request: "ExchangeRequest", response: "ExchangeResponse", status: ok, handle: s.exchangeToken},
		{method: "POST", path: pTenant + "/token/refresh", summary: "Trade a refresh token for a new Felix token and the next refresh token of its chain", request: "RefreshRequest", response: "ExchangeResponse", status: ok, handle: s.refreshToken},

		{method: "PUT", path: pPolicies + "/{role}", scope: scopeTenant, summary: "Create or replace a role's permissions (narrowing one revokes its principals' tokens)", request: "PolicyRequest", response: "Policy", status: ok, handle: s.putPolicy},
		{method: "GET", path: pPolicies, scope: scopeTenant, summary: "List the tenant's roles", response: "PolicyList", status: ok, handle: s.listPolicies},
		{method: "DELETE", path: pPolicies + "/{role}", scope: scopeTenant, summary: "Delete a role and revoke the tokens of the principals it reached", status: gone, handle: s.deletePolicy},
		{method: "GET", path: pTenant + "/assignments", scope: scopeTenant, summary: "List role assignments", query: []param{{"principal", "string", "only this principal's"}}, response: "AssignmentList", status: ok, handle: s.listAssignments},
		{method: "PUT", path: pPrincipal + "/roles/{role}", scope: scopeTenant, summary: "Assign a role to a principal", response: "Assignment", status: ok, handle: s.putAssignment},
		{method: "DELETE", path: pPrincipal + "/roles/{role}", scope: scopeTenant, summary: "Take a role from a principal and revoke its tokens", status: gone, handle: s.deleteAssignment},
		{method: "DELETE", path: pPrincipal, scope: scopeTenant, summary: "Remove every role of a principal and revoke its tokens", status: gone, handle: s.deletePrincipal},

		{method: "POST", path: "/v1/signing-keys/rotate", scope: scopeCluster, summary: "Make a new key sign Felix tokens; older keys stay in the JWKS until their tokens expire", response: "RotateResponse", status: ok, handle: s.rotateKey},

		{method: "GET", path: "/v1/catalog/{kind}/snapshot", scope: scopeCluster, summary: "Every live resource of a kind, with the cursor to follow changes from", response: "CatalogPage", status: ok, handle: s.getSnapshot},
		{method: "GET", path: "/v1/catalog/{kind}/changes", scope: scopeCluster, summary: "Changes of a kind after a cursor",
			query:    []param{{"since", "integer", "cursor: return changes with a greater sequence number (default 0)"}, {"limit", "integer", "most items to return (default 1000, at most 10000)"}},
			response: "CatalogPage", status: ok, handle: s.getChanges},

		{method: "POST", path: "/v1/brokers", scope: scopeCluster, summary: "Register a broker (a duplicate node id under another storage identity is refused while the first is live)", request: "BrokerRegistration", response: "Broker", status: ok, handle: s.postBroker},
		{method: "GET", path: "/v1/brokers", scope: scopeCluster, summary: "List the registered brokers", response: "BrokerList", status: ok, handle: s.listBrokers},
		{method: "POST", path: "/v1/brokers/{node}/heartbeat", scope: scopeCluster, summary: "A live broker's heartbeat (refused when it is unknown, down or deregistered: it registers again)", request: "BrokerHeartbeat", response: "Broker", status: ok, handle: s.postHeartbeat},
		{method: "DELETE", path: "/v1/brokers/{node}", scope: scopeCluster, summary: "Deregister a broker", status: gone, handle: s.deleteBroker},
		{method: "GET", path: pPlacementStream, scope: scopeRead, summary: "Where each shard of a stream is placed: owner node id, generation, why it is unavailable", response: "Placement", status: ok, handle: s.getStreamPlacement},
		{method: "GET", path: pPlacementCache, scope: scopeRead, summary: "Where each shard of a cache is placed: owner node id, generation, why it is unavailable", response: "Placement", status: ok, handle: s.getCachePlacement},
		{method: "GET", path: pPlacementReplication, scope: scopeCluster, summary: "Every durable shard with a replication factor above 1 or fewer live copies than its factor: leader, followers and the state of each copy, desired against current copies", response: "Replication", status: ok, handle: s.getReplication},
		{method: "POST", path: "/v1/placement/handoff", scope: scopeCluster, summary: "A stopping broker hands a durable shard it leads to a caught-up follower (planned handoff); refused 409 unless the owner and generation match and the follower is live under the storage its copy is on", request: "HandoffRequest", response: "ShardAssignment", status: ok, handle: s.postHandoff},
		{method: "POST", path: pPlacementAbandon, scope: scopeCluster, summary: "Give up the copies of a waiting durable shard that only down brokers hold: lead it from the live brokers of its replica set that keep a copy (the furthest copy wins), dropping the down ones; refused for a shard that is served or that no live broker holds",
			query: []param{{"dry_run", "boolean", "say what would be done without doing it"},
				{"keep", "string", "node ids, comma-separated or repeated: the live brokers whose copies to keep (default: the live members of the replica set)"}},
			response: "PlacementAbandon", status: ok, handle: s.postAbandon},
		{method: "GET", path: "/v1/cluster/view", scope: scopeCluster, summary: "The cluster view brokers route by: every registered broker (deregistered left out) and every shard's assignment, with a tag; 304 when known is the tag",
			query:    []param{{"known", "string", "the tag the caller holds: answered 304 Not Modified, no body, while it is current"}},
			response: "ClusterView", status: ok, notModified: true, handle: s.getClusterView},
		{method: "GET", path: "/v1/cluster/view/changes", scope: scopeCluster, summary: "Wait for the cluster view to change: answers with the new tag as soon as the view's tag is not known, 304 when it still is after wait_ms",
			query: []param{{"known", "string", "the tag the caller holds"},
				{"wait_ms", "integer", "how long to hold the request while known is current (default 10000, at most 20000)"}},
			response: "ClusterViewChange", status: ok, notModified: true, handle: s.getClusterViewChange},
		{method: "GET", path: "/v1/fleet/features", scope: scopeCluster, summary: "The fleet-wide feature gate: each feature, whether every live broker supports it, whether it is finalized", response: "FleetFeatures", status: ok, handle: s.getFleetFeatures},
		{method: "POST", path: "/v1/fleet/features/finalize", scope: scopeCluster, summary: "Turn fleet features on for good (none named: every supported one); refused while a live broker lacks one", request: "FinalizeRequest", response: "FleetFeatures", status: ok, handle: s.finalizeFeatures},
	}
}
