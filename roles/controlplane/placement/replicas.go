package placement

import "sort"

// Why a follower was dropped, in Decision.Reason of a ReplicaDropped.
const (
	// ReplicaGone: the follower's broker is no longer registered.
	ReplicaGone = "deregistered"
	// ReplicaStorageLost: the follower's broker is registered with another
	// storage identity than the copy was placed on: its copy is gone.
	ReplicaStorageLost = "storage_lost"
	// ReplicaNotWanted: the shard takes no followers (in memory, a
	// replication factor of 1, or no owner), or has more than its factor
	// asks for; the follower named twice or as the owner is dropped with
	// it too.
	ReplicaNotWanted = "not_wanted"
	// ReplicaRestore: the follower's broker has been down for
	// Input.RestoreAfterMs and a live broker takes its place in the same
	// pass (replication-factor restore).
	ReplicaRestore = "restore"
)

// replicate brings every shard's followers up to date, after every owner
// is chosen: first it drops the followers a shard cannot keep and those
// it replaces (restoreReplicas), then it counts the copies every broker
// holds, then it tops up, in shard order, every served durable shard with
// fewer followers than its factor asks for (see replicaChooser).
func (p *planner) replicate() {
	for _, rp := range p.plans {
		for i := range rp.shards {
			p.pruneReplicas(rp.r, &rp.shards[i])
			p.restoreReplicas(rp.r, &rp.shards[i])
		}
	}
	rc := newReplicaChooser(p)
	for _, rp := range p.plans {
		if !wantsReplicas(rp.r) {
			continue
		}
		for i := range rp.shards {
			p.topUp(rc, rp.r, &rp.shards[i])
		}
	}
}

// wantsReplicas reports whether r's shards have followers: durable
// resources with a replication factor above 1.
func wantsReplicas(r *Resource) bool { return r.Durable && r.ReplicationFactor > 1 }

// followersWanted is how many followers a shard of r has when it can.
func followersWanted(r *Resource) int {
	if !wantsReplicas(r) {
		return 0
	}
	return int(r.ReplicationFactor) - 1
}

// pruneReplicas drops the followers of a that it cannot keep, in list
// order, with a decision each: those of a shard that takes none, the
// owner and repeats, those whose broker is gone or has new storage, and
// those beyond the factor. A follower whose broker is down or draining
// stays (restoreReplicas may replace a down one).
func (p *planner) pruneReplicas(r *Resource, a *Assignment) {
	if len(a.Replicas) == 0 {
		return
	}
	want := followersWanted(r)
	if a.Owner == "" {
		want = 0
	}
	kept := a.Replicas[:0:0]
	seen := make(map[string]bool, len(a.Replicas))
	for _, rep := range a.Replicas {
		reason := ""
		b := p.brokers[rep.NodeID]
		switch {
		case len(kept) >= want || rep.NodeID == a.Owner || seen[rep.NodeID]:
			reason = ReplicaNotWanted
		case b == nil:
			reason = ReplicaGone
		case b.StorageID != rep.StorageID:
			reason = ReplicaStorageLost
		}
		seen[rep.NodeID] = true
		if reason == "" {
			kept = append(kept, rep)
			continue
		}
		p.decide(Decision{Kind: ReplicaDropped, Shard: a.Shard, Incarnation: a.Incarnation, From: a.Owner,
			To: a.Owner, Replica: rep.NodeID, Generation: a.Generation, Reason: reason})
	}
	if len(kept) == 0 {
		kept = nil
	}
	a.Replicas = kept
}

// topUp adds followers to a until it has as many as r asks for or no
// broker is eligible. Only a shard whose owner serves it is topped up: a
// shard waiting for its owner keeps the followers it has and gets new
// ones once it serves again.
func (p *planner) topUp(rc *replicaChooser, r *Resource, a *Assignment) {
	want := followersWanted(r)
	if a.Owner == "" || a.Unavailable != "" || len(a.Replicas) >= want {
		return
	}
	rc.startShard(a)
	for len(a.Replicas) < want {
		b, ok := rc.choose()
		if !ok {
			return
		}
		a.Replicas = append(a.Replicas, Replica{NodeID: b.NodeID, StorageID: b.StorageID})
		p.decide(Decision{Kind: ReplicaAdded, Shard: a.Shard, Incarnation: a.Incarnation, From: a.Owner,
			To: a.Owner, Replica: b.NodeID, Generation: a.Generation})
	}
}

