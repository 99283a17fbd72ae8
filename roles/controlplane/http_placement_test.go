package controlplane

import (
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

func TestHTTPPlacement(t *testing.T) {
	h := newHarness(t)
	_, err := h.svc.RegisterBroker(bg, testRegistration("broker-1", "sid-1"))
	must(t, err)
	ns := "/v1/tenants/default/namespaces/default"
	h.expect(201, "POST", ns+"/streams", h.admin, map[string]any{"stream": "s", "shards": 4}, nil)
	h.expect(201, "POST", ns+"/caches", h.admin, map[string]any{"cache": "c"}, nil)
	streamPath, cachePath := "/v1/placement/streams/default/default/s", "/v1/placement/caches/default/default/c"

	// Before a pass every shard is listed, not yet assigned.
	var v wire.PlacementView
	h.expect(200, "GET", streamPath, h.admin, nil, &v)
	if len(v.Shards) != 4 || v.Shards[3].Shard != 3 || v.Shards[3].Unavailable != wire.UnavailableNotAssigned || v.Shards[3].Generation != 0 {
		t.Fatalf("before placement: %+v", v)
	}

	p := &placer{store: h.svc.store, log: quietLogger(), cfg: PlacementConfig{Interval: time.Second}}
	must(t, p.pass(bg))
	v = wire.PlacementView{} // decoding into a used slice would keep old fields
	h.expect(200, "GET", streamPath, h.admin, nil, &v)
	if v.Kind != wire.PlacementStream || v.Name != "s" || len(v.Shards) != 4 || v.LastGeneration != 5 {
		t.Fatalf("stream placement: %+v", v)
	}
	for i, a := range v.Shards {
		if a.Shard != uint32(i) || a.NodeID != "broker-1" || a.Generation == 0 || a.Unavailable != "" {
			t.Fatalf("shard %d: %+v", i, a)
		}
	}
	reader := h.token("default", "r", "stream.subscribe:stream:default/default/s", "cache.read:cache:default/default/c")
	h.expect(200, "GET", streamPath, reader, nil, nil)
	v = wire.PlacementView{}
	h.expect(200, "GET", cachePath, reader, nil, &v)
	if v.Kind != wire.PlacementCache || len(v.Shards) != 1 || v.Shards[0].NodeID != "broker-1" {
		t.Fatalf("cache placement: %+v", v)
	}
	other := h.token("default", "o", "stream.subscribe:stream:default/default/other", "cache.read:cache:default/default/c/one-key")
	h.expectError(403, "forbidden", "GET", streamPath, other, nil, "stream.subscribe")
	h.expectError(403, "forbidden", "GET", cachePath, other, nil, "cache.read")
	h.expectError(404, "not_found", "GET", "/v1/placement/streams/default/default/nope", h.admin, nil, "does not exist")
	h.expectError(404, "not_found", "GET", "/v1/placement/caches/default/default/nope", h.admin, nil, "does not exist")

	var brokers struct{ Items []wire.Broker }
	h.expect(200, "GET", "/v1/brokers", h.admin, nil, &brokers)
	if len(brokers.Items) != 1 || brokers.Items[0].ShardsOwned != 5 {
		t.Fatalf("brokers: %+v", brokers.Items)
	}
}
