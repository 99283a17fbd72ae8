// Failover of a durable shard of consistency leader (#18): its brokers
// report how far they hold each copy on every heartbeat, and once the
// leader is marked down the control plane promotes the follower that
// held the leader's last reported log.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// placementWithReports is `felix admin placement show -o json`: the
// placement view and, per shard with followers, the copies' reported
// positions.
type placementWithReports struct {
	wire.PlacementView
	Replication []wire.ShardReplication `json:"replication"`
}

func (d *devCluster) placementReports(ctx context.Context, stream string) placementWithReports {
	d.t.Helper()
	out := d.mustFelix(ctx, "admin", "placement", "show", stream, "-o", "json")
	var v placementWithReports
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		d.t.Fatalf("placement show %s: %v\n%s", stream, err, out)
	}
	return v
}

// createLeaderStream creates a durable one-shard stream of consistency
// leader with rf copies and returns its assignment once it has a serving
// leader and rf-1 followers.
func (d *devCluster) createLeaderStream(ctx context.Context, name string, rf int) wire.ShardAssignment {
	d.t.Helper()
	d.mustFelix(ctx, "admin", "stream", "create", name, "--durable", "--shards", "1",
		"--replication-factor", fmt.Sprint(rf), "--consistency", "leader")
	var a wire.ShardAssignment
	eventually(d.t, expiryWait, name+" placed with a leader and its followers", func() bool {
		v := d.placement(ctx, name)
		if len(v.Shards) != 1 {
			return false
		}
		a = v.Shards[0]
		return a.Generation != 0 && a.Unavailable == "" && len(a.Replicas) == rf-1 && a.Consistency == "leader"
	})
	return a
}

// waitReportsCover waits until the leader and every follower of stream's
// shard 0 reported, at generation gen, a durable position past offset
// last.
func (d *devCluster) waitReportsCover(ctx context.Context, t *testing.T, stream string, gen, last uint64) {
	t.Helper()
	eventually(t, expiryWait, fmt.Sprintf("every copy of %s to report offset %d durable", stream, last), func() bool {
		v := d.placementReports(ctx, stream)
		if len(v.Replication) != 1 {
			return false
		}
		r := v.Replication[0]
		if lp := r.LeaderPosition; lp == nil || lp.Generation != gen || lp.Durable <= last {
			return false
		}
		for _, c := range r.Replicas {
			if c.Position == nil || c.Position.Generation != gen || c.Position.Durable <= last || c.Lag == nil || *c.Lag != 0 {
				return false
			}
		}
		return len(r.Replicas) > 0
	})
}

// leaderFailover SIGKILLs the leader of a leader-consistency stream of rf
// copies once every copy reported holding every acknowledged record, and
// checks that a follower takes over with all of them, that new publishes
// are acknowledged, and that a subscription open across the kill resumes
// with no gap but the generation start.
func leaderFailover(t *testing.T, stream string, rf int) {
	d := startDev(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := d.client.Namespace
	before := d.createLeaderStream(ctx, stream, rf)
	oldName := nodeNameOf(before.NodeID)
	t.Logf("leader %s at generation %d, followers %+v", before.NodeID, before.Generation, before.Replicas)
	token := d.adminToken()
	cc := d.connectCluster(ctx, token)

	p := startFailoverPublisher(ctx, cc, ns, stream)
	waitAcked(t, p, 200, expiryWait)
	acked := checkPublisher(t, p)
	last := uint64(0)
	for _, a := range acked {
		last = max(last, a.offset)
	}
	sub, err := cc.SubscribeFrom(ctx, ns, stream, felix.SubscribeOptions{Start: felix.Earliest()})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	d.waitReportsCover(ctx, t, stream, before.Generation, last)

	d.kill9(oldName)
	killedAt := time.Now()
	after := d.newLeaderOf(ctx, stream, before.NodeID, before.Generation)
	t.Logf("new leader %s at generation %d, %v after the SIGKILL", after.NodeID, after.Generation, time.Since(killedAt))
	found := false
	for _, r := range after.Replicas {
		found = found || r.NodeID == before.NodeID
	}
	if !found {
		t.Errorf("the old leader left the replica set: %+v", after.Replicas)
	}

	p2 := startFailoverPublisherAs(ctx, cc, ns, stream, stream+"-after")
	defer p2.halt()
	waitAckedAfter(t, p2, killedAt, failoverWait)
	waitAcked(t, p2, 20, expiryWait)
	acked = append(acked, checkPublisher(t, p2)...)

	leader := d.connect(ctx, nodeNameOf(after.NodeID), token)
	recs := readShard(ctx, t, leader, ns, stream)
	gaps := checkAckedPresent(t, recs, acked, 1)
	if len(gaps) != 1 || gaps[0] != last+1 {
		t.Errorf("gaps at %v in what the new leader serves, want one at %d (the generation start)", gaps, last+1)
	}
	// The subscription opened before the kill follows the new leader:
	// every record once, in order, the generation start skipped.
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	next, end := uint64(0), recs[len(recs)-1].Offset
	for next <= end {
		ev, err := sub.Next(sctx)
		if err != nil {
			t.Fatalf("the subscription at offset %d: %v", next, err)
		}
		if ev.Offset-ev.SkippedBefore != next {
			t.Fatalf("event at offset %d skipped %d before it, after offset %d: a gap", ev.Offset, ev.SkippedBefore, int64(next)-1)
		}
		if ev.SkippedBefore != 0 && ev.Offset != last+2 {
			t.Errorf("event at offset %d skipped %d: only the generation start at %d may be", ev.Offset, ev.SkippedBefore, last+1)
		}
		next = ev.Offset + 1
	}
}

// SIGKILL the leader of a leader-consistency stream with three copies.
func TestLeaderFailoverKilledLeaderOfThreeCopies(t *testing.T) { leaderFailover(t, "lkill3", 3) }

// SIGKILL the leader of a leader-consistency stream with two copies: the
// follower takes over alone (a majority of two could never answer).
func TestLeaderFailoverKilledLeaderOfTwoCopies(t *testing.T) { leaderFailover(t, "lkill2", 2) }
