package placement

// Why a shard is not served, in Assignment.Unavailable. The broker answers
// such a shard with `shard_unavailable` carrying the reason in its detail
// (and `shard_owners` shows it); ReasonNotAssigned is the spec's own
// `shard_owners` value.
const (
	// ReasonNotAssigned: no live broker could take the shard.
	ReasonNotAssigned = "not_assigned"
	// ReasonOwnerDown: the shard's owner is down (or no longer
	// registered). On a durable shard its only copy is there, and the
	// spec never serves a short or empty copy, so the shard waits for it.
	// An in-memory shard carries it only while no live broker exists.
	ReasonOwnerDown = "owner_down"
	// ReasonStorageLost: a durable shard's owner is registered with
	// another storage identity than the one the shard was placed on (its
	// data directory is new): the records are gone from it, and only an
	// operator can decide to serve the shard again (the spec's
	// `placement abandon`, part 2). One whose owner took the new identity
	// after a machine crash holds its records still, perhaps short of
	// their tail: a follower is promoted, or it is reopened there.
	ReasonStorageLost = "storage_lost"
)

// DecisionKind says what happened to one shard.
type DecisionKind string

// Decision kinds.
const (
	// Placed: a shard without an owner got one (a new resource, a new
	// incarnation, or a shard that waited for a live broker).
	Placed DecisionKind = "placed"
	// Reassigned: an in-memory shard left its down owner for a live
	// broker, at a new generation; it restarts empty there.
	Reassigned DecisionKind = "reassigned"
	// Waiting: a shard stopped being served (Reason says why); it keeps
	// its owner and generation.
	Waiting DecisionKind = "waiting"
	// Restored: a waiting shard's owner serves it again (back with the
	// same storage identity); owner and generation unchanged.
	Restored DecisionKind = "restored"
	// Dropped: the shard's resource was deleted or re-created, or the
	// shard is beyond its resource's shard count.
	Dropped DecisionKind = "dropped"
	// Promoted: a durable shard whose owner is down or lost its storage
	// (or, on a Quorum shard, is suspected by a majority of its set) is
	// led by one of its followers (To), at a new generation; the old
	// owner (From) stays in the replica set.
	Promoted DecisionKind = "promoted"
	// Reopened: a durable shard whose owner came back under a new storage
	// identity after a machine crash (Broker.CrashedStorageID) is named to
	// it again under the new identity, at a new generation: no follower
	// holds a copy, or every follower that does has reported since and
	// none could be promoted (see reopenCrashed). The owner opens what
	// its disk holds, taking the furthest copy first when it has
	// followers.
	Reopened DecisionKind = "reopened"
	// ReplicaAdded: a follower (Decision.Replica) joined the shard's
	// replica set; owner and generation unchanged.
	ReplicaAdded DecisionKind = "replica_added"
	// ReplicaDropped: a follower (Decision.Replica) left the shard's
	// replica set, for Reason (ReplicaGone, ReplicaStorageLost,
	// ReplicaNotWanted or ReplicaRestore); owner and generation unchanged.
	ReplicaDropped DecisionKind = "replica_dropped"
)

// Decision is one change Compute made, for logging now and for proposing
// typed Raft commands later.
type Decision struct {
	Kind  DecisionKind
	Shard ShardRef
	// Incarnation is the incarnation of the assignment the decision is
	// about (the old one for Dropped).
	Incarnation string
	// From is the previous owner ("" if none), To the new one ("" if
	// none); equal for Waiting, Restored, ReplicaAdded and
	// ReplicaDropped.
	From, To string
	// Replica is the follower's node id, for ReplicaAdded and
	// ReplicaDropped only.
	Replica string
	// Generation is the assignment's generation after the decision (the
	// dropped one's for Dropped).
	Generation uint64
	// Reason is the Unavailable reason for Waiting (a new shard no broker
	// could take is Waiting with ReasonNotAssigned), DropDeleted,
	// DropRecreated or DropBeyondShards for Dropped, and ReplicaGone,
	// ReplicaStorageLost, ReplicaNotWanted or ReplicaRestore for
	// ReplicaDropped.
	Reason string
	// Detail, on a Waiting decision of a durable shard with followers,
	// says why none of them took over (for the log).
	Detail string
}

// Why a shard was dropped, in Decision.Reason.
const (
	DropDeleted      = "deleted"
	DropRecreated    = "recreated"
	DropBeyondShards = "beyond_shard_count"
)
