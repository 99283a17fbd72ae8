// Package catalogsync keeps a broker's registries in step with the
// control plane's catalog.
//
// A Source serves, per catalog kind, a full snapshot and a feed of
// changes after a cursor, plus the JWKS the broker verifies tokens with.
// NewHTTPSource reads them from the control plane's REST API; the control
// plane's Service satisfies Source directly when both roles share a
// process.
//
// Syncer.SyncOnce does one pass over the kinds in wire.CatalogKinds order
// (tenants, namespaces, caches, streams), so parents are applied before
// their children:
//
//   - A kind seen for the first time is read from a snapshot: every item is
//     applied and the snapshot's cursor kept.
//   - Afterwards the kind's changes after its cursor are applied in order,
//     page by page (at most MaxPagesPerPass pages per pass). The cursor
//     moves only after a page has been applied, so a failed fetch is simply
//     fetched again on the next pass.
//   - A changes page marked Reset means the feed no longer reaches back to
//     the cursor: a fresh snapshot is taken. Whatever the broker knew that
//     the snapshot lacks is removed, except streams and caches, which are
//     forgotten (ForgetStream, ForgetCache): the broker stops serving them
//     but keeps their data, because a snapshot that lacks a resource does
//     not say it was deleted (the control plane may have lost its state).
//     Only a delete on the changes feed (RemoveStream, RemoveCache), which
//     names the incarnation it deleted, may delete data.
//   - Every page names its cluster (wire.CatalogPage.ClusterID), which the
//     Applier learns through SetCluster before anything of that cluster is
//     applied. A page from another cluster than the applied state's makes
//     every kind start again from a snapshot, so the old cluster's streams
//     are forgotten, never deleted.
//   - The JWKS is fetched on every pass and handed to OnJWKS.
//
// Kinds are independent: a failing kind does not stop the others, so the
// catalog is eventually consistent per kind, not transactional across
// kinds. A page with a malformed item is refused whole (nothing applied,
// cursor kept). An Applier error for one item is reported but does not
// hold the cursor back, because applying the same item again would fail
// the same way.
//
// Revocations (wire.KindRevocations) are followed the same way, on their
// own cursor after the other kinds, but only for an Applier that is also a
// RevocationApplier, and never at the cost of the rest: a failure of that
// feed is logged and retried next pass, does not hold back Synced and is
// not returned by SyncOnce. A control plane that answers 404 or 400 for
// the kind has no revocations; it is asked again after UnknownKindRetry.
//
// The HTTP source can read a control plane of several members
// (comma-separated URLs, or NewHTTPSourceMulti): it sticks to the member
// that last answered and moves to the next on a connection error or a 5xx
// answer.
//
// SyncKinds is a pass over the named kinds alone (still in dependency
// order, and with no JWKS or revocations): the on-demand pass of a broker
// that misses a name. It shares SyncOnce's token, so passes never overlap.
//
// Synced becomes true after the first pass in which every fetch
// succeeded. Run repeats SyncOnce on a ticker, logs a failure once per
// streak of the same error, and the recovery when it ends, and calls
// OnSynced after each pass once synced. The broker runs exactly this loop.
package catalogsync
