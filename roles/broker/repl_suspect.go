package broker

import (
	"time"

	"github.com/felixmq/felix/wire"
)

// The Quorum fast path, the follower's half. A leader sends each of its
// followers something at least every second (shipIdle). A follower that
// hears nothing from the leader of a Quorum shard it follows for
// NodeConfig.LeaderSuspectAfter reports it silent in a heartbeat, sent at
// once; once a majority of the shard's replica set reports its leader
// silent the control plane promotes a follower without waiting for the
// leader to be marked down (placement's suspected). The report is
// repeated in every heartbeat while the silence lasts, and dropped once
// the leader (or a new one) is heard.

// heard is what a follower knows of a followed shard's leader.
type heard struct {
	leader     string
	generation uint64
	at         time.Time
	// reported: this silence is counted in suspectsReported already (by
	// the first of a heartbeat's suspects and watchSilence to see it).
	reported bool
}

// noteHeard records that leader, at generation, was heard from now.
func (r *replication) noteHeard(ref shardRef, leader string, generation uint64) {
	r.mu.Lock()
	if h, ok := r.heard[ref]; ok && h.leader == leader && h.generation == generation {
		h.at, h.reported = time.Now(), false
		r.heard[ref] = h
	}
	r.mu.Unlock()
}

// trackHeard keeps one entry per Quorum shard the view v makes this
// broker a follower of; a shard newly followed (or with a new leader)
// counts as heard now. r.mu is held.
func (r *replication) trackHeardLocked(v *routeView, self string) {
	now := time.Now()
	seen := make(map[shardRef]bool, len(r.heard))
	for ref, a := range v.assignments {
		if ref.kind != wire.ShardKindStream || a.Consistency != "quorum" || a.Unavailable != "" || !replicaOf(a, self) {
			continue
		}
		seen[ref] = true
		if h, ok := r.heard[ref]; !ok || h.leader != a.NodeID || h.generation != a.Generation {
			r.heard[ref] = heard{leader: a.NodeID, generation: a.Generation, at: now}
		}
	}
	for ref := range r.heard {
		if !seen[ref] {
			delete(r.heard, ref)
		}
	}
}

// suspects lists the leaders silent for longer than suspectAfter, at most
// wire.MaxSuspects of them.
func (r *replication) suspects() []wire.ShardSuspect {
	now := time.Now()
	var out []wire.ShardSuspect
	fresh := 0
	r.mu.Lock()
	for ref, h := range r.heard {
		if now.Sub(h.at) < r.suspectAfter {
			continue
		}
		if r.markReportedLocked(ref, h) {
			fresh++
		}
		out = append(out, wire.ShardSuspect{Kind: string(ref.kind), TenantID: ref.tenant, Namespace: ref.ns, Name: ref.name,
			Shard: ref.shard, Generation: h.generation, Leader: h.leader})
		if len(out) == wire.MaxSuspects {
			break
		}
	}
	r.mu.Unlock()
	r.suspectsReported.Add(fresh)
	return out
}

// markReportedLocked marks the silence of ref's leader (h, silent)
// counted, and reports whether it was not yet: a heartbeat's suspects
// may carry it before watchSilence sees it, and a promotion that follows
// at once resets the entry, so whichever sees it first counts it. r.mu
// is held.
func (r *replication) markReportedLocked(ref shardRef, h heard) bool {
	if h.reported {
		return false
	}
	h.reported = true
	r.heard[ref] = h
	return true
}

// silenceCheck is how often a follower looks for silent leaders: a
// suspicion reaches the control plane at most this late.
const silenceCheck = 100 * time.Millisecond

// watchSilence asks for a heartbeat as soon as a leader becomes suspect,
// and, while any is, for the cluster view every check (a promotion of
// this broker is then seen at once rather than at the next poll), until
// the broker stops.
func (r *replication) watchSilence(stop <-chan struct{}) {
	t := time.NewTicker(silenceCheck)
	defer t.Stop()
	reported := map[shardRef]uint64{}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := time.Now()
		fresh, silent := false, false
		counted := 0
		r.mu.Lock()
		for ref, h := range r.heard {
			if now.Sub(h.at) < r.suspectAfter {
				delete(reported, ref)
				continue
			}
			silent = true
			if r.markReportedLocked(ref, h) {
				counted++
			}
			if reported[ref] != h.generation {
				reported[ref] = h.generation
				fresh = true
			}
		}
		for ref := range reported {
			if _, ok := r.heard[ref]; !ok {
				delete(reported, ref)
			}
		}
		r.mu.Unlock()
		r.suspectsReported.Add(counted)
		if fresh {
			select {
			case r.soonC <- struct{}{}:
			default:
			}
		}
		if silent {
			r.s.viewSoon()
		}
	}
}
