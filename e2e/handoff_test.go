// The planned handoff (#18): a broker stopped with SIGTERM first hands
// each durable shard it leads to a caught-up follower, which a
// ClusterClient publishing with acknowledgements follows without an
// error, and nothing acknowledged is lost.
package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// handoffWait bounds how long after SIGTERM the shard may take to be led
// by a former follower: the handoff itself takes well under a second on
// loopback; a few seconds leave room for a loaded machine.
const handoffWait = 10 * time.Second

func TestHandoffOnSIGTERMMovesTheLeaderWithoutAPublishError(t *testing.T) {
	for _, consistency := range []string{"quorum", "leader"} {
		t.Run(consistency, func(t *testing.T) { testHandoffOnSIGTERM(t, consistency) })
	}
}

// testHandoffOnSIGTERM: SIGTERM the leader of an RF3 stream under a
// ClusterClient publishing acknowledged records: the publisher meets no
// error, a former follower leads the shard at a higher generation within
// a few seconds, and every acknowledged record is read back once, at its
// acknowledged offset, from the new leader.
func testHandoffOnSIGTERM(t *testing.T, consistency string) {
	d := startDev(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream := "handoff-" + consistency
	ns := d.client.Namespace
	before := d.createReplicatedStream(ctx, stream, consistency)
	oldName := nodeNameOf(before.NodeID)
	t.Logf("leader %s at generation %d, followers %+v", before.NodeID, before.Generation, before.Replicas)
	token := d.adminToken()
	cc := d.connectCluster(ctx, token)

	p := startFailoverPublisher(ctx, cc, ns, stream)
	defer p.halt()
	waitAcked(t, p, 100, expiryWait)
	n := d.node(oldName)
	d.signal(oldName, syscall.SIGTERM)
	termAt := time.Now()
	after := d.newLeaderOf(ctx, stream, before.NodeID, before.Generation)
	moved := time.Since(termAt)
	if moved > handoffWait {
		t.Errorf("the shard was led by %s %v after SIGTERM; want a planned handoff within %v", after.NodeID, moved, handoffWait)
	}
	if !replicaOfAssignment(before, after.NodeID) {
		t.Errorf("the new leader %s was not a follower of the shard (%+v)", after.NodeID, before.Replicas)
	}
	t.Logf("new leader %s at generation %d, %v after SIGTERM", after.NodeID, after.Generation, moved)
	eventually(t, 30*time.Second, oldName+" to exit", func() bool { return !processAlive(n.PID) })
	first := waitAckedAfter(t, p, time.Now(), expiryWait)
	t.Logf("publishing goes on (offset %d)", first.offset)
	waitAcked(t, p, p.ackedCount()+50, expiryWait)
	p.halt()
	acked, failures, unexpected := p.results()
	t.Logf("%d publishes acknowledged, %d failed", len(acked), failures)
	if failures != 0 || len(unexpected) != 0 {
		t.Errorf("the publisher met %d errors across the handoff (unexpected: %v; first: %v); want none", failures, unexpected, p.firstErrs)
	}

	leader := d.connect(ctx, nodeNameOf(after.NodeID), token)
	recs := readShard(ctx, t, leader, ns, stream)
	if len(recs) == 0 {
		t.Fatalf("the new leader %s serves no record of %s", after.NodeID, stream)
	}
	checkAckedPresent(t, recs, acked, 1) // at most the new leader's generation start
}

// replicaOfAssignment reports whether node is a follower in a.
func replicaOfAssignment(a wire.ShardAssignment, node string) bool {
	for _, r := range a.Replicas {
		if r.NodeID == node {
			return true
		}
	}
	return false
}
