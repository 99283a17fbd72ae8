package placement

// BrokerState is a broker's state in the registry, as the control-plane
// leader's expiry loop last decided it.
type BrokerState string

// Broker states.
const (
	// Live brokers serve the shards placed on them and take new ones.
	Live BrokerState = "live"
	// Draining brokers keep serving what they own but take nothing new
	// (handing their shards off is a move: part 2).
	Draining BrokerState = "draining"
	// Down brokers were marked down by the expiry loop: they serve
	// nothing until they come back.
	Down BrokerState = "down"
)

// serving reports whether a broker in state s serves the shards it owns.
func (s BrokerState) serving() bool { return s == Live || s == Draining }

// Broker is one entry of the broker registry, as far as placement needs it.
type Broker struct {
	// NodeID names the broker; unique among Input.Brokers, never empty.
	NodeID string
	// Zone is the failure domain (FELIX_NODE_ZONE). Empty means the
	// broker is alone in its own zone, as the spec says.
	Zone string
	// State is live, draining or down.
	State BrokerState
	// StorageID is the identity of the broker's data directory: a random
	// id kept in it, new whenever the directory is new. A durable shard's
	// records are only on the storage identity it was placed on.
	StorageID string
	// CrashedStorageID, when set, is the identity StorageID replaced
	// because the broker's machine crashed under an fsync policy that may
	// lose unsynced tails: the shards placed on it under that identity
	// are still on its disk, perhaps short of their last records (see
	// crashedOwner). "" when its directory is new or it kept its identity.
	CrashedStorageID string
	// RegisteredAtMs is when the broker last registered, in Unix
	// milliseconds (the control plane's clock, as Report.AtMs): a shard
	// named again to a broker back from a crash waits for a report of
	// every follower since then (see reopenCrashed). 0 means unknown.
	RegisteredAtMs int64
	// DownSinceMs is, for a Down broker, when it went down in Unix
	// milliseconds (the control plane fills it from the moment the expiry
	// loop marked it down); 0 means unknown, and a broker down since an
	// unknown time never has its followers replaced. Ignored in other
	// states.
	DownSinceMs int64
	// Suspects are the shard leaders this broker, as a follower, last
	// reported silent (the Quorum fast path: a majority of a shard's
	// replica set suspecting its leader promotes a follower without
	// waiting for the leader to be marked down).
	Suspects []Suspicion
}

// Suspicion is one silent leader a follower reported.
type Suspicion struct {
	Shard      ShardRef
	Generation uint64
	Leader     string
}

// Kind tells streams from caches; the two have separate name spaces.
type Kind string

// Resource kinds.
const (
	KindStream Kind = "stream"
	KindCache  Kind = "cache"
)

// ResourceKey names a stream or a cache. It is comparable, so it keys maps.
type ResourceKey struct {
	Kind      Kind
	TenantID  string
	Namespace string
	Name      string
}

// less orders keys by kind, tenant, namespace, then name.
func (k ResourceKey) less(o ResourceKey) bool {
	if k.Kind != o.Kind {
		return k.Kind < o.Kind
	}
	if k.TenantID != o.TenantID {
		return k.TenantID < o.TenantID
	}
	if k.Namespace != o.Namespace {
		return k.Namespace < o.Namespace
	}
	return k.Name < o.Name
}

// String renders the key as kind:tenant/namespace/name, for logs.
func (k ResourceKey) String() string {
	return string(k.Kind) + ":" + k.TenantID + "/" + k.Namespace + "/" + k.Name
}

// Resource is a stream or a cache as placement sees it, built from the
// catalog's wire.StreamSpec or wire.CacheSpec.
type Resource struct {
	Key ResourceKey
	// Incarnation tells this resource apart from an earlier one of the
	// same name: assignments of another incarnation are dropped and the
	// resource is placed anew.
	Incarnation string
	// Shards is the shard count; 0 counts as 1 (as core does) and at most
	// MaxShards is accepted.
	Shards uint32
	// Durable resources keep their records on the owner's storage: a
	// durable shard never changes owner in part 1 (it waits for its
	// owner), an in-memory one is placed elsewhere as soon as its owner
	// is down.
	Durable bool
	// ReplicationFactor is the number of copies wanted, the owner
	// included (0 counts as 1). A durable resource's shards get up to
	// ReplicationFactor-1 followers in Assignment.Replicas; in-memory
	// resources have the owner alone, whatever the factor.
	ReplicationFactor uint32
	// Consistency is "leader" or "quorum" (empty means leader); copied
	// into each new Assignment.
	Consistency string
}

