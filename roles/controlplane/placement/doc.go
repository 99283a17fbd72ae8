// Package placement decides which broker owns each shard of every stream
// and cache. It is the pure core of the control plane's placement loop:
// the Raft leader reads the broker registry, the catalog and the current
// assignments, calls Compute, and proposes the changes as typed commands.
// The package does no I/O, reads no clock and draws no random numbers, so
// the same input always gives the same output, on any leader.
//
// # Usage contract
//
//  1. Build an Input: every registered broker (node id, zone, state,
//     storage identity, when a down one went down, and what it suspects),
//     the brokers' last position reports (Reports), every stream and cache of the catalog (key,
//     incarnation, shard count, durability, replication factor,
//     consistency; StreamResource and CacheResource convert the catalog's
//     specs), the State last committed (assignments and the generation
//     counter), a clock reading (NowMs) and the restore delay
//     (RestoreAfterMs, FELIX_SHARD_RESTORE_AFTER_MS). Slice order does not
//     matter. A malformed input (duplicate node ids, resources or shards,
//     a generation above the counter, an owner at generation 0, more than
//     MaxShards shards, a negative time) is
//     refused with an *InputError listing every problem; nothing is placed.
//  2. Compute(in) returns Output.Next, one Assignment per shard of every
//     resource sorted by shard, and Output.Decisions, one per change of a
//     shard's assignment (and one per follower added or dropped). Commit Next as a whole (one Raft command, or
//     commands built from Decisions that reach the same state): the
//     generation counter in Next.LastGeneration must be committed with
//     the assignments that use it, or a generation could be handed out
//     twice.
//  3. Computing again from Next with the same brokers, resources and
//     clock reading gives Next back and no decisions: run the loop as
//     often as you like. A later clock reading may replace down followers
//     (replication-factor restore) and nothing else.
//  4. A broker opens, and serves, only the shards whose Owner is its node
//     id and whose Unavailable is empty, at the assignment's Generation;
//     others answer with `shard_unavailable` (reason Unavailable) or
//     forward to the owner.
//
// # Rules
//
//   - Every shard has one assignment. Its Owner is a broker, or empty with
//     ReasonNotAssigned while no broker is live. Its Generation comes from
//     a cluster-wide counter: it grows with every change of owner, and is
//     never reused, across shards and incarnations included.
//   - A shard that needs an owner goes to a live broker chosen by the
//     rules on chooser: fewest shards of the same resource, then fewest of
//     them in the broker's zone, then fewest shards in the cluster, then a
//     rendezvous hash. Draining and down brokers take nothing new.
//   - Shards never move to balance: a broker that joins takes its share of
//     the shards placed after it joined. Moving a live shard is a move
//     (copy, fence, cut over), which is part 2.
//   - When an owner is down (or no longer registered), its in-memory shards
//     are placed on live brokers at once, at a new generation (they
//     restart empty; Decision kind Reassigned). Its durable shards keep
//     owner and generation and are marked ReasonOwnerDown: their only copy
//     is there, and a short or empty copy is never served. When the owner
//     is live again with the storage identity the shard was placed on
//     (Assignment.StorageID), the shard serves again (Restored). If the
//     owner is registered with another storage identity, its data directory
//     is new and the records are gone: the shard is marked
//     ReasonStorageLost and waits for an operator (the spec's `placement
//     abandon`, part 2). An owner whose new identity replaced the shard's
//     after a machine crash (Broker.CrashedStorageID) still holds the
//     records, perhaps short of their tail: a follower is promoted, or
//     the shard is reopened on the owner under its new identity at a new
//     generation (Reopened; see crashed.go).
//   - A deleted resource's assignments are dropped; a resource of a new
//     incarnation is placed anew, at new generations; shards beyond a
//     resource's shard count are dropped.
//   - Nothing changes that the rules above do not require.
//
// # Replica sets
//
// A durable resource with a ReplicationFactor above 1 gives each shard up
// to ReplicationFactor-1 followers (Assignment.Replicas); the owner is the
// leader that ships its records to them. In-memory resources, and caches
// (one copy until the log-backed cache), have none.
//
//   - A follower is a live broker (not draining, not down) that holds no
//     copy of the shard yet, chosen by the rules on replicaChooser: a
//     zone without a copy of the shard first, then the fewest copies
//     (owned shards plus followers) in the cluster, then node id. Its
//     StorageID is recorded.
//   - A shard keeps its followers across passes. A follower whose broker
//     is no longer registered, or is registered with another storage
//     identity (its copy is gone), is dropped (ReplicaDropped).
//   - Replication-factor restore: a follower whose broker has been down
//     for RestoreAfterMs (NowMs - Broker.DownSinceMs; a draining broker's
//     followers stay) is dropped (ReplicaDropped, reason ReplicaRestore)
//     and a new follower chosen in the same pass by the top-up rule below,
//     never on the dropped one's broker (it is down). Only while the owner
//     serves the shard, and only as many as live brokers holding no copy
//     can replace: a set never shrinks for a restore, so a shard keeps its
//     down follower while no broker can take its place. Before the delay
//     a down follower stays listed.
//   - A set with fewer followers than the factor asks for is topped up
//     (ReplicaAdded) whenever an eligible broker exists and the owner
//     serves the shard; with fewer brokers than the factor it holds what
//     exists, down to the leader alone.
//   - Follower changes never change the Generation. A change of owner
//     (in-memory shards only, today) clears the followers.
//
// # Not done yet
//
// The consistency level's effect is the brokers' (log shipping and quorum
// acknowledgement). A restored follower is listed at once and the
// leader's shipping fills it from offset 0; on a Quorum shard it counts
// towards a majority only once it answers, as every follower does.
// Seating a new copy only once it has caught up (and, on Quorum, holding
// first what a majority of the old set held), restore state kept in the
// assignment, pacing, moves and drains, zone repair of followers already
// placed, and `placement abandon` are still to come. See docs/placement.md.
//
// # Promotion
//
// A durable shard with followers whose owner is down or lost its storage
// (or, on a Quorum shard, is suspected by a majority of its set) is
// promoted to a follower at a new generation; the old owner stays in the
// set. On a Quorum shard the first follower live under its copy's
// storage identity will do. On a shard of consistency leader only one
// that held the log when it last reported (Input.Reports; see
// furthestReported): live under its copy's identity, its report stamped
// with it at the shard's generation, holding at least what the leader
// last reported as durable, and (the leader being down) reported since
// the leader was marked down; the furthest of them. Without one, or
// without a report from the leader at its generation, the shard waits.
package placement
