package wire

// Catalog types: what the control plane stores about tenants, namespaces,
// streams and caches, and what brokers learn through the snapshot and
// changes feeds. They travel as JSON over the control plane's HTTP API.

// CatalogKind names one of the catalog's resource kinds. Each kind has its
// own sequence cursor.
type CatalogKind string

// Catalog kinds, in the order a cold sync fetches them.
const (
	KindTenants    CatalogKind = "tenants"
	KindNamespaces CatalogKind = "namespaces"
	KindCaches     CatalogKind = "caches"
	KindStreams    CatalogKind = "streams"
)

// CatalogKinds lists the kinds in dependency order.
var CatalogKinds = []CatalogKind{KindTenants, KindNamespaces, KindCaches, KindStreams}

// KindRevocations is the feed of revoked principals. It is not in
// CatalogKinds: a broker follows it on its own cursor and tolerates a
// control plane that does not serve it yet.
const KindRevocations CatalogKind = "revocations"

// Revocation withdraws every token of one principal of a tenant issued
// before RevokedBefore (Unix seconds): brokers refuse such tokens with
// code revoked and end the streams and subscriptions opened with them.
// A later revocation of the same principal replaces an earlier one; a
// delete lifts it.
type Revocation struct {
	TenantID      string `json:"tenant_id"`
	Subject       string `json:"subject"`
	RevokedBefore int64  `json:"revoked_before"`
	Reason        string `json:"reason,omitempty"`
}

// Tenant is a tenant.
type Tenant struct {
	TenantID    string `json:"tenant_id"`
	DisplayName string `json:"display_name,omitempty"`
}

// Namespace is a namespace within a tenant.
type Namespace struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
}

// Retention bounds a durable stream; nil fields mean no bound.
type Retention struct {
	MaxSizeBytes  *uint64 `json:"max_size_bytes,omitempty"`
	MaxAgeSeconds *uint64 `json:"max_age_seconds,omitempty"`
}

// StreamSpec is a stream as the catalog stores it.
type StreamSpec struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
	// Shards is the shard count (at least 1).
	Shards uint32 `json:"shards"`
	// Durable streams are written to the segment log.
	Durable   bool      `json:"durable"`
	Retention Retention `json:"retention"`
	// Consistency is "leader" (default) or "quorum".
	Consistency string `json:"consistency,omitempty"`
	// ReplicationFactor is the copies of each shard, the leader's
	// included (1 to 7; a create without it gets the control plane's
	// FELIX_DEFAULT_REPLICATION_FACTOR). Durable streams get factor - 1
	// followers (docs/placement.md, "Replica sets").
	ReplicationFactor uint32 `json:"replication_factor,omitempty"`
	// SubQueuePolicy is "drop_new", "block" or "drop_old"; empty means
	// the broker's default.
	SubQueuePolicy string `json:"sub_queue_policy,omitempty"`
	// Incarnation tells this stream apart from every other stream that had
	// or will have its name in the same cluster. The control plane assigns
	// it when the stream is created and keeps it on every update; a value
	// a client sends is ignored. A broker deletes a durable stream's files
	// only on a delete naming the cluster and incarnation they were
	// written for. Empty on streams created before incarnations existed.
	Incarnation string `json:"incarnation,omitempty"`
}

// CacheSpec is a cache as the catalog stores it.
type CacheSpec struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Cache     string `json:"cache"`
	Shards    uint32 `json:"shards,omitempty"`
	// MaxEntries and MaxBytes bound the cache; 0 means the broker default.
	MaxEntries uint64 `json:"max_entries,omitempty"`
	MaxBytes   uint64 `json:"max_bytes,omitempty"`
	// Incarnation is assigned and kept like StreamSpec.Incarnation.
	Incarnation string `json:"incarnation,omitempty"`
}

// ChangeOp is what a catalog change did.
type ChangeOp string

// Change operations.
const (
	OpPut    ChangeOp = "put"
	OpDelete ChangeOp = "delete"
)

// CatalogItem is one entry of a snapshot or changes page. Exactly one of
// the resource pointers is set, matching the page's kind. A delete carries
// the resource's identifying fields.
type CatalogItem struct {
	Seq       uint64      `json:"seq"`
	Op        ChangeOp    `json:"op"`
	Tenant    *Tenant     `json:"tenant,omitempty"`
	Namespace *Namespace  `json:"namespace,omitempty"`
	Stream    *StreamSpec `json:"stream,omitempty"`
	Cache     *CacheSpec  `json:"cache,omitempty"`
	// Revocation is set on pages of KindRevocations.
	Revocation *Revocation `json:"revocation,omitempty"`
}

// CatalogPage is a snapshot (every live resource of a kind, Op put) or a
// page of changes after a cursor. Seq is the cursor to continue from. Reset
// on a changes page means the changes after the cursor are no longer kept
// and the reader must take a new snapshot.
type CatalogPage struct {
	Kind  CatalogKind   `json:"kind"`
	Seq   uint64        `json:"seq"`
	Reset bool          `json:"reset,omitempty"`
	Items []CatalogItem `json:"items"`
	// ClusterID names the cluster whose catalog this is: chosen once,
	// when the control plane's store is first started, and never changed.
	// A broker that finds another cluster's id keeps the files it wrote
	// for the first one and does not serve them. Empty from a control
	// plane that predates cluster ids.
	ClusterID string `json:"cluster_id,omitempty"`
}
