package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// The spec's way out for a shard that waits for an operator: a
// two-copy leader-consistency stream whose leader is gone for good and
// whose follower came back under a new storage identity (as after a
// crash under periodic fsync, here with nothing actually lost) cannot
// be promoted, leaves the replica set, and the shard waits. `felix admin
// placement abandon --keep FOLLOWER` leads it from the follower's copy, says which copy it gives up, and every record
// the follower held is served again, under a new generation that
// accepts new publishes.
func TestAbandonLeadsAWaitingShardFromTheCopyLeft(t *testing.T) {
	d := startDev(t, 5) // two down leave the control plane its majority
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs := d.createReplicated(ctx, "ledger", 1, 2, "leader")[0]
	token := d.adminToken()
	c := d.connect(ctx, rs.leader, token)
	acked := map[uint64]string{}
	publishAll(ctx, t, c, "ledger", "kept", 20, 0, acked)
	d.waitCopiesEqual("ledger", 0, rs, acked)
	c.Close()

	follower := rs.followers[0]
	d.kill9(rs.leader)
	d.kill9(follower)
	idFile := filepath.Join(d.node(follower).DataDir, "log", "storage.id")
	if err := os.WriteFile(idFile, []byte("00000000000000000000000000abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A broker comes back under another identity only once the old one is
	// marked down (a live one would be a duplicate node id).
	eventually(t, expiryWait, follower+" marked down", func() bool {
		return d.brokers(ctx)[d.node(follower).NodeID].State == wire.BrokerDown
	})
	d.restart(follower)
	eventually(t, expiryWait, "ledger/0 to wait for its leader", func() bool {
		a := d.placement(ctx, "ledger").Shards[0]
		return a.NodeID == d.node(rs.leader).NodeID && a.Unavailable != ""
	})
	waiting := d.placement(ctx, "ledger").Shards[0]

	plan := d.mustFelix(ctx, "admin", "placement", "abandon", "ledger", "--shard", "0", "--keep", d.node(follower).NodeID, "--dry-run")
	if !strings.Contains(plan, "dry run") || !strings.Contains(plan, d.node(rs.leader).NodeID) {
		t.Fatalf("dry run said:\n%s", plan)
	}
	if a := d.placement(ctx, "ledger").Shards[0]; a.Generation != waiting.Generation {
		t.Fatalf("the dry run changed the placement: %+v", a)
	}
	out := d.mustFelix(ctx, "admin", "placement", "abandon", "ledger", "--shard", "0", "--keep", d.node(follower).NodeID, "--yes")
	if !strings.Contains(out, "given up") || !strings.Contains(out, d.node(rs.leader).NodeID) {
		t.Fatalf("abandon said:\n%s", out)
	}
	after := d.placement(ctx, "ledger").Shards[0]
	if after.NodeID != d.node(follower).NodeID || after.Generation <= waiting.Generation {
		t.Fatalf("after abandon: %+v", after)
	}

	c = d.connect(ctx, follower, token)
	var got map[uint64]string
	eventually(t, replWait, "the kept records served by "+follower, func() bool {
		got = map[uint64]string{}
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		defer rcancel()
		page, err := c.Read(rctx, "default", "ledger", 0, 0, nil, 0)
		if err != nil {
			return false
		}
		for _, r := range page.Records {
			got[r.Offset] = string(r.Payload)
		}
		return len(got) >= len(acked)
	})
	for off, p := range acked {
		if got[off] != p {
			t.Fatalf("offset %d: %q, acknowledged %q (read %v)", off, got[off], p, got)
		}
	}
	mustPublish(ctx, t, c, "ledger", "after", acked)
}
