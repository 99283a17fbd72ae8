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

// ShardReplica is one follower copy of a shard (part 2; always empty in
// part 1).
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
	// Replicas are the followers (part 2).
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
