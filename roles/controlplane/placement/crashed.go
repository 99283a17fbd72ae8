package placement

import (
	"fmt"
	"strings"
)

// A broker whose machine crashed while it ran under an fsync policy that
// may lose unsynced tails comes back under a new storage identity and
// names the one it replaced (Broker.CrashedStorageID). Its copies under
// that identity are on its disk still, perhaps short of their last
// records, so a durable shard it led is neither served from them at the
// old generation nor given up for lost:
//
//  1. A follower holding the log is promoted, as for any owner that lost
//     its storage (promote), without waiting for the owner's lease: the
//     owner is live under another identity, so the shard is storage_lost
//     at once.
//  2. Otherwise, when no follower holds a copy any more (replication
//     factor 1, or every follower gone or back under a new identity),
//     the shard is reopened on its owner under the new identity, at a
//     new generation: the owner opens what it has, which is all anyone
//     has. A single-node `felix serve` stays usable after a power cut.
//  3. Otherwise the shard waits until every follower that holds a copy is
//     live and has reported since the owner registered after its crash
//     (and none was promoted: none holds as much as the owner last
//     reported, or the owner never reported); then it is reopened on its
//     owner as in 2, whose takeover fences every follower and takes the
//     furthest copy, so nothing a follower holds is lost.
//
// A shard whose owner came back under a new identity for another reason
// (a new, wiped directory: no CrashedStorageID naming the shard's
// identity) stays storage_lost.

// crashedOwner reports whether durable shard a's owner b came back after
// a machine crash from the storage identity a was placed on.
func crashedOwner(r *Resource, a *Assignment, b *Broker) bool {
	return r.Durable && b != nil && b.CrashedStorageID != "" && b.CrashedStorageID == a.StorageID &&
		b.StorageID != a.StorageID
}

// reopenCrashed names a's crashed owner b again under its new identity at
// a new generation when the rules above allow it, and reports whether it
// did; if not, it says why, after notPromoted (why no follower was).
func (p *planner) reopenCrashed(a *Assignment, b *Broker, notPromoted string) (bool, string) {
	if !b.State.serving() {
		return false, joinWhy(notPromoted, fmt.Sprintf("%s, back after a crash, is %s", b.NodeID, b.State))
	}
	var waits []string
	for _, rep := range a.Replicas {
		f := p.brokers[rep.NodeID]
		switch {
		case f == nil || f.StorageID != rep.StorageID:
			// Its copy is gone: nothing to wait for.
		case f.State != Live:
			waits = append(waits, rep.NodeID+" holds a copy and is not live")
		case !p.reportedSince(rep, b.RegisteredAtMs):
			waits = append(waits, rep.NodeID+" has not reported since "+b.NodeID+" came back")
		}
	}
	if len(waits) > 0 {
		return false, joinWhy(notPromoted, "not reopened on "+b.NodeID+" after its crash: "+strings.Join(waits, "; "))
	}
	from := a.StorageID
	p.last++
	a.StorageID, a.Generation, a.Unavailable = b.StorageID, p.last, ""
	p.decide(Decision{Kind: Reopened, Shard: a.Shard, Incarnation: a.Incarnation, From: a.Owner, To: a.Owner,
		Generation: a.Generation, Detail: fmt.Sprintf("storage identity %s replaced by %s after a crash", from, b.StorageID)})
	return true, ""
}

// reportedSince reports whether follower rep reported, under the storage
// identity its copy was placed on, at or after atMs.
func (p *planner) reportedSince(rep Replica, atMs int64) bool {
	r, ok := p.reports[reportKey{rep.NodeID, rep.StorageID}]
	return ok && r.AtMs >= atMs
}

func joinWhy(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
