package placement

import (
	"fmt"
	"slices"
)

// HandedOff: a durable shard's leader (From), stopping, gave the shard to
// one of its followers (To) that held everything it had, at a new
// generation; From stays in the replica set as a follower.
const HandedOff DecisionKind = "handed_off"

// HandoffRequest asks to hand shard Shard, led by From at Generation, to
// its follower To.
type HandoffRequest struct {
	Shard      ShardRef
	Generation uint64
	From, To   string
}

// HandoffRefused is Handoff's refusal: the request does not match the
// placement (the caller answers it 409). Reason is one of the Handoff*
// reasons below.
type HandoffRefused struct {
	Reason string
	Detail string
}

func (e *HandoffRefused) Error() string { return "handoff refused (" + e.Reason + "): " + e.Detail }

// Why a handoff is refused, in HandoffRefused.Reason.
const (
	HandoffNoShard       = "no_such_shard"
	HandoffNotOwner      = "not_owner"
	HandoffStale         = "stale_generation"
	HandoffNotReplica    = "not_a_replica"
	HandoffTargetNotLive = "target_not_live"
	HandoffStorage       = "storage_mismatch"
	HandoffUnavailable   = "shard_unavailable"
)

// Handoff returns the placement after the planned handoff req, and its
// decision. It applies only if the shard is a served durable shard whose
// owner is From at Generation, and To is in its replica set and live
// under the storage identity its replica entry names; otherwise it
// refuses with a *HandoffRefused. Then To owns the shard under that
// storage identity at the next generation, and From takes To's place in
// the replica set (under the storage identity the shard was placed on),
// so the set is the same brokers and the next Compute keeps it as it is.
// Like Compute it is a pure function; in.Current is not changed.
func Handoff(in Input, req HandoffRequest) (Output, error) {
	i := slices.IndexFunc(in.Current.Assignments, func(a Assignment) bool { return a.Shard == req.Shard })
	if i < 0 {
		return Output{}, &HandoffRefused{HandoffNoShard, fmt.Sprintf("shard %d of %s is not placed", req.Shard.Shard, req.Shard.Resource)}
	}
	cur := in.Current.Assignments[i]
	j, err := checkHandoff(in, &cur, req)
	if err != nil {
		return Output{}, err
	}
	next := State{Assignments: make([]Assignment, len(in.Current.Assignments)), LastGeneration: in.Current.LastGeneration + 1}
	for k := range in.Current.Assignments {
		next.Assignments[k] = cloneAssignment(&in.Current.Assignments[k])
	}
	a := &next.Assignments[i]
	to := a.Replicas[j]
	a.Replicas[j] = Replica{NodeID: a.Owner, StorageID: a.StorageID}
	a.Owner, a.StorageID, a.Generation = to.NodeID, to.StorageID, next.LastGeneration
	d := Decision{Kind: HandedOff, Shard: a.Shard, Incarnation: a.Incarnation, From: req.From, To: req.To, Generation: a.Generation}
	return Output{Next: next, Decisions: []Decision{d}}, nil
}

// checkHandoff checks req against the shard's assignment a and returns
// the index of the target in a.Replicas.
func checkHandoff(in Input, a *Assignment, req HandoffRequest) (int, error) {
	switch {
	case a.Owner != req.From:
		return 0, &HandoffRefused{HandoffNotOwner, fmt.Sprintf("the owner is %q, not %q", a.Owner, req.From)}
	case a.Generation != req.Generation:
		return 0, &HandoffRefused{HandoffStale, fmt.Sprintf("the shard is at generation %d, not %d", a.Generation, req.Generation)}
	case a.Unavailable != "":
		return 0, &HandoffRefused{HandoffUnavailable, "the shard is not served: " + a.Unavailable}
	}
	j := slices.IndexFunc(a.Replicas, func(r Replica) bool { return r.NodeID == req.To })
	if j < 0 || a.StorageID == "" {
		return 0, &HandoffRefused{HandoffNotReplica, fmt.Sprintf("%q is not a follower of the shard", req.To)}
	}
	bi := slices.IndexFunc(in.Brokers, func(b Broker) bool { return b.NodeID == req.To })
	switch {
	case bi < 0 || in.Brokers[bi].State != Live:
		return 0, &HandoffRefused{HandoffTargetNotLive, fmt.Sprintf("%q is not live", req.To)}
	case in.Brokers[bi].StorageID != a.Replicas[j].StorageID:
		return 0, &HandoffRefused{HandoffStorage, fmt.Sprintf("%q is registered with storage %q; its copy is on %q",
			req.To, in.Brokers[bi].StorageID, a.Replicas[j].StorageID)}
	}
	return j, nil
}