// replicaChooser picks the followers a shard is topped up with. Among the
// live brokers (draining and down ones take nothing new) that hold no
// copy of the shard (neither its owner nor one of its followers) it takes
// the one with, in this order:
//
//  1. a zone where the shard has no copy yet (the owner's and every
//     follower's zone count, whatever their state; a broker without a
//     zone is alone in its own);
//  2. the fewest copies in the whole cluster: shards owned plus
//     followers, counting every choice made so far in this Compute call;
//  3. the lowest node id.
type replicaChooser struct {
	// live are the live brokers, sorted by node id.
	live []*replicaCandidate
	// zoneOf is the zone key of every registered broker (zoneKey).
	zoneOf map[string]string
	// copies counts each live broker's copies (owned and followed).
	copies map[string]*replicaCandidate
	// holds and zones are the current shard's brokers and zones.
	holds map[string]bool
	zones map[string]bool
}

// replicaCandidate is one live broker with its copy count.
type replicaCandidate struct {
	b      *Broker
	zone   string
	copies int
}

// newReplicaChooser counts every owner and every follower p holds now.
func newReplicaChooser(p *planner) *replicaChooser {
	rc := &replicaChooser{zoneOf: make(map[string]string, len(p.brokers)),
		copies: make(map[string]*replicaCandidate), holds: map[string]bool{}, zones: map[string]bool{}}
	for id, b := range p.brokers {
		rc.zoneOf[id] = zoneKey(b)
		if b.State == Live {
			c := &replicaCandidate{b: b, zone: zoneKey(b)}
			rc.live = append(rc.live, c)
			rc.copies[id] = c
		}
	}
	sort.Slice(rc.live, func(i, j int) bool { return rc.live[i].b.NodeID < rc.live[j].b.NodeID })
	for _, rp := range p.plans {
		for i := range rp.shards {
			a := &rp.shards[i]
			rc.count(a.Owner)
			for _, rep := range a.Replicas {
				rc.count(rep.NodeID)
			}
		}
	}
	return rc
}

// count adds one copy to node's count if it is live.
func (rc *replicaChooser) count(node string) {
	if c := rc.copies[node]; c != nil {
		c.copies++
	}
}

// startShard records which brokers and zones hold a copy of a.
func (rc *replicaChooser) startShard(a *Assignment) {
	clear(rc.holds)
	clear(rc.zones)
	rc.hold(a.Owner)
	for _, rep := range a.Replicas {
		rc.hold(rep.NodeID)
	}
}

// hold marks node, and its zone when it is registered, as holding a copy.
func (rc *replicaChooser) hold(node string) {
	rc.holds[node] = true
	if z, ok := rc.zoneOf[node]; ok {
		rc.zones[z] = true
	}
}

// choose returns the next follower of the current shard and counts it,
// or false when no live broker is eligible.
func (rc *replicaChooser) choose() (*Broker, bool) {
	var best *replicaCandidate
	for _, c := range rc.live {
		if rc.holds[c.b.NodeID] {
			continue
		}
		if best == nil || rc.better(c, best) {
			best = c
		}
	}
	if best == nil {
		return nil, false
	}
	best.copies++
	rc.hold(best.b.NodeID)
	return best.b, true
}

// better reports whether c ranks before best (the rules on
// replicaChooser). live is sorted by node id, so a tie keeps best.
func (rc *replicaChooser) better(c, best *replicaCandidate) bool {
	if nc, nb := !rc.zones[c.zone], !rc.zones[best.zone]; nc != nb {
		return nc
	}
	return c.copies < best.copies
}
