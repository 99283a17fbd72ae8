package placement

import (
	"fmt"
	"strings"
)

// Position is how far one broker held one shard's log when it last
// reported.
type Position struct {
	// Generation is the generation it held the copy at: its own as the
	// leader, that of the leader that last shipped to it as a follower.
	Generation uint64
	// Leader is set on the leader's own position.
	Leader bool
	// Durable is the offset past the last record it held durably.
	Durable uint64
}

// Report is a broker's last report of positions under one storage
// identity: the control plane stamps each report with the identity the
// broker was registered with when it arrived, and keeps the last one
// under the identity it has now and the last one under the identity
// before (a leader that lost its storage keeps its last word).
type Report struct {
	NodeID string
	// StorageID is the identity the broker was registered with when the
	// report arrived.
	StorageID string
	// AtMs is when the report arrived, in Unix milliseconds (compared
	// with Broker.DownSinceMs).
	AtMs      int64
	Positions map[ShardRef]Position
}

// reportKey names one broker's report under one storage identity.
type reportKey struct{ node, storage string }

// position is what node reported for shard under storage identity
// storage, if it did, and when the report arrived.
func (p *planner) position(node, storage string, shard ShardRef) (Position, int64, bool) {
	r, ok := p.reports[reportKey{node, storage}]
	if !ok {
		return Position{}, 0, false
	}
	pos, ok := r.Positions[shard]
	return pos, r.AtMs, ok
}

// furthestReported chooses the follower a durable shard of consistency
// leader is promoted to, its index in a.Replicas, or -1 and why none is
// eligible. Its acknowledged records may be on its leader alone: a
// follower is eligible only if it held the log when it last reported,
// under the storage identity it is registered with now:
//
//   - its broker is live and registered with the storage identity its
//     copy was placed on (Replica.StorageID), and its last report was
//     stamped with that same identity;
//   - that report names the shard at the shard's current generation, as
//     a follower;
//   - its durable position there is at least the durable position the
//     leader last reported for the shard at that generation, under the
//     identity the shard was placed on (Assignment.StorageID). A leader
//     without such a report leaves no follower eligible: the shard waits;
//   - when the leader's broker is down, that report arrived no earlier
//     than the leader was marked down (Broker.DownSinceMs): the follower
//     was alive then. A follower that died with its leader, and is not
//     marked down yet, is not promoted to lead a shard it cannot serve
//     (its promotion would leave the shard waiting for a new leader that
//     never reports).
//
// Of the eligible followers it takes the one with the furthest durable
// position, the first in the set among equals.
func (p *planner) furthestReported(a *Assignment) (int, string) {
	lead, _, ok := p.position(a.Owner, a.StorageID, a.Shard)
	if !ok || !lead.Leader || lead.Generation != a.Generation {
		return -1, fmt.Sprintf("no follower promoted: leader %s never reported the shard at generation %d", a.Owner, a.Generation)
	}
	var downSince int64
	if o := p.brokers[a.Owner]; o != nil && o.State == Down {
		downSince = o.DownSinceMs
	}
	best, bestAt := -1, uint64(0)
	var why []string
	for i, rep := range a.Replicas {
		b := p.brokers[rep.NodeID]
		pos, at, reported := p.position(rep.NodeID, rep.StorageID, a.Shard)
		switch {
		case b == nil || b.State != Live:
			why = append(why, rep.NodeID+" not live")
		case b.StorageID != rep.StorageID:
			why = append(why, rep.NodeID+" lost its copy")
		case !reported || pos.Leader || pos.Generation != a.Generation:
			why = append(why, fmt.Sprintf("%s did not report the shard at generation %d", rep.NodeID, a.Generation))
		case at < downSince:
			why = append(why, fmt.Sprintf("%s has not reported since the leader was marked down", rep.NodeID))
		case pos.Durable < lead.Durable:
			why = append(why, fmt.Sprintf("%s holds %d < the leader's %d", rep.NodeID, pos.Durable, lead.Durable))
		case best < 0 || pos.Durable > bestAt:
			best, bestAt = i, pos.Durable
		}
	}
	if best < 0 {
		return -1, "no follower eligible: " + strings.Join(why, "; ")
	}
	return best, ""
}

// indexReports indexes in.Reports by broker and storage identity.
func indexReports(in *Input) map[reportKey]*Report {
	out := make(map[reportKey]*Report, len(in.Reports))
	for i := range in.Reports {
		r := &in.Reports[i]
		out[reportKey{r.NodeID, r.StorageID}] = r
	}
	return out
}
