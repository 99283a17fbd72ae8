package placement

// restoreReplicas drops, with ReplicaDropped and reason ReplicaRestore,
// the followers of a whose broker has been down for restoreAfterMs
// (overdue), as many as the top-up that follows can replace: a shard keeps
// a down follower rather than have fewer followers than before. It acts
// only on a shard whose owner serves it (topUp adds nothing to any
// other), and drops overdue followers in list order.
//
// Replacements are counted, not chosen, here: every live broker that
// holds no copy of a can take one (replicaChooser has no capacity limit),
// so with free such brokers and short followers missing already, free -
// short overdue followers can go, and topUp fills every slot they leave.
// A dropped follower's broker is down, so it is never its own
// replacement.
func (p *planner) restoreReplicas(r *Resource, a *Assignment) {
	if a.Owner == "" || a.Unavailable != "" || !p.anyOverdue(a) {
		return
	}
	spare := p.freeBrokers(a) - (followersWanted(r) - len(a.Replicas))
	if spare <= 0 {
		return
	}
	kept := a.Replicas[:0:0]
	for _, rep := range a.Replicas {
		if spare == 0 || !p.overdue(p.brokers[rep.NodeID]) {
			kept = append(kept, rep)
			continue
		}
		spare--
		p.decide(Decision{Kind: ReplicaDropped, Shard: a.Shard, Incarnation: a.Incarnation, From: a.Owner,
			To: a.Owner, Replica: rep.NodeID, Generation: a.Generation, Reason: ReplicaRestore})
	}
	if len(kept) == 0 {
		kept = nil
	}
	a.Replicas = kept
}

// overdue reports whether b is down and has been for restoreAfterMs: its
// followers are due for replacement. A broker down since an unknown time
// (DownSinceMs 0) never is, nor any while restoreAfterMs is 0.
func (p *planner) overdue(b *Broker) bool {
	return b != nil && b.State == Down && p.restoreAfterMs > 0 && b.DownSinceMs > 0 &&
		p.nowMs-b.DownSinceMs >= p.restoreAfterMs
}

// anyOverdue reports whether one of a's followers is overdue.
func (p *planner) anyOverdue(a *Assignment) bool {
	for _, rep := range a.Replicas {
		if p.overdue(p.brokers[rep.NodeID]) {
			return true
		}
	}
	return false
}

// freeBrokers counts the live brokers holding no copy of a: neither its
// owner nor one of its followers. These are the brokers replicaChooser
// may give a a follower from.
func (p *planner) freeBrokers(a *Assignment) int {
	n := 0
	for id, b := range p.brokers {
		if b.State == Live && id != a.Owner && !hasReplica(a, id) {
			n++
		}
	}
	return n
}

// hasReplica reports whether node is one of a's followers.
func hasReplica(a *Assignment, node string) bool {
	for _, rep := range a.Replicas {
		if rep.NodeID == node {
			return true
		}
	}
	return false
}
