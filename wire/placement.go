package wire

// Placement types: the shard assignments the control plane keeps in Raft
// and serves at GET /v1/placement/... (JSON; see docs/protocol.md,
// "Placement", and docs/placement.md for the rules).

// Placement resource kinds, in ShardAssignment.Kind.
const (
	PlacementStream = "stream"
	PlacementCache  = "cache"
)

// Why a shard is not served, in ShardAssignment.Unavailable (the same
// values as the placement package's reasons).
const (
	UnavailableNotAssigned = "not_assigned"
	UnavailableOwnerDown   = "owner_down"
	UnavailableStorageLost = "storage_lost"
)

// ShardReplica is one follower copy of a durable shard: the control
// plane places up to replication_factor-1 of them (docs/placement.md,
// "Replica sets").
type ShardReplica struct {
	NodeID    string `json:"node_id"`
	StorageID string `json:"storage_id,omitempty"`
}

// ShardAssignment is the placement of one shard of a stream or a cache.
type ShardAssignment struct {
	// Kind is PlacementStream or PlacementCache.
	Kind      string `json:"kind"`
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	// Name is the stream's or the cache's name.
	Name  string `json:"name"`
	Shard uint32 `json:"shard"`
	// Incarnation is the resource's incarnation the assignment is for.
	Incarnation string `json:"incarnation,omitempty"`
	// NodeID is the owner: the broker that serves the shard; empty only
	// with Unavailable "not_assigned".
	NodeID string `json:"node_id,omitempty"`
	// StorageID is, on durable shards, the owner's storage identity when it
	// was given the shard (where the records are).
	StorageID string `json:"storage_id,omitempty"`
	// Generation grows with every change of owner, from one cluster-wide
	// counter; 0 only while the shard has no owner.
	Generation uint64 `json:"generation"`
	// Unavailable is empty while the owner serves the shard, else
	// not_assigned, owner_down or storage_lost.
	Unavailable string `json:"unavailable,omitempty"`
	// Consistency is the resource's consistency when the shard was placed.
	Consistency string `json:"consistency,omitempty"`
	// Replicas are the followers of a durable shard whose resource has a
	// replication factor above 1; the owner is their leader.
	Replicas []ShardReplica `json:"replicas,omitempty"`
}

// PlacementView is the body of GET /v1/placement/streams/... and
// /v1/placement/caches/...: every shard of one resource, in shard order.
// A shard the placement loop has not placed yet is listed with
// Unavailable "not_assigned" and generation 0.
type PlacementView struct {
	Kind      string `json:"kind"`
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Shards holds one entry per shard of the resource.
	Shards []ShardAssignment `json:"shards"`
	// LastGeneration is the cluster-wide generation counter: the highest
	// generation ever handed out.
	LastGeneration uint64 `json:"last_generation"`
}

// ClusterView is what a broker learns of its cluster from the control
// plane (GET /v1/cluster/view; in process, the control plane's Service):
// every broker of the registry and every shard's assignment. A broker
// routes every request by the last view it holds.
type ClusterView struct {
	// ClusterID names the cluster (as on catalog pages).
	ClusterID string `json:"cluster_id,omitempty"`
	// Tag changes whenever anything else in the view does: a broker that
	// sends the tag it holds (?known=) is answered 304 Not Modified when
	// nothing changed.
	Tag string `json:"tag"`
	// PlacementRevision is the placement's revision: it grows with every
	// applied placement command.
	PlacementRevision uint64 `json:"placement_revision"`
	// Brokers are the registry's records (deregistered ones left out).
	Brokers []Broker `json:"brokers"`
	// Assignments are every shard of every stream and cache, in key order
	// (kind, tenant, namespace, name, shard).
	Assignments []ShardAssignment `json:"assignments"`
}

// Copy states, in ReplicaState.State and ShardReplication.LeaderState.
const (
	CopyLive     = "live"
	CopyDraining = "draining"
	CopyDown     = "down"
	// CopyGone: the broker is no longer registered, or is registered with
	// another storage identity than the copy was placed on.
	CopyGone = "gone"
)

