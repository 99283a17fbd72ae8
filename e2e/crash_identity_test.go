// A broker whose machine crashed under `periodic` fsync comes back under
// a new storage identity (#18, #1295): the shards it led fail over to a
// follower, or, where its copy is the only one, are reopened on it under
// the new identity. The test simulates the machine crash: SIGKILL, then
// the run marker's boot id rewritten to another boot's (docs/storage.md,
// "The run marker").
package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// crashMachine SIGKILLs a node and makes its run marker say the machine
// rebooted since, as a power cut would.
func (d *devCluster) crashMachine(name string) {
	d.t.Helper()
	d.kill9(name)
	path := filepath.Join(d.node(name).DataDir, "log", "broker.running")
	b, err := os.ReadFile(path)
	if err != nil {
		d.t.Fatalf("the run marker of %s after a SIGKILL: %v", name, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		d.t.Fatalf("run marker %q: %v", b, err)
	}
	if m["fsync"] != "periodic" {
		d.t.Fatalf("run marker %q: want fsync periodic (the default)", b)
	}
	m["boot_id"] = "a boot before the crash"
	if b, err = json.Marshal(m); err != nil {
		d.t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		d.t.Fatal(err)
	}
}

// A leader-consistency leader whose machine crashed and that restarts at
// once gives its shard up: a follower holding every acknowledged record
// leads at a higher generation, and the restarted broker is registered
// under a new identity naming the old one.
func TestCrashIdentityALeaderBackAfterAMachineCrashIsReplacedByAFollower(t *testing.T) {
	d := startDev(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const stream = "crashid-leader"
	ns := d.client.Namespace
	before := d.createLeaderStream(ctx, stream, 3)
	oldName := nodeNameOf(before.NodeID)
	oldID := d.brokers(ctx)[before.NodeID].StorageID
	cc := d.connectCluster(ctx, d.adminToken())
	p := startFailoverPublisher(ctx, cc, ns, stream)
	waitAcked(t, p, 100, expiryWait)
	acked := checkPublisher(t, p)
	last := uint64(0)
	for _, a := range acked {
		last = max(last, a.offset)
	}
	d.waitReportsCover(ctx, t, stream, before.Generation, last)

	d.crashMachine(oldName)
	d.restart(oldName)
	after := d.newLeaderOf(ctx, stream, before.NodeID, before.Generation)
	t.Logf("leader %s at generation %d replaced by %s at %d", before.NodeID, before.Generation, after.NodeID, after.Generation)
	br := d.brokers(ctx)[before.NodeID]
	if br.StorageID == oldID || br.CrashedStorageID != oldID {
		t.Errorf("the restarted broker is registered as %s (crashed %q), want a new identity naming %s", br.StorageID, br.CrashedStorageID, oldID)
	}
	leader := d.connect(ctx, nodeNameOf(after.NodeID), d.adminToken())
	eventually(t, failoverWait, after.NodeID+" to serve once it has taken the shard over", func() bool {
		_, err := leader.Read(ctx, ns, stream, 0, 0, nil, 1)
		return err == nil
	})
	checkAckedPresent(t, readShard(ctx, t, leader, ns, stream), acked, 1)
}

// A shard whose only copy is on a broker whose machine crashed is
// reopened there under the new identity at a new generation, with what
// its disk holds; a process kill in the same boot keeps the identity.
func TestCrashIdentityASingleCopyShardIsReopenedOnItsOwner(t *testing.T) {
	d := startDev(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const stream = "crashid-solo"
	ns := d.client.Namespace
	d.mustFelix(ctx, "admin", "stream", "create", stream, "--durable", "--shards", "1", "--replication-factor", "1")
	placed := func(what string, ok func(gen uint64, sid, unavailable string) bool) (uint64, string) {
		var gen uint64
		var sid string
		eventually(t, expiryWait, what, func() bool {
			v := d.placement(ctx, stream)
			if len(v.Shards) != 1 {
				return false
			}
			a := v.Shards[0]
			gen, sid = a.Generation, a.StorageID
			return ok(gen, sid, a.Unavailable)
		})
		return gen, sid
	}
	gen0, sid0 := placed(stream+" placed", func(gen uint64, _, u string) bool { return gen != 0 && u == "" })
	cc := d.connectCluster(ctx, d.adminToken())
	p := startFailoverPublisher(ctx, cc, ns, stream)
	waitAcked(t, p, 50, expiryWait)
	acked := checkPublisher(t, p)

	// A process kill in the same boot: the same identity, nothing moves.
	d.kill9("node1")
	d.restart("node1")
	placed("the shard served again after a process kill", func(gen uint64, sid, u string) bool {
		return gen == gen0 && sid == sid0 && u == ""
	})

	d.crashMachine("node1")
	d.restart("node1")
	gen1, sid1 := placed("the shard reopened under a new identity", func(gen uint64, sid, u string) bool {
		return gen > gen0 && sid != sid0 && sid != "" && u == ""
	})
	t.Logf("reopened at generation %d (was %d) under %s (was %s)", gen1, gen0, sid1, sid0)
	if br := d.brokers(ctx)["broker-1"]; br.StorageID != sid1 || br.CrashedStorageID != sid0 {
		t.Errorf("broker-1 registered as %s (crashed %q), want %s naming %s", br.StorageID, br.CrashedStorageID, sid1, sid0)
	}
	owner := d.connect(ctx, "node1", d.adminToken())
	eventually(t, failoverWait, "broker-1 to serve the reopened shard", func() bool {
		_, err := owner.Read(ctx, ns, stream, 0, 0, nil, 1)
		return err == nil
	})
	checkAckedPresent(t, readShard(ctx, t, owner, ns, stream), acked, 1)
}
