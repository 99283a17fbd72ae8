// The failover tests (#18): a durable Quorum shard with three
// replicas loses its leader, by SIGKILL or by a freeze past its lease,
// while a ClusterClient publishes with acknowledgements; a follower takes
// over and nothing acknowledged is lost, duplicated or moved, and the old
// leader comes back as a follower with the same copy.
package e2e

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// failoverWait bounds how long publishes may go unacknowledged after the
// leader is lost: the broker is marked down within ~1.8 s with
// clusterTimings, then a follower is promoted and takes over.
const failoverWait = 30 * time.Second

// waitAckedAfter waits until the publisher has an acknowledgement after
// t and returns it.
func waitAckedAfter(t *testing.T, p *failoverPublisher, since time.Time, within time.Duration) failoverAck {
	t.Helper()
	var a failoverAck
	eventually(t, within, "a publish acknowledged after the leader was lost", func() bool {
		var ok bool
		a, ok = p.firstAckAfter(since)
		return ok
	})
	return a
}

// waitAcked waits until the publisher has n acknowledgements.
func waitAcked(t *testing.T, p *failoverPublisher, n int, within time.Duration) {
	t.Helper()
	eventually(t, within, "acknowledged publishes", func() bool { return p.ackedCount() >= n })
}

// checkPublisher stops p and checks it met nothing but retryable or
// outcome-unknown failures; it returns the acknowledgements.
func checkPublisher(t *testing.T, p *failoverPublisher) []failoverAck {
	t.Helper()
	p.halt()
	acked, failures, unexpected := p.results()
	t.Logf("%d publishes acknowledged, %d failed", len(acked), failures)
	for _, err := range unexpected {
		t.Errorf("%v: neither retryable nor outcome-unknown", err)
	}
	return acked
}

