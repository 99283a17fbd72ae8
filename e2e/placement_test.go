package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// placementOf runs `felix admin placement show` with args and -o json.
func placementOf(ctx context.Context, t *testing.T, n *node, args ...string) wire.PlacementView {
	t.Helper()
	var v wire.PlacementView
	out := n.mustFelix(ctx, append([]string{"admin", "placement", "show"}, append(args, "-o", "json")...)...)
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("placement show %v: %v\n%s", args, err, out)
	}
	return v
}

// placedOn reports whether every shard of v is served by node.
func placedOn(v wire.PlacementView, node string) bool {
	for _, a := range v.Shards {
		if a.NodeID != node || a.Generation == 0 || a.Unavailable != "" {
			return false
		}
	}
	return len(v.Shards) > 0
}

// felix serve's control plane places every shard of a new stream and
// cache on its broker soon after they are created (the period is set
// far away, so the change itself must trigger the pass), and the
// registry counts them.
func TestPlacementShowsEveryShard(t *testing.T) {
	n := startServe(t, "FELIX_SHARD_RECONCILE_INTERVAL_MS=600000")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "orders", "--durable", "--shards", "4")
	n.mustFelix(ctx, "admin", "cache", "create", "sessions")

	var stream, cache wire.PlacementView
	eventually(t, time.Minute, "every shard placed on broker-1", func() bool {
		stream = placementOf(ctx, t, n, "orders")
		cache = placementOf(ctx, t, n, "--cache", "sessions")
		return placedOn(stream, "broker-1") && placedOn(cache, "broker-1")
	})
	if len(stream.Shards) != 4 || len(cache.Shards) != 1 || stream.Kind != wire.PlacementStream || cache.Kind != wire.PlacementCache {
		t.Fatalf("stream %+v\ncache %+v", stream, cache)
	}
	self := brokersOf(ctx, t, n)["broker-1"]
	gens := map[uint64]bool{}
	for i, a := range stream.Shards {
		if a.Shard != uint32(i) || a.StorageID != self.StorageID || gens[a.Generation] || a.Generation > stream.LastGeneration {
			t.Fatalf("shard %d: %+v (broker storage id %s, last generation %d)", i, a, self.StorageID, stream.LastGeneration)
		}
		gens[a.Generation] = true
	}
	if self.ShardsOwned != 5 {
		t.Fatalf("broker-1 owns %d shards, want 5", self.ShardsOwned)
	}
	table := n.mustFelix(ctx, "admin", "placement", "show", "orders")
	if !strings.Contains(table, "OWNER") || strings.Count(table, "broker-1") != 4 || strings.Count(table, "serving") != 4 {
		t.Fatalf("placement table:\n%s", table)
	}
	if brokers := n.mustFelix(ctx, "admin", "brokers", "list"); !strings.Contains(strings.Join(strings.Fields(brokers), " "), " live 5 ") {
		t.Fatalf("brokers table:\n%s", brokers)
	}
	if _, errOut, code := n.felix(ctx, "admin", "placement", "show", "nope"); code == 0 || !strings.Contains(errOut, "does not exist") {
		t.Fatalf("placement of a missing stream: exit %d, %s", code, errOut)
	}
}
