// Package controlplane is Felix's metadata service: the catalog of
// tenants, namespaces, streams and caches, the token signing key, and the
// REST API over both.
//
// # Pieces
//
// A Store keeps the catalog durably. RaftStore is the implementation: a
// member of the control plane's Raft group (raftmeta.Node) driving the
// catalog state machine (catalog.Catalog). Every write is one typed
// command carrying a random request id; any member accepts it (a follower
// hands it to the leader), it returns once the answering member applied
// it, and a command whose outcome was lost in a leader change is proposed
// again and applied once. Reads pass a ReadIndex barrier and then read the
// local catalog. Calls without a quorum fail after 15 seconds with
// shard_unavailable (reads) or quorum_timeout (writes); /ready reports
// whether the member is part of a working quorum. MigrateLegacyCatalog
// moves the single-node bbolt catalog of earlier releases into an empty
// Raft store once. Service wraps a Store: New
// loads the ES256 signing key from the store's meta (creating one on first
// start), Bootstrap creates tenant "default" with namespace "default" once
// in the store's life, MintToken signs Felix tokens, and Snapshot, Changes
// and JWKS let a broker in the same process use the Service directly as
// its catalog source. Handler serves the REST API.
//
// # Catalog feeds
//
// Every kind (tenants, namespaces, caches, streams, and revocations, which
// brokers follow apart from the others) has its own sequence
// counter. Each mutation gives the change the next number of its kind and
// writes the resource and its change-log entry in one transaction, so the
// feed never disagrees with the live data. A cascaded delete (a tenant or
// namespace with recursive=true) records one delete per removed child in
// the child's own kind.
//
// A reader takes Snapshot(kind): every live resource with Op put, and the
// kind's current sequence number as the cursor. It then calls
// Changes(kind, since=cursor) repeatedly: the page holds changes with a
// greater sequence number, oldest first, at most the page limit, and its
// Seq is the cursor for the next call (the last item's number, or the
// current one when nothing changed). Deletes carry the resource's last
// value. The change log keeps the most recent entries per kind (10,000 by
// default); when the changes right after a cursor were trimmed, or the
// cursor is ahead of the kind's counter (the store was replaced), the page
// has Reset set and no items, and the reader must take a new snapshot and
// drop whatever the snapshot no longer lists.
//
// # Broker registry
//
// Brokers register (POST /v1/brokers), heartbeat (POST
// /v1/brokers/{node}/heartbeat) and are listed (GET /v1/brokers); the
// records and the fleet feature gate (GET /v1/fleet/features, POST
// /v1/fleet/features/finalize) live in the catalog state machine, which
// decides every refusal (a duplicate node id, a heartbeat from an
// unknown, down or deregistered broker, a finalize a live broker cannot
// honour). The Service stamps times with its own clock; RegisterBroker
// and HeartbeatBroker are also the in-process registry of felix serve's
// broker. StartExpiry runs the expiry loop: on whichever member leads,
// every sweep proposes mark-down for brokers silent past the expiry
// time, counted from no earlier than when that member became leader.
// docs/protocol.md, "Broker registry", has the bodies.
//
// # Placement
//
// StartPlacement runs the placement loop: on whichever member leads,
// every FELIX_SHARD_RECONCILE_INTERVAL_MS and soon after a broker,
// stream or cache changed, it reads the registry, the catalog and the
// assignments after a barrier, calls placement.Compute and proposes the
// change as one command guarded by the placement's revision and
// generation counter (a stale pass is refused and computed again). It
// hands Compute its clock and FELIX_SHARD_RESTORE_AFTER_MS, so a follower
// whose broker has been down that long (counted from the mark-down, and
// from no earlier than when the member became leader) is replaced. GET
// /v1/placement/streams/{tenant}/{namespace}/{stream} and
// .../caches/... show the assignments. Brokers do not act on them yet.
// docs/placement.md has the rules, docs/protocol.md "Placement" the body.
//
// # REST API
//
// JSON in and out; request bodies at most 1 MiB, unknown fields refused.
// GET /v1/openapi.json documents every route. Except for the OpenAPI
// document, /v1/jwks, /.well-known/jwks.json, /live and /ready, every call
// needs "Authorization: Bearer <Felix token>":
//
//   - tenants (POST/GET /v1/tenants, GET/DELETE /v1/tenants/{tenant}) and the
//     catalog feeds (GET /v1/catalog/{kind}/snapshot, .../changes?since=N&limit=M)
//     need cluster.manage on "cluster", from a token of any tenant;
//   - namespaces, streams and caches under /v1/tenants/{tenant}/ need a token
//     whose tid is {tenant} holding tenant.manage on tenant:{tenant};
//   - GET /v1/placement/... accepts that too, or stream.subscribe on the
//     stream, or cache.read on the whole cache;
//   - POST /v1/tenants/{tenant}/tokens needs token.create on tenant:{tenant},
//     and can only grant permissions the calling token holds itself;
//   - a cluster.manage token passes every tenant route of every tenant;
//   - POST /v1/tenants/{tenant}/namespaces/{namespace}/batch creates streams
//     and caches all together or not at all (tenant.manage), retry-safe with
//     an idempotency key (body field or Idempotency-Key header);
//   - POST/GET /v1/tenants/{tenant}/revocations and DELETE
//     .../revocations/{subject} revoke, list and lift revocations
//     (tenant.manage); revoked_before is the time of the POST;
//   - GET /v1/members shows the Raft group (cluster.manage).
//   - PUT/GET /v1/tenants/{tenant}/oidc set and show the tenant's upstream
//     OIDC issuer; POST .../token/exchange trades an upstream token (the
//     credential, no Felix token) for a Felix token holding the principal's
//     RBAC grants, narrowed as asked, plus a refresh token; POST
//     .../token/refresh rotates a refresh token (no Felix token);
//   - policies (roles), assignments and principals under /v1/tenants/{tenant}/
//     (tenant.manage); taking rights away writes revocations;
//   - POST /v1/signing-keys/rotate (cluster.manage). docs/auth.md has the
//     whole story.
//
// A missing or invalid token is 401 unauthorized, a missing permission 403
// forbidden, a bad field 400 invalid_request naming the field, a missing
// resource or parent 404 not_found, an existing resource (or a tenant or
// namespace delete that still has children, without ?recursive=true) 409
// conflict. Errors are {"error":{"code","message","retry","detail"?}}.
// Creates answer 201 with the stored resource, lists {"items":[...]},
// deletes 204. A stream PATCH may change retention and sub_queue_policy
// only. Requests are counted in felix_controlplane_requests_total{route,code}
// with the route pattern as the label.
package controlplane