// ReplicaState is one follower copy of a shard and the state of its
// broker.
type ReplicaState struct {
	NodeID    string `json:"node_id"`
	StorageID string `json:"storage_id,omitempty"`
	// State is live, draining, down or gone.
	State string `json:"state"`
	// Position is how far the copy held the log at its broker's last
	// report under the copy's storage identity; absent when it reported
	// none.
	Position *CopyPosition `json:"position,omitempty"`
	// Lag is the leader's reported end less this copy's reported durable
	// offset (0 when it holds as much), when both reported the shard at
	// the assignment's generation.
	Lag *uint64 `json:"lag,omitempty"`
}

// CopyPosition is one copy's reported position (see ShardPosition).
type CopyPosition struct {
	Generation uint64 `json:"generation"`
	Durable    uint64 `json:"durable"`
	// End is the leader's end (on the leader's position only).
	End uint64 `json:"end,omitempty"`
	// ReportAgeMs is how long before the answer the report arrived, on
	// the clock of the control-plane member answering.
	ReportAgeMs int64 `json:"report_age_ms"`
}

// ShardReplication is how many copies of one durable shard are live
// against how many its stream wants.
type ShardReplication struct {
	Kind       string `json:"kind"`
	TenantID   string `json:"tenant_id"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Shard      uint32 `json:"shard"`
	Generation uint64 `json:"generation"`
	// Leader is the owner's node id, empty while the shard has none;
	// LeaderState is its copy's state (live, draining, down or gone).
	Leader      string `json:"leader"`
	LeaderState string `json:"leader_state,omitempty"`
	// LeaderPosition is the leader's last reported position under the
	// storage identity the shard was placed on; absent when it reported
	// none.
	LeaderPosition *CopyPosition `json:"leader_position,omitempty"`
	// Desired is the replication factor; Current counts the copies, the
	// leader's included, whose broker is live or draining under the
	// storage identity the copy was placed on.
	Desired         int  `json:"desired"`
	Current         int  `json:"current"`
	UnderReplicated bool `json:"under_replicated"`
	// Replicas are the followers, in placement order.
	Replicas []ReplicaState `json:"replicas"`
}

// ReplicationView is the body of GET /v1/placement/replication: every
// durable shard whose stream has a replication factor above 1 or that is
// under-replicated, by kind, tenant, namespace, name and shard.
type ReplicationView struct {
	Shards []ShardReplication `json:"shards"`
}

// HandoffRequest is the body of POST /v1/placement/handoff: a stopping
// broker (From) asks to hand the durable shard it leads at Generation to
// its follower To, which holds everything it has (docs/placement.md,
// "Planned handoff"). The answer is the shard's new ShardAssignment; a
// request the placement does not back is refused 409 (code conflict,
// detail reason).
type HandoffRequest struct {
	// Kind is PlacementStream (the only kind handed off today).
	Kind       string `json:"kind"`
	TenantID   string `json:"tenant_id"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Shard      uint32 `json:"shard"`
	Generation uint64 `json:"generation"`
	From       string `json:"from"`
	To         string `json:"to"`
}

// PlacementAbandon is the answer of POST
// /v1/placement/streams/{tenant}/{namespace}/{stream}/shards/{shard}/abandon:
// what giving up the copies of a waiting durable shard does (DryRun) or
// did.
type PlacementAbandon struct {
	// DryRun: nothing was changed; Before and After say what would be.
	DryRun bool `json:"dry_run,omitempty"`
	// Before and After are the shard's assignment before and after.
	Before ShardAssignment `json:"before"`
	After  ShardAssignment `json:"after"`
	// Kept are the live brokers whose copies the shard keeps, the new
	// leader first; it takes the furthest of them before it serves.
	Kept []string `json:"kept"`
	// Lost are the down brokers whose copies are given up: records only
	// they held are lost.
	Lost []string `json:"lost"`
}
