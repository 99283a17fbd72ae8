// Package controlplane is Felix's metadata service: the catalog of
// tenants, namespaces, streams and caches, the token signing key, and the
// REST API over both.
//
// # Pieces
//
// A Store keeps the catalog durably (BoltStore: one bbolt file; a Raft
// store can implement the same interface). Service wraps a Store: New
// loads the ES256 signing key from the store's meta (creating one on first
// start), Bootstrap creates tenant "default" with namespace "default" once
// in the store's life, MintToken signs Felix tokens, and Snapshot, Changes
// and JWKS let a broker in the same process use the Service directly as
// its catalog source. Handler serves the REST API.
//
// # Catalog feeds
//
// Every kind (tenants, namespaces, caches, streams) has its own sequence
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
//   - POST /v1/tenants/{tenant}/tokens needs token.create on tenant:{tenant},
//     and can only grant permissions the calling token holds itself;
//   - a cluster.manage token passes every tenant route of every tenant.
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
