// The Jepsen scenario "a replica whose data was corrupted or truncated
// while down must not win an election" (#18; Jepsen found it in NATS
// JetStream 2.12.1, where a damaged replica became leader and the others
// followed its shorter log). A follower holding records the other
// follower lacks is SIGKILLed, its shard log damaged on disk, the leader
// SIGKILLed; with the damaged follower and the lagging one back, no
// takeover may serve their copies: the damaged one lost records it
// promised, so it does not count (core/replica_damage.go). Once the old
// leader is back, every acknowledged record is read once at its offset
// from the new leader and the damaged copy is refilled.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// truncateNewestSegment cuts the newest segment file of a shard log
// directory to half its size.
func truncateNewestSegment(t *testing.T, dir string) {
	t.Helper()
	seg := newestSegment(t, dir)
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(seg, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	t.Logf("truncated %s from %d to %d bytes", seg, fi.Size(), fi.Size()/2)
}

// flipMiddleByte inverts one byte in the middle of the newest segment
// file: a record there fails its CRC with good records after it.
func flipMiddleByte(t *testing.T, dir string) {
	t.Helper()
	seg := newestSegment(t, dir)
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("flipped the byte at %d of %s (%d bytes)", len(b)/2, seg, len(b))
}

func newestSegment(t *testing.T, dir string) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment in %s: %v", dir, err)
	}
	sort.Strings(segs)
	return segs[len(segs)-1]
}

// waitReportCovers waits until node reported its copy of stream's shard
// 0 durable past offset last at generation gen.
func (d *devCluster) waitReportCovers(ctx context.Context, t *testing.T, stream, node string, gen, last uint64) {
	t.Helper()
	id := d.node(node).NodeID
	eventually(t, expiryWait, fmt.Sprintf("%s to report offset %d of %s durable", node, last, stream), func() bool {
		v := d.placementReports(ctx, stream)
		if len(v.Replication) != 1 {
			return false
		}
		for _, c := range v.Replication[0].Replicas {
			if c.NodeID == id && c.Position != nil && c.Position.Generation == gen && c.Position.Durable > last {
				return true
			}
		}
		return false
	})
}

