package placement

import (
	"fmt"
	"slices"
	"strings"
)

// Abandoned: an operator gave up the copies of a waiting durable shard
// that only down brokers hold (felix admin placement abandon). The shard
// is led by one of the live brokers of its replica set (To), at a new
// generation, with the set's other live brokers as followers; the down
// ones (Decision.Lost) leave the set, and whatever only they held is
// lost.
const Abandoned DecisionKind = "abandoned"

// AbandonError is why Abandon refused: the shard is not one to abandon.
type AbandonError struct{ Reason string }

func (e *AbandonError) Error() string { return e.Reason }

// AbandonResult is what Abandon did to one shard.
type AbandonResult struct {
	// Next is in.Current with the shard's assignment replaced and the
	// generation counter moved on.
	Next State
	// Decision is the Abandoned decision.
	Decision Decision
	// Before and After are the shard's assignment before and after.
	Before, After Assignment
	// Lost lists the brokers of the old replica set (the owner
	// included) whose copies were given up: anything only they held is
	// gone.
	Lost []string
	// Kept lists the live brokers whose copies the new set keeps, the
	// new owner first. The new owner takes the furthest of their copies
	// before it serves (the broker's takeover), so nothing any of them
	// holds is lost.
	Kept []string
}

// Abandon places the durable shard ref, which waits because its owner is
// down or lost its storage, on live brokers that keep a copy, and drops
// the rest of its replica set. Which brokers: keep when the operator
// names them (a follower that came back under a new storage identity
// after a crash has left the set, but its disk may still hold most of
// the log, and only the operator knows), else the live members of the
// set: the owner when it is live under new storage, and every live
// follower, whatever storage identity it has now. The furthest of their
// copies wins at the takeover, under their storage identities now. The
// new owner is the first of them whose storage identity is the one its
// copy was placed on, else the first. Placement tops the set up to its
// factor afterwards as usual.
//
// Abandon refuses (*AbandonError) a shard that is served, an in-memory
// one (placement moves those by itself), one that was never placed, a
// named broker that is not live, and a shard no live broker is left to
// take. It is a pure function of in, like Compute.
func Abandon(in Input, ref ShardRef, keep ...string) (AbandonResult, error) {
	if err := validate(&in); err != nil {
		return AbandonResult{}, err
	}
	var r *Resource
	for i := range in.Resources {
		if in.Resources[i].Key == ref.Resource {
			r = &in.Resources[i]
		}
	}
	if r == nil {
		return AbandonResult{}, &AbandonError{fmt.Sprintf("%s: no such resource", ref.Resource)}
	}
	if ref.Shard >= r.shardCount() {
		return AbandonResult{}, &AbandonError{fmt.Sprintf("%s has %d shards; there is no shard %d", ref.Resource, r.shardCount(), ref.Shard)}
	}
	if !r.Durable {
		return AbandonResult{}, &AbandonError{fmt.Sprintf("%s is not durable: its shards are placed on a live broker by themselves when their owner is down", ref.Resource)}
	}
	idx := slices.IndexFunc(in.Current.Assignments, func(a Assignment) bool {
		return a.Shard == ref && a.Incarnation == r.Incarnation
	})
	if idx < 0 || in.Current.Assignments[idx].Owner == "" {
		return AbandonResult{}, &AbandonError{fmt.Sprintf("shard %d of %s has not been placed: there is nothing to abandon", ref.Shard, ref.Resource)}
	}
	before := in.Current.Assignments[idx]
	brokers := make(map[string]*Broker, len(in.Brokers))
	for i := range in.Brokers {
		brokers[in.Brokers[i].NodeID] = &in.Brokers[i]
	}
	if b := brokers[before.Owner]; b != nil && b.State.serving() && b.StorageID == before.StorageID {
		return AbandonResult{}, &AbandonError{fmt.Sprintf("shard %d of %s is served by %s at generation %d: abandon is for a shard that waits for its owner", ref.Shard, ref.Resource, before.Owner, before.Generation)}
	}

	set := append([]Replica{{NodeID: before.Owner, StorageID: before.StorageID}}, before.Replicas...)
	var kept []Replica // the brokers that keep their copies, under their storage identity now
	var lost []string
	owner := -1
	if len(keep) > 0 {
		for _, id := range keep {
			b := brokers[id]
			if b == nil || !b.State.serving() {
				return AbandonResult{}, &AbandonError{fmt.Sprintf("broker %q is not live: only a live broker can keep its copy", id)}
			}
			if slices.ContainsFunc(kept, func(r Replica) bool { return r.NodeID == id }) {
				continue
			}
			i := slices.IndexFunc(set, func(m Replica) bool { return m.NodeID == id })
			if owner < 0 && i >= 0 && set[i].StorageID == b.StorageID {
				owner = len(kept)
			}
			kept = append(kept, Replica{NodeID: id, StorageID: b.StorageID})
		}
		for _, m := range set {
			if !slices.Contains(keep, m.NodeID) {
				lost = append(lost, m.NodeID)
			}
		}
	} else {
		for _, m := range set {
			b := brokers[m.NodeID]
			if b == nil || !b.State.serving() {
				lost = append(lost, m.NodeID)
				continue
			}
			if owner < 0 && b.StorageID == m.StorageID {
				owner = len(kept)
			}
			kept = append(kept, Replica{NodeID: m.NodeID, StorageID: b.StorageID})
		}
	}
	if max(r.ReplicationFactor, 1) < uint32(len(kept)) {
		return AbandonResult{}, &AbandonError{fmt.Sprintf("%d brokers named; %s has a replication factor of %d", len(kept), ref.Resource, max(r.ReplicationFactor, 1))}
	}
	if len(kept) == 0 {
		return AbandonResult{}, &AbandonError{fmt.Sprintf("no live broker of its replica set is left to take shard %d of %s (%s down): bring one back, name the live brokers whose copies to keep, or delete and re-create %s",
			ref.Shard, ref.Resource, strings.Join(lost, ", "), ref.Resource)}
	}
	owner = max(owner, 0)
	lead := kept[owner]
	followers := slices.Delete(slices.Clone(kept), owner, owner+1)
	next := in.Current
	next.Assignments = slices.Clone(in.Current.Assignments)
	next.LastGeneration++
	after := Assignment{Shard: ref, Incarnation: before.Incarnation, Owner: lead.NodeID, StorageID: lead.StorageID,
		Generation: next.LastGeneration, Consistency: before.Consistency, Replicas: followers}
	if len(after.Replicas) == 0 {
		after.Replicas = nil
	}
	next.Assignments[idx] = after
	names := make([]string, 0, len(kept))
	names = append(names, lead.NodeID)
	for _, f := range followers {
		names = append(names, f.NodeID)
	}
	return AbandonResult{
		Next: next,
		Decision: Decision{Kind: Abandoned, Shard: ref, Incarnation: before.Incarnation, From: before.Owner, To: lead.NodeID,
			Generation: after.Generation, Reason: "gave up the copies on " + strings.Join(lost, ", ")},
		Before: before, After: after, Lost: lost, Kept: names,
	}, nil
}