// SIGKILL the leader of a Quorum shard while a ClusterClient publishes:
// a follower is promoted at a higher generation and acknowledges again;
// the shard read from the new leader holds every acknowledged record
// once, at its acknowledged offset, with one gap, the generation start,
// which a subscription reports as skipped_before. The killed broker
// restarted rejoins as a follower, and all three copies on disk end
// equal.
func TestAQuorumLeaderKilledFailsOverAndLosesNothingAcknowledged(t *testing.T) {
	d := startDev(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const stream = "qkill"
	ns := d.client.Namespace
	before := d.createQuorumStream(ctx, stream)
	oldName := nodeNameOf(before.NodeID)
	t.Logf("leader %s at generation %d, followers %+v", before.NodeID, before.Generation, before.Replicas)
	token := d.adminToken()
	cc := d.connectCluster(ctx, token)

	p := startFailoverPublisher(ctx, cc, ns, stream)
	defer p.halt()
	waitAcked(t, p, 100, expiryWait)
	d.kill9(oldName)
	killedAt := time.Now()
	first := waitAckedAfter(t, p, killedAt, failoverWait)
	t.Logf("first publish acknowledged %v after the leader's SIGKILL (offset %d)", first.at.Sub(killedAt), first.offset)
	waitAcked(t, p, p.ackedCount()+100, expiryWait)
	acked := checkPublisher(t, p)

	after := d.newLeaderOf(ctx, stream, before.NodeID, before.Generation)
	newName := nodeNameOf(after.NodeID)
	t.Logf("new leader %s at generation %d", after.NodeID, after.Generation)

	leader := d.connect(ctx, newName, token)
	recs := readShard(ctx, t, leader, ns, stream)
	if len(recs) == 0 {
		t.Fatalf("the new leader %s serves no record of %s", newName, stream)
	}
	gaps := checkAckedPresent(t, recs, acked, 1)
	if len(gaps) != 1 {
		t.Errorf("gaps at %v in what the new leader serves, want one (the generation start)", gaps)
	}
	if skipped := checkSubscriptionSkips(ctx, t, cc, ns, stream, recs[len(recs)-1].Offset); len(skipped) != 1 || len(gaps) == 1 && skipped[0] != gaps[0] {
		t.Errorf("a subscription from the earliest skipped %v, want the generation start at %v", skipped, gaps)
	}

	d.restart(oldName)
	d.waitDeposedFollows(ctx, t, stream, oldName, before.NodeID, after.NodeID, newName)
	disk := d.waitSameLogs(stream, gaps)
	if n := len(disk); n != len(recs)+len(gaps) {
		t.Errorf("the copies hold %d records, want the %d read and %d generation starts", n, len(recs), len(gaps))
	}
}

// SIGSTOP the leader of a Quorum shard past its lease: a follower takes
// over and acknowledges; once the old leader runs again it acknowledges
// nothing the new leader's log does not hold at that offset, every
// acknowledged record is present, and it ends a follower with the same
// copy.
func TestAQuorumLeaderFrozenPastItsLeaseIsDeposed(t *testing.T) {
	d := startDev(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const stream = "qfreeze"
	ns := d.client.Namespace
	before := d.createQuorumStream(ctx, stream)
	oldName := nodeNameOf(before.NodeID)
	token := d.adminToken()
	cc := d.connectCluster(ctx, token)

	p := startFailoverPublisher(ctx, cc, ns, stream)
	defer p.halt()
	waitAcked(t, p, 50, expiryWait)
	d.signal(oldName, syscall.SIGSTOP)
	frozenAt := time.Now()
	// An acknowledgement the old leader sent just before the freeze may
	// arrive just after it: count from a moment later.
	first := waitAckedAfter(t, p, frozenAt.Add(250*time.Millisecond), failoverWait)
	t.Logf("first publish acknowledged %v after the leader's SIGSTOP (offset %d)", first.at.Sub(frozenAt), first.offset)
	waitAcked(t, p, p.ackedCount()+50, expiryWait)
	after := d.newLeaderOf(ctx, stream, before.NodeID, before.Generation)
	newName := nodeNameOf(after.NodeID)
	t.Logf("new leader %s at generation %d", after.NodeID, after.Generation)

	// The old leader runs again with its old view: whatever it answers at
	// once, and a moment later, must not be an acknowledgement of a record
	// the new leader does not hold there.
	d.signal(oldName, syscall.SIGCONT)
	pinned := d.connect(ctx, oldName, token) // a connection from before the freeze may have timed out
	type probe struct {
		payload string
		res     felix.PublishResult
		err     error
	}
	var probes []probe
	for i, wait := range []time.Duration{0, time.Second, 2 * time.Second} {
		time.Sleep(wait)
		payload := stream + "-probe-" + string(rune('a'+i))
		pctx, pcancel := context.WithTimeout(ctx, 7*time.Second)
		res, err := pinned.PublishAcked(pctx, ns, stream, []byte(payload), felix.AckPerMessage)
		pcancel()
		t.Logf("publish %s to the deposed %s: offset %d (%v), err %v", payload, oldName, res.Offset, res.HasOffset, err)
		var be *felix.BrokerError
		if err != nil && !errors.As(err, &be) && !errors.Is(err, context.DeadlineExceeded) {
			t.Logf("(the connection to %s failed rather than the broker refusing: %v)", oldName, err)
		}
		probes = append(probes, probe{payload, res, err})
	}
	acked := checkPublisher(t, p)

	leader := d.connect(ctx, newName, token)
	recs := readShard(ctx, t, leader, ns, stream)
	for _, pr := range probes {
		if pr.err != nil {
			continue
		}
		// An acknowledgement is only right if the new leader's log holds
		// the probe at that offset (a broker that forwarded the publish).
		acked = append(acked, failoverAck{offset: pr.res.Offset, payload: pr.payload})
		t.Logf("the deposed %s acknowledged %s at offset %d: it must be the new leader's record there", oldName, pr.payload, pr.res.Offset)
	}
	gaps := checkAckedPresent(t, recs, acked, 1)
	if len(gaps) != 1 {
		t.Errorf("gaps at %v in what the new leader serves, want one (the generation start)", gaps)
	}

	d.waitDeposedFollows(ctx, t, stream, oldName, before.NodeID, after.NodeID, newName)
	d.waitSameLogs(stream, gaps)
}

// waitDeposedFollows waits until the old leader (node oldNode, named
// oldName) is a follower of stream's shard 0 under the new leader newNode
// (named newName), and both followers have caught up with it.
func (d *devCluster) waitDeposedFollows(ctx context.Context, t *testing.T, stream, oldName, oldNode, newNode, newName string) {
	t.Helper()
	eventually(t, expiryWait, oldName+" a follower of "+stream, func() bool {
		v := d.placement(ctx, stream)
		for _, r := range v.Shards[0].Replicas {
			if r.NodeID == oldNode {
				return v.Shards[0].NodeID == newNode
			}
		}
		return false
	})
	eventually(t, expiryWait, "both followers caught up with "+newName, func() bool {
		return d.followersCaughtUp(newName, stream)
	})
}
