package controlplane

import (
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

func TestStreamCreateTakesAReplicationFactorOrTheDefault(t *testing.T) {
	h := newHarness(t)
	ns := "/v1/tenants/default/namespaces/default"
	var sp wire.StreamSpec
	h.expect(201, "POST", ns+"/streams", h.admin, map[string]any{"stream": "r3", "durable": true, "replication_factor": 3, "consistency": "quorum"}, &sp)
	if sp.ReplicationFactor != 3 || sp.Consistency != "quorum" {
		t.Errorf("created %+v, want factor 3 and quorum", sp)
	}
	sp = wire.StreamSpec{}
	h.expect(201, "POST", ns+"/streams", h.admin, map[string]any{"stream": "one"}, &sp)
	if sp.ReplicationFactor != 1 {
		t.Errorf("created without a factor: %+v, want the default 1", sp)
	}

	h.svc.defaultRF = 3 // as Config.DefaultReplicationFactor sets it
	sp = wire.StreamSpec{}
	h.expect(201, "POST", ns+"/streams", h.admin, map[string]any{"stream": "three"}, &sp)
	if sp.ReplicationFactor != 3 {
		t.Errorf("created without a factor under a default of 3: %+v", sp)
	}
	var b batchResponse
	h.expect(201, "POST", ns+"/batch", h.admin, map[string]any{"streams": []any{
		map[string]any{"stream": "b1"}, map[string]any{"stream": "b2", "replication_factor": 2}}}, &b)
	if len(b.Streams) != 2 || b.Streams[0].ReplicationFactor != 3 || b.Streams[1].ReplicationFactor != 2 {
		t.Errorf("batch %+v, want factors 3 (the default) and 2", b.Streams)
	}
}

func TestDefaultReplicationFactorFromEnv(t *testing.T) {
	for raw, want := range map[string]uint32{"": 1, "1": 1, "3": 3, "7": 7} {
		got, err := DefaultReplicationFactorFromEnv(func(string) string { return raw })
		if err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", raw, got, err, want)
		}
	}
	for _, raw := range []string{"0", "8", "-1", "three"} {
		if _, err := DefaultReplicationFactorFromEnv(func(string) string { return raw }); err == nil {
			t.Errorf("%q accepted", raw)
		} else if msg := err.Error(); !strings.Contains(msg, EnvDefaultReplicationFactor) {
			t.Errorf("%q: error %q does not name the variable", raw, msg)
		}
	}
	if _, err := New(Config{DefaultReplicationFactor: 8}, nil); err == nil {
		t.Error("a default factor of 8 was accepted")
	}
}

func TestHTTPReplication(t *testing.T) {
	h := newHarness(t)
	for _, node := range []string{"b1", "b2", "b3"} {
		_, err := h.svc.RegisterBroker(bg, testRegistration(node, "sid-"+node))
		must(t, err)
	}
	ns := "/v1/tenants/default/namespaces/default"
	h.expect(201, "POST", ns+"/streams", h.admin, map[string]any{"stream": "r", "durable": true, "shards": 2, "replication_factor": 3}, nil)
	h.expect(201, "POST", ns+"/streams", h.admin, map[string]any{"stream": "one", "durable": true}, nil)
	h.expect(201, "POST", ns+"/streams", h.admin, map[string]any{"stream": "mem", "replication_factor": 3}, nil)
	m := newPlacementMetrics()
	t.Cleanup(m.close)
	p := &placer{store: h.svc.store, log: quietLogger(), cfg: PlacementConfig{Interval: time.Second}, metrics: m}
	must(t, p.pass(bg))

	var v wire.ReplicationView
	h.expect(200, "GET", pPlacementReplication, h.admin, nil, &v)
	if len(v.Shards) != 2 {
		t.Fatalf("replication %+v, want the two shards of r", v)
	}
	for i, s := range v.Shards {
		if s.Name != "r" || s.Shard != uint32(i) || s.Desired != 3 || s.Current != 3 || s.UnderReplicated ||
			s.LeaderState != wire.CopyLive || len(s.Replicas) != 2 || s.Generation == 0 {
			t.Fatalf("shard %d: %+v", i, s)
		}
		for _, r := range s.Replicas {
			if r.State != wire.CopyLive || r.NodeID == s.Leader || r.StorageID != "sid-"+r.NodeID {
				t.Fatalf("shard %d follower %+v", i, r)
			}
		}
	}
	if g := m.underReplicated.Get(); g != 0 {
		t.Errorf("felix_shards_under_replicated %v, want 0", g)
	}

	// b3 leaves the registry: its copies are gone at once, and once a
	// pass drops them no broker is left to top the sets up.
	must(t, h.svc.DeregisterBroker(bg, "b3"))
	v = wire.ReplicationView{}
	h.expect(200, "GET", pPlacementReplication, h.admin, nil, &v)
	under := 0
	for _, s := range v.Shards {
		if s.UnderReplicated && s.Name == "r" {
			under++
			if s.Current != 2 {
				t.Errorf("%+v: want 2 live copies", s)
			}
		}
	}
	if under == 0 {
		t.Fatalf("after b3 left: %+v, want under-replicated shards", v)
	}
	must(t, p.pass(bg))
	v = wire.ReplicationView{}
	h.expect(200, "GET", pPlacementReplication, h.admin, nil, &v)
	for _, s := range v.Shards {
		switch {
		case s.Name == "one": // its only copy was on b3
			if !s.UnderReplicated || s.Desired != 1 || s.Current != 0 || s.Leader != "b3" || s.LeaderState != wire.CopyGone {
				t.Errorf("after a pass without b3: %+v", s)
			}
		case s.Leader == "b3": // waits for its leader, keeping its followers
			if !s.UnderReplicated || s.Current != 2 || s.LeaderState != wire.CopyGone || len(s.Replicas) != 2 {
				t.Errorf("after a pass without b3: %+v", s)
			}
		case !s.UnderReplicated || s.Current != 2 || len(s.Replicas) != 1 || s.Replicas[0].NodeID == "b3":
			t.Errorf("after a pass without b3: %+v", s)
		}
	}
	if g := m.underReplicated.Get(); g != float64(len(v.Shards)) {
		t.Errorf("felix_shards_under_replicated %v, want %d", g, len(v.Shards))
	}

	h.expectError(403, "forbidden", "GET", pPlacementReplication, h.token("default", "x", "tenant.manage:tenant:default"), nil)
}

