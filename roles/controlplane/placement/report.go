package placement

import "sort"

// Copy states, in CopyStatus.State: the state of the broker holding a
// copy, or CopyGone when the copy is not there any more.
const (
	CopyLive     = "live"
	CopyDraining = "draining"
	CopyDown     = "down"
	// CopyGone: the broker is no longer registered, or is registered with
	// another storage identity than the copy was placed on.
	CopyGone = "gone"
)

// CopyStatus is one copy of a shard (its leader's or a follower's) as the
// registry sees it now.
type CopyStatus struct {
	NodeID    string
	StorageID string
	// State is CopyLive, CopyDraining, CopyDown or CopyGone.
	State string
}

// counts reports whether the copy counts towards the shard's live copies:
// its broker serves (live or draining) under the copy's storage identity.
func (c CopyStatus) counts() bool { return c.State == CopyLive || c.State == CopyDraining }

// ShardReplication is how many copies of one durable shard are live
// against how many its resource wants.
type ShardReplication struct {
	Shard       ShardRef
	Incarnation string
	Generation  uint64
	// Leader is the owner's copy (NodeID empty while the shard has none).
	Leader CopyStatus
	// Replicas are the followers', in the assignment's order.
	Replicas []CopyStatus
	// Desired is the resource's replication factor (at least 1).
	Desired int
	// Current counts the copies, leader included, whose broker is live or
	// draining with the storage identity the copy was placed on.
	Current int
}

// UnderReplicated reports whether fewer copies are live than wanted.
func (s *ShardReplication) UnderReplicated() bool { return s.Current < s.Desired }

// Replication reports the copies of every durable shard of in.Current
// whose resource in in.Resources has a replication factor above 1 or that
// is under-replicated, in shard order. Assignments of unknown resources or
// of another incarnation are left out; in-memory shards too (they have
// one copy and are re-placed, not restored). It reads in.Brokers for the
// states and does not validate in.
func Replication(in Input) []ShardReplication {
	brokers := make(map[string]*Broker, len(in.Brokers))
	for i := range in.Brokers {
		brokers[in.Brokers[i].NodeID] = &in.Brokers[i]
	}
	res := make(map[ResourceKey]*Resource, len(in.Resources))
	for i := range in.Resources {
		res[in.Resources[i].Key] = &in.Resources[i]
	}
	var out []ShardReplication
	for i := range in.Current.Assignments {
		a := &in.Current.Assignments[i]
		r := res[a.Shard.Resource]
		if r == nil || !r.Durable || r.Incarnation != a.Incarnation {
			continue
		}
		s := ShardReplication{Shard: a.Shard, Incarnation: a.Incarnation, Generation: a.Generation,
			Desired: int(max(r.ReplicationFactor, 1))}
		if a.Owner != "" {
			s.Leader = copyStatus(brokers, a.Owner, a.StorageID)
		}
		for _, rep := range a.Replicas {
			s.Replicas = append(s.Replicas, copyStatus(brokers, rep.NodeID, rep.StorageID))
		}
		for _, c := range append([]CopyStatus{s.Leader}, s.Replicas...) {
			if c.counts() {
				s.Current++
			}
		}
		if s.Desired > 1 || s.UnderReplicated() {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Shard.less(out[j].Shard) })
	return out
}

// UnderReplicated counts the durable shards of in.Current with fewer live
// copies than their resource's replication factor.
func UnderReplicated(in Input) int {
	n := 0
	for _, s := range Replication(in) {
		if s.UnderReplicated() {
			n++
		}
	}
	return n
}

// copyStatus is the state of the copy of node under storage.
func copyStatus(brokers map[string]*Broker, node, storage string) CopyStatus {
	c := CopyStatus{NodeID: node, StorageID: storage, State: CopyGone}
	if b := brokers[node]; b != nil && b.StorageID == storage {
		c.State = string(b.State)
	}
	return c
}
