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
//     storage identity), every stream and cache of the catalog (key,
//     incarnation, shard count, durability, replication factor,
//     consistency; StreamResource and CacheResource convert the catalog's
//     specs) and the State last committed (assignments and the
//     generation counter). Slice order does not matter. A malformed input
//     (duplicate node ids, resources or shards, a generation above the
//     counter, an owner at generation 0, more than MaxShards shards) is
//     refused with an *InputError listing every problem; nothing is placed.
//  2. Compute(in) returns Output.Next, one Assignment per shard of every
//     resource sorted by shard, and Output.Decisions, one per shard whose
//     assignment changed. Commit Next as a whole (one Raft command, or
//     commands built from Decisions that reach the same state): the
//     generation counter in Next.LastGeneration must be committed with
//     the assignments that use it, or a generation could be handed out
//     twice.
//  3. Computing again from Next with the same brokers and resources gives
//     Next back and no decisions: run the loop as often as you like.
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
//     abandon`, part 2).
//   - A deleted resource's assignments are dropped; a resource of a new
//     incarnation is placed anew, at new generations; shards beyond a
//     resource's shard count are dropped.
//   - Nothing changes that the rules above do not require.
//
// # Part 2
//
// Replica sets (Assignment.Replicas, up to Resource.ReplicationFactor),
// the consistency level's effect, moves and drains, replication-factor
// restore, zone repair of followers, promotion of an eligible follower
// when a durable owner dies, and `placement abandon` are part 2. Compute
// keeps the replicas it is given on shards that keep their owner and
// clears them on a change of owner. See docs/placement.md.
package placement