// damagedReplicaScenario runs the scenario on a one-shard factor-3
// stream of consistency, damaging the follower's log with damage.
// aside says the damage makes the log refuse to recover, so the copy is
// set aside.
func damagedReplicaScenario(t *testing.T, stream, consistency string, damage func(*testing.T, string), aside bool) {
	d := startDev(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs := d.createReplicated(ctx, stream, 1, 3, consistency)[0]
	damaged, lagging := rs.followers[0], rs.followers[1]
	c := d.connect(ctx, rs.leader, d.adminToken())
	acked := map[uint64]string{}
	publishAll(ctx, t, c, stream, "all", 20, 0, acked)
	d.waitCopiesEqual(stream, 0, rs, acked)

	// The lagging follower misses the second part; the leader and the
	// follower about to be damaged hold it (a majority, on a Quorum
	// shard), and both say so to the control plane.
	d.kill9(lagging)
	publishAll(ctx, t, c, stream, "two", 40, 0, acked)
	last := uint64(0)
	for off := range acked {
		last = max(last, off)
	}
	d.waitReportCovers(ctx, t, stream, damaged, rs.generation, last)
	c.Close()

	d.kill9(damaged)
	damage(t, d.replicaDir(damaged, stream, 0))
	d.kill9(rs.leader)
	// One node alone has no control-plane majority: start both, then wait
	// (starting again one that exits at once: a port, or its data
	// directory's lock, not yet released by the killed process).
	(&historyRun{t: t, d: d}).restartTogether(damaged, lagging)

	// With the leader down, the damaged copy and the lagging one are all
	// there is: nobody may serve the shard from them.
	// A Quorum shard promotes a follower (whose takeover must then wait);
	// a leader-consistency one waits for its leader (neither follower
	// reported holding its log since).
	leaderID := d.node(rs.leader).NodeID
	eventually(t, expiryWait, stream+"'s leader marked down", func() bool {
		a := d.placement(ctx, stream).Shards[0]
		if a.NodeID != leaderID && a.Unavailable == "" {
			t.Logf("%s promoted %s at generation %d", stream, a.NodeID, a.Generation)
			return true
		}
		return consistency == "leader" && a.Unavailable != ""
	})
	for _, name := range []string{damaged, lagging} {
		cl := d.connect(ctx, name, d.adminToken())
		until := time.Now().Add(3 * time.Second)
		for time.Now().Before(until) {
			rctx, rcancel := context.WithTimeout(ctx, time.Second)
			page, err := cl.Read(rctx, "default", stream, 0, 0, nil, 0)
			rcancel()
			if err == nil {
				t.Fatalf("%s served %s (%d records) from a damaged and a lagging copy while the leader was down", name, stream, len(page.Records))
			}
			time.Sleep(200 * time.Millisecond)
		}
		cl.Close()
	}

	// The old leader back: a whole majority; every acknowledged record is
	// served once at its offset, and the damaged copy is refilled.
	(&historyRun{t: t, d: d}).restartTogether(rs.leader)
	var served string
	eventually(t, failoverWait, stream+" served again", func() bool {
		a := d.placement(ctx, stream).Shards[0]
		if a.Unavailable != "" || a.NodeID == "" {
			return false
		}
		cl := d.connect(ctx, nodeNameOf(a.NodeID), d.adminToken())
		defer cl.Close()
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		defer rcancel()
		_, err := cl.Read(rctx, "default", stream, 0, 0, nil, 1)
		if err == nil {
			served = nodeNameOf(a.NodeID)
		}
		return err == nil
	})
	a := d.placement(ctx, stream).Shards[0]
	t.Logf("%s led by %s at generation %d", stream, a.NodeID, a.Generation)
	cl := d.connect(ctx, served, d.adminToken())
	defer cl.Close()
	recs := readShard(ctx, t, cl, "default", stream)
	byOffset := map[uint64]string{}
	seen := map[string]bool{}
	for _, r := range recs {
		p := string(r.Payload)
		if seen[p] {
			t.Errorf("%q read twice", p)
		}
		seen[p], byOffset[r.Offset] = true, p
	}
	for off, p := range acked {
		if got, ok := byOffset[off]; !ok || got != p {
			t.Errorf("acknowledged %q at offset %d: read %q (present %v)", p, off, got, ok)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	nodes := []string{served}
	for _, n := range []string{rs.leader, damaged, lagging} {
		if n != served {
			nodes = append(nodes, n)
		}
	}
	var why string
	eventually(t, replWait, "every copy equal to the new leader's", func() bool {
		why = d.copiesDiffer(stream, 0, nodes, acked)
		return why == ""
	})
	t.Logf("%d acknowledged records read back; the damaged copy on %s refilled", len(acked), damaged)
	if aside {
		found, _ := filepath.Glob(filepath.Join(d.node(damaged).DataDir, "log", "damaged", "*", "*", stream, "0-*", "*.log"))
		if len(found) == 0 {
			t.Errorf("the corrupted copy of %s on %s was not set aside under its storage's damaged/", stream, damaged)
		}
	}
}

// Quorum, the newest segment of the follower's copy cut to half: the
// copy opens short of what it promised and its fence answer does not
// count towards the takeover's majority.
func TestJepsenATruncatedReplicaDoesNotWinAnElection(t *testing.T) {
	damagedReplicaScenario(t, "jtrunc", "quorum", truncateNewestSegment, false)
}

// Quorum, a byte flipped in a record in the middle of the follower's
// copy: the log refuses to recover, the copy is set aside and an empty
// damaged one refilled in its place.
func TestJepsenACorruptedReplicaDoesNotWinAnElection(t *testing.T) {
	damagedReplicaScenario(t, "jcorrupt", "quorum", flipMiddleByte, true)
}

// Leader consistency, truncated: the damaged copy reports no position, so
// placement never promotes it; the shard waits for its leader.
func TestJepsenATruncatedLeaderConsistencyReplicaDoesNotWinAnElection(t *testing.T) {
	damagedReplicaScenario(t, "jltrunc", "leader", truncateNewestSegment, false)
}

// Leader consistency, corrupted.
func TestJepsenACorruptedLeaderConsistencyReplicaDoesNotWinAnElection(t *testing.T) {
	damagedReplicaScenario(t, "jlcorrupt", "leader", flipMiddleByte, true)
}