// shardCount is the number of shards the resource has (Shards, at least 1).
func (r *Resource) shardCount() uint32 { return max(r.Shards, 1) }

// MaxShards bounds a resource's shard count, so a bad input cannot make
// Compute allocate without bound.
const MaxShards = 1 << 16

// ShardRef names one shard of a resource.
type ShardRef struct {
	Resource ResourceKey
	Shard    uint32
}

// less orders shard references by resource, then shard number.
func (s ShardRef) less(o ShardRef) bool {
	if s.Resource != o.Resource {
		return s.Resource.less(o.Resource)
	}
	return s.Shard < o.Shard
}

// Replica is one follower copy of a durable shard: the owner (the
// leader) ships its records to it.
type Replica struct {
	// NodeID is the follower's broker.
	NodeID string
	// StorageID is the follower's storage identity when it was chosen:
	// where its copy is. A follower whose broker is registered with
	// another one has lost its copy and is dropped.
	StorageID string
}

// Assignment is the placement of one shard: the record the control plane
// keeps in Raft, serves to `shard_owners` and hands to brokers.
type Assignment struct {
	Shard ShardRef
	// Incarnation is the resource's incarnation this assignment is for.
	Incarnation string
	// Owner is the node id of the broker that serves the shard (the
	// leader, in part 2's terms); empty when no broker could be chosen.
	// Invariant: Owner == "" only with Unavailable == ReasonNotAssigned.
	Owner string
	// StorageID is, on durable shards, the owner's storage identity when
	// it was given the shard: where the shard's records are. Empty on
	// in-memory shards.
	StorageID string
	// Generation grows with every change of owner and is never reused,
	// across shards and incarnations too (it comes from
	// State.LastGeneration). 0 only while Owner is empty.
	// Invariant: 0 < Generation <= State.LastGeneration when Owner != "".
	Generation uint64
	// Unavailable is empty while the owner serves the shard, else why it
	// does not: ReasonNotAssigned, ReasonOwnerDown or ReasonStorageLost.
	Unavailable string
	// Consistency is the resource's consistency when the shard was placed.
	Consistency string
	// Replicas are the followers of a durable shard whose resource has a
	// replication factor above 1, in the order they were chosen. A shard
	// keeps its followers across passes; one whose broker is gone or has
	// new storage is dropped, one whose broker has been down for
	// Input.RestoreAfterMs is replaced while the owner serves and a live
	// broker can take its place (replication-factor restore), and a short
	// set is topped up from live brokers while the owner serves.
	// Changes of followers leave Generation alone; a change of owner
	// clears them.
	// Invariant: at most ReplicationFactor-1 entries, distinct, none the
	// Owner; empty on in-memory shards and while Owner is empty.
	Replicas []Replica
}

// State is the placement the control plane holds: every shard's
// assignment and the generation counter.
type State struct {
	// Assignments, sorted by Shard, one per shard (in Compute's output).
	Assignments []Assignment
	// LastGeneration is the highest generation ever handed out.
	// Invariant: LastGeneration >= every Assignment.Generation, and it
	// never decreases.
	LastGeneration uint64
}

// Input is everything Compute decides from.
type Input struct {
	Brokers   []Broker
	Resources []Resource
	Current   State
	// NowMs is the caller's clock reading, in Unix milliseconds, against
	// which Broker.DownSinceMs is measured. Compute reads no clock of its
	// own: the same input gives the same output. Never negative.
	NowMs int64
	// RestoreAfterMs is how long a follower's broker may stay down before
	// the follower is replaced (FELIX_SHARD_RESTORE_AFTER_MS); 0 never
	// replaces one. Never negative.
	RestoreAfterMs int64
	// Reports are the brokers' last position reports, at most one per
	// broker and storage identity (deregistered brokers' included): what
	// a leader-consistency shard's promotion decides from.
	Reports []Report
}

// Output is Compute's answer: the next state and the changes that lead
// to it from Input.Current.
type Output struct {
	Next State
	// Decisions lists an entry per shard whose assignment was added,
	// dropped or altered (two for a shard of a re-created resource: the
	// drop, then the new placement), plus one per follower added or
	// dropped, in shard order; none when nothing changed.
	Decisions []Decision
}
