package e2e

import (
	"context"
	"slices"
	"testing"
	"time"
)

// The Jepsen finding about membership changes, as a scenario: a Quorum
// shard's replica set changes under load, a follower removed (killed and
// replaced after FELIX_SHARD_RESTORE_AFTER_MS) and a new one added that
// copies the log, and then the leader is killed. The new member counts
// in the majority that fails over, and every acknowledged record is
// served once, at its acknowledged offset, by the new leader.
func TestAReplicaReplacedUnderLoadThenALeaderKilledLosesNothing(t *testing.T) {
	d := startDev(t, 5, "FELIX_SHARD_RESTORE_AFTER_MS=1000") // two down leave the control plane its majority
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const stream = "members"
	ns := d.client.Namespace
	before := d.createQuorumStream(ctx, stream)
	leaderName := nodeNameOf(before.NodeID)
	gone := before.Replicas[0].NodeID
	t.Logf("leader %s at generation %d, followers %+v", before.NodeID, before.Generation, before.Replicas)
	token := d.adminToken()
	cc := d.connectCluster(ctx, token)
	p := startFailoverPublisher(ctx, cc, ns, stream)
	defer p.halt()
	waitAcked(t, p, 100, expiryWait)

	// A follower dies; once its broker has been down for the restore
	// delay another broker takes its place in the set.
	d.kill9(nodeNameOf(gone))
	var set []string
	eventually(t, expiryWait, "the dead follower replaced", func() bool {
		a := d.placement(ctx, stream).Shards[0]
		set = set[:0]
		for _, r := range a.Replicas {
			set = append(set, r.NodeID)
		}
		return a.NodeID == before.NodeID && len(set) == 2 && !slices.Contains(set, gone)
	})
	var joined string
	for _, id := range set {
		if id != before.Replicas[1].NodeID {
			joined = id
		}
	}
	if joined == "" {
		t.Fatalf("no new follower in %v", set)
	}
	t.Logf("%s replaced %s; followers now %v", joined, gone, set)

	// The new follower copies the log while publishes go on: wait until
	// it holds everything the leader held when it joined.
	var target uint64
	for _, f := range mustFollowers(t, d, leaderName) {
		if f.Stream == stream {
			target = max(target, f.LeaderNext)
		}
	}
	eventually(t, replWait, joined+" to catch up", func() bool {
		fs, err := d.replicationFollowers(leaderName)
		if err != nil {
			return false
		}
		for _, f := range fs {
			if f.Stream == stream && f.Follower == joined && f.Halted == "" && f.Durable >= target {
				return true
			}
		}
		return false
	})
	waitAcked(t, p, p.ackedCount()+50, expiryWait)

	d.kill9(leaderName)
	killedAt := time.Now()
	first := waitAckedAfter(t, p, killedAt, failoverWait)
	t.Logf("first publish acknowledged %v after the leader's SIGKILL", first.at.Sub(killedAt))
	waitAcked(t, p, p.ackedCount()+50, expiryWait)
	acked := checkPublisher(t, p)

	after := d.newLeaderOf(ctx, stream, before.NodeID, before.Generation)
	if after.NodeID == gone {
		t.Fatalf("the removed follower %s leads", gone)
	}
	recs := readShard(ctx, t, d.connect(ctx, nodeNameOf(after.NodeID), token), ns, stream)
	if gaps := checkAckedPresent(t, recs, acked, 1); len(gaps) != 1 {
		t.Errorf("gaps at %v, want one (the generation start)", gaps)
	}
	if a := d.placement(ctx, stream).Shards[0]; a.Unavailable != "" || a.Generation <= before.Generation {
		t.Errorf("after the failover: %+v", a)
	}
}

// mustFollowers is replicationFollowers, failing the test on an error.
func mustFollowers(t *testing.T, d *devCluster, nodeName string) []replFollower {
	t.Helper()
	fs, err := d.replicationFollowers(nodeName)
	if err != nil {
		t.Fatalf("GET /replication on %s: %v", nodeName, err)
	}
	return fs
}