func TestALeaderShardFailsOverOnItsBrokersReportsAndTheReplicationViewShowsThem(t *testing.T) {
	h := newHarness(t)
	for _, node := range []string{"b1", "b2", "b3"} {
		_, err := h.svc.RegisterBroker(bg, testRegistration(node, "sid-"+node))
		must(t, err)
	}
	ns := "/v1/tenants/default/namespaces/default"
	h.expect(201, "POST", ns+"/streams", h.admin, map[string]any{"stream": "lr", "durable": true, "replication_factor": 3}, nil)
	p := &placer{store: h.svc.store, log: quietLogger(), cfg: PlacementConfig{Interval: time.Second}}
	must(t, p.pass(bg))
	var pv wire.PlacementView
	h.expect(200, "GET", "/v1/placement/streams/default/default/lr", h.admin, nil, &pv)
	a := pv.Shards[0]
	if a.Consistency != "leader" || len(a.Replicas) != 2 {
		t.Fatalf("placed %+v", a)
	}
	at := func(durable uint64, leader bool, end uint64) []wire.ShardPosition {
		return []wire.ShardPosition{{Kind: "stream", TenantID: "default", Namespace: "default", Name: "lr", Generation: a.Generation,
			Leader: leader, Durable: durable, End: end}}
	}
	heartbeat := func(node string, ps []wire.ShardPosition) {
		_, err := h.svc.HeartbeatBroker(bg, wire.BrokerHeartbeat{NodeID: node, StorageID: "sid-" + node, Positions: ps})
		must(t, err)
	}
	f1, f2 := a.Replicas[0].NodeID, a.Replicas[1].NodeID
	heartbeat(a.NodeID, at(10, true, 12))
	heartbeat(f1, at(10, false, 0))
	heartbeat(f2, at(11, false, 0))

	var v wire.ReplicationView
	h.expect(200, "GET", pPlacementReplication, h.admin, nil, &v)
	s := v.Shards[0]
	if lp := s.LeaderPosition; lp == nil || lp.Durable != 10 || lp.End != 12 || lp.Generation != a.Generation || lp.ReportAgeMs < 0 {
		t.Fatalf("leader position %+v", s.LeaderPosition)
	}
	for i, want := range []uint64{2, 1} {
		r := s.Replicas[i]
		if r.Position == nil || r.Position.Durable != 12-want || r.Lag == nil || *r.Lag != want {
			t.Fatalf("follower %d: %+v (position %+v)", i, r, r.Position)
		}
	}

	// The leader's broker is marked down: the followers' reports from
	// before that do not show they outlived it, so the shard waits; once
	// they report again the next pass promotes the follower holding the
	// most of what the leader reported.
	brs, err := h.svc.Brokers(bg)
	must(t, err)
	for _, br := range brs {
		if br.NodeID == a.NodeID {
			ok, err := h.svc.store.MarkBrokerDown(bg, br.NodeID, br.LastHeartbeatMs, h.svc.now().UnixMilli())
			if err != nil || !ok {
				t.Fatalf("mark down: %v %v", ok, err)
			}
		}
	}
	must(t, p.pass(bg))
	pv = wire.PlacementView{}
	h.expect(200, "GET", "/v1/placement/streams/default/default/lr", h.admin, nil, &pv)
	if got := pv.Shards[0]; got.NodeID != a.NodeID || got.Unavailable != wire.UnavailableOwnerDown {
		t.Fatalf("promoted on reports from before the leader went down: %+v", got)
	}
	time.Sleep(2 * time.Millisecond) // the reports below arrive after the mark-down
	heartbeat(f1, at(10, false, 0))
	heartbeat(f2, at(11, false, 0))
	must(t, p.pass(bg))
	pv = wire.PlacementView{}
	h.expect(200, "GET", "/v1/placement/streams/default/default/lr", h.admin, nil, &pv)
	got := pv.Shards[0]
	if got.NodeID != f2 || got.Generation <= a.Generation || got.Unavailable != "" || len(got.Replicas) != 2 ||
		got.Replicas[1].NodeID != a.NodeID {
		t.Fatalf("after the leader went down: %+v, want %s promoted and %s kept as a follower", got, f2, a.NodeID)
	}
	// The new leader has not reported at its generation yet: were it to
	// die too, the shard would wait.
	v = wire.ReplicationView{}
	h.expect(200, "GET", pPlacementReplication, h.admin, nil, &v)
	if lp := v.Shards[0].LeaderPosition; lp == nil || lp.Generation != a.Generation || lp.End != 0 {
		t.Fatalf("the new leader's position %+v, want its follower report of generation %d", lp, a.Generation)
	}
	if v.Shards[0].Replicas[0].Lag != nil {
		t.Fatalf("a lag across generations: %+v", v.Shards[0].Replicas[0])
	}
}
