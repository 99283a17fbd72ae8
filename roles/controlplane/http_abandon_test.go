package controlplane

import (
	"slices"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// A durable shard whose owner left for good waits; abandon (after a dry
// run that changes nothing) leads it from its live followers at a new
// generation, and the next pass keeps that. A served shard, a shard
// number out of range and a malformed one are refused.
func TestHTTPAbandon(t *testing.T) {
	h := newHarness(t)
	for _, node := range []string{"b1", "b2", "b3"} {
		_, err := h.svc.RegisterBroker(bg, testRegistration(node, "sid-"+node))
		must(t, err)
	}
	ns := "/v1/tenants/default/namespaces/default"
	h.expect(201, "POST", ns+"/streams", h.admin, map[string]any{"stream": "r", "durable": true, "replication_factor": 3}, nil)
	p := &placer{store: h.svc.store, log: quietLogger(), cfg: PlacementConfig{Interval: time.Second}}
	must(t, p.pass(bg))
	placementOf := func() wire.ShardAssignment {
		var v wire.PlacementView
		h.expect(200, "GET", "/v1/placement/streams/default/default/r", h.admin, nil, &v)
		return v.Shards[0]
	}
	abandon := "/v1/placement/streams/default/default/r/shards/0/abandon"
	before := placementOf()
	h.expect(409, "POST", abandon, h.admin, nil, nil) // served

	must(t, h.svc.DeregisterBroker(bg, before.NodeID))
	must(t, p.pass(bg))
	waiting := placementOf()
	if waiting.NodeID != before.NodeID || waiting.Unavailable == "" {
		t.Fatalf("after its owner left: %+v, want it waiting for %s", waiting, before.NodeID)
	}

	var dry wire.PlacementAbandon
	h.expect(200, "POST", abandon+"?dry_run=true", h.admin, nil, &dry)
	if !dry.DryRun || dry.After.NodeID == before.NodeID || !slices.Equal(dry.Lost, []string{before.NodeID}) || len(dry.Kept) != 2 {
		t.Fatalf("dry run: %+v", dry)
	}
	if got := placementOf(); got.NodeID != before.NodeID || got.Generation != waiting.Generation {
		t.Fatalf("the dry run changed the placement: %+v", got)
	}

	var done wire.PlacementAbandon
	h.expect(200, "POST", abandon, h.admin, nil, &done)
	got := placementOf()
	if done.DryRun || got.NodeID != done.After.NodeID || got.NodeID != dry.After.NodeID || got.Generation <= waiting.Generation ||
		got.Unavailable != "" || len(got.Replicas) != 1 || got.Replicas[0].NodeID == before.NodeID {
		t.Fatalf("after abandon: %+v (answer %+v)", got, done)
	}
	must(t, p.pass(bg))
	if again := placementOf(); again.NodeID != got.NodeID || again.Generation != got.Generation {
		t.Fatalf("the next pass undid it: %+v", again)
	}
	h.expect(409, "POST", abandon, h.admin, nil, nil) // served now
	h.expect(409, "POST", "/v1/placement/streams/default/default/r/shards/5/abandon", h.admin, nil, nil)
	h.expect(400, "POST", "/v1/placement/streams/default/default/r/shards/x/abandon", h.admin, nil, nil)
	h.expect(400, "POST", abandon+"?dry_run=maybe", h.admin, nil, nil)
}
