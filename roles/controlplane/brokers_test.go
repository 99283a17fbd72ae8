package controlplane

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

func testRegistration(node, sid string, features ...string) wire.BrokerRegistration {
	return wire.BrokerRegistration{NodeID: node, ClientAddrs: []string{"127.0.0.1:5000"}, Zone: "eu-1a", Features: features, StorageID: sid}
}

func TestHTTPBrokerRegistry(t *testing.T) {
	h := newHarness(t)
	noPerm := h.token("default", "x", "tenant.manage:tenant:default")
	reg := testRegistration("broker-1", "s1", wire.FleetFeatures...)
	var br wire.Broker
	h.expect(200, "POST", "/v1/brokers", h.admin, reg, &br)
	if br.NodeID != "broker-1" || br.State != wire.BrokerLive || br.Zone != "eu-1a" || br.RegisteredAtMs == 0 {
		t.Fatalf("registered %+v", br)
	}
	h.expectError(403, "forbidden", "POST", "/v1/brokers", noPerm, reg)
	h.expectError(409, "conflict", "POST", "/v1/brokers", h.admin, testRegistration("broker-1", "s2", wire.FleetFeatures...), "duplicate node id")
	h.expectError(400, "invalid_request", "POST", "/v1/brokers", h.admin, wire.BrokerRegistration{NodeID: "a/b", Features: []string{"Bad!"}},
		"node_id", "storage_id", "client_addrs", "features")

	h.expect(200, "POST", "/v1/brokers/broker-1/heartbeat", h.admin, wire.BrokerHeartbeat{StorageID: "s1"}, &br)
	h.expectError(404, "not_found", "POST", "/v1/brokers/ghost/heartbeat", h.admin, wire.BrokerHeartbeat{StorageID: "s1"}, "ghost", "not registered")
	h.expectError(400, "invalid_request", "POST", "/v1/brokers/broker-1/heartbeat", h.admin, wire.BrokerHeartbeat{NodeID: "broker-2", StorageID: "s1"}, "differs")
	good := wire.ShardPosition{Kind: "stream", TenantID: "default", Namespace: "default", Name: "s", Generation: 3, Leader: true, Durable: 5, End: 7}
	h.expect(200, "POST", "/v1/brokers/broker-1/heartbeat", h.admin, wire.BrokerHeartbeat{StorageID: "s1", Positions: []wire.ShardPosition{good}}, &br)
	for _, bad := range []func(p *wire.ShardPosition){
		func(p *wire.ShardPosition) { p.Kind = "queue" },
		func(p *wire.ShardPosition) { p.Name = "" },
		func(p *wire.ShardPosition) { p.Generation = 0 },
		func(p *wire.ShardPosition) { p.End = 4 },
		func(p *wire.ShardPosition) { p.Leader = false },
	} {
		p := good
		bad(&p)
		h.expectError(400, "invalid_request", "POST", "/v1/brokers/broker-1/heartbeat", h.admin,
			wire.BrokerHeartbeat{StorageID: "s1", Positions: []wire.ShardPosition{good, p}}, "positions", "entry 1")
	}
	h.expectError(400, "invalid_request", "POST", "/v1/brokers/broker-1/heartbeat", h.admin,
		wire.BrokerHeartbeat{StorageID: "s1", Positions: make([]wire.ShardPosition, wire.MaxPositions+1)}, "positions", "at most")

	var list struct{ Items []wire.Broker }
	h.expect(200, "GET", "/v1/brokers", h.admin, nil, &list)
	if len(list.Items) != 1 || list.Items[0].NodeID != "broker-1" {
		t.Fatalf("list %+v", list)
	}
	h.expect(204, "DELETE", "/v1/brokers/broker-1", h.admin, nil, nil)
	h.expectError(409, "conflict", "POST", "/v1/brokers/broker-1/heartbeat", h.admin, wire.BrokerHeartbeat{StorageID: "s1"}, "deregistered")
	h.expectError(404, "not_found", "DELETE", "/v1/brokers/ghost", h.admin, nil)
}

func TestHTTPFleetFeatures(t *testing.T) {
	h := newHarness(t)
	var view wire.FleetFeaturesView
	h.expect(200, "GET", "/v1/fleet/features", h.admin, nil, &view)
	if len(view.Features) != len(wire.FleetFeatures) || view.Features[0].Supported || view.Features[0].Finalized {
		t.Fatalf("before any broker %+v", view)
	}
	// A new cluster: the first registration finalizes what the broker
	// reports, but publisher_principal.
	h.expect(200, "POST", "/v1/brokers", h.admin, testRegistration("b1", "s1", wire.FleetJumpHashRouting, wire.FleetPublisherPrincipal), nil)
	h.expect(200, "GET", "/v1/fleet/features", h.admin, nil, &view)
	got := map[string]wire.FleetFeature{}
	for _, f := range view.Features {
		got[f.Name] = f
	}
	if !got[wire.FleetJumpHashRouting].Finalized || got[wire.FleetPublisherPrincipal].Finalized ||
		!got[wire.FleetPublisherPrincipal].Supported || got[wire.FleetMajorityAck].Supported {
		t.Fatalf("after the first registration %+v", got)
	}
	h.expectError(409, "conflict", "POST", "/v1/fleet/features/finalize", h.admin, wire.FinalizeRequest{Features: []string{wire.FleetMajorityAck}}, "majority_ack", "b1")
	h.expectError(404, "not_found", "POST", "/v1/fleet/features/finalize", h.admin, wire.FinalizeRequest{Features: []string{"warp"}}, "warp")
	h.expect(200, "POST", "/v1/fleet/features/finalize", h.admin, wire.FinalizeRequest{Features: []string{wire.FleetPublisherPrincipal}}, &view)
	for _, f := range view.Features {
		if f.Name == wire.FleetPublisherPrincipal && !f.Finalized {
			t.Fatalf("finalize answered %+v", view)
		}
	}
	// A broker without a finalized feature is refused at registration.
	h.expectError(409, "conflict", "POST", "/v1/brokers", h.admin, testRegistration("b2", "s2", wire.FleetJumpHashRouting), "b2", "publisher_principal")
	// The OpenAPI document describes the new routes.
	_, raw := h.do("GET", "/v1/openapi.json", "", nil)
	for _, want := range []string{`"/v1/fleet/features/finalize"`, `"/v1/brokers/{node}/heartbeat"`, `"BrokerRegistration"`} {
		if !strings.Contains(string(raw), want) {
			t.Fatalf("openapi lacks %s", want)
		}
	}
}

func TestExpiryConfigFromEnv(t *testing.T) {
	env := map[string]string{"FELIX_NODE_EXPIRY_TIMEOUT_MS": "1000", "FELIX_NODE_REGRANT_MARGIN_MS": "0"}
	cfg, err := ExpiryConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || cfg.Timeout != time.Second || cfg.Margin != 0 || cfg.Sweep != DefaultExpirySweep {
		t.Fatalf("%+v %v", cfg, err)
	}
	env = map[string]string{"FELIX_NODE_EXPIRY_TIMEOUT_MS": "x", "FELIX_NODE_EXPIRY_SWEEP_INTERVAL_MS": "0"}
	_, err = ExpiryConfigFromEnv(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "FELIX_NODE_EXPIRY_TIMEOUT_MS") || !strings.Contains(err.Error(), "FELIX_NODE_EXPIRY_SWEEP_INTERVAL_MS") {
		t.Fatalf("bad values: %v", err)
	}
}

func brokerState(t *testing.T, s Store, node string) wire.Broker {
	t.Helper()
	list, err := s.Brokers(bg)
	must(t, err)
	for _, br := range list {
		if br.NodeID == node {
			return br
		}
	}
	t.Fatalf("broker %q not registered", node)
	return wire.Broker{}
}

// The expiry sweep acts only on the leader, and a new leader carries on
// from the records after the old one is gone.
func TestExpiryAcrossLeaderChange(t *testing.T) {
	g := openTestGroup(t, 3)
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	cfg := ExpiryConfig{Timeout: 10 * time.Second, Margin: 2 * time.Second, Sweep: time.Second}
	sweepers := map[uint64]*expiry{}
	for id, s := range g.stores {
		sweepers[id] = &expiry{store: s, cfg: cfg, now: clock.Now, log: quietLogger()}
	}
	sweepAll := func() {
		for id, e := range sweepers {
			if g.stores[id] != nil {
				must(t, e.sweep(bg))
			}
		}
	}
	first := g.leader(t)
	s := g.stores[first]
	at := clock.Now().UnixMilli()
	for _, node := range []string{"quiet", "chatty"} {
		_, err := s.RegisterBroker(bg, testRegistration(node, "sid-"+node), at)
		must(t, err)
	}
	sweepAll() // every member looks; the leader starts counting
	clock.Add(11 * time.Second)
	_, err := s.HeartbeatBroker(bg, wire.BrokerHeartbeat{NodeID: "chatty", StorageID: "sid-chatty"}, clock.Now().UnixMilli())
	must(t, err)
	sweepAll()
	if br := brokerState(t, s, "quiet"); br.State != wire.BrokerLive {
		t.Fatalf("marked down within timeout+margin: %+v", br)
	}
	clock.Add(2 * time.Second) // quiet: 13s > 12s
	sweepAll()
	if br := brokerState(t, s, "quiet"); br.State != wire.BrokerDown || br.DownAtMs != clock.Now().UnixMilli() {
		t.Fatalf("quiet after expiry: %+v", br)
	}
	if br := brokerState(t, s, "chatty"); br.State != wire.BrokerLive {
		t.Fatalf("chatty: %+v", br)
	}

	// The leader goes; chatty falls silent. The new leader counts from
	// when it took over, then marks chatty down.
	g.stop(first)
	delete(sweepers, first)
	next := g.leader(t)
	clock.Add(20 * time.Second) // chatty: 22s since its heartbeat
	sweepAll()
	if br := brokerState(t, g.stores[next], "chatty"); br.State != wire.BrokerLive {
		t.Fatalf("a new leader marked a broker down without giving it a full expiry time: %+v", br)
	}
	clock.Add(13 * time.Second)
	sweepAll()
	if br := brokerState(t, g.stores[next], "chatty"); br.State != wire.BrokerDown {
		t.Fatalf("chatty after the new leader's expiry: %+v", br)
	}
}

// The loop started by StartExpiry sweeps on each tick and stops on Close.
func TestExpiryLoopRunsOnTicks(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(5_000_000)}
	store := openTestRaft(t, t.TempDir())
	svc, err := New(Config{Logger: quietLogger(), Now: clock.Now}, store)
	must(t, err)
	tickC := make(chan time.Time) // unbuffered: a send returns once the loop took it
	svc.StartExpiry(ExpiryConfig{Timeout: time.Second, Sweep: time.Hour, tickC: tickC})
	waitFor(t, "a leader", store.Ready)
	_, err = svc.RegisterBroker(bg, testRegistration("b1", "s1"))
	must(t, err)
	tick := func() { tickC <- time.Time{}; tickC <- time.Time{} } // the second send waits out the first sweep
	tick()                                                        // the leader starts counting
	clock.Add(2 * time.Second)
	tick()
	if br := brokerState(t, store, "b1"); br.State != wire.BrokerDown {
		t.Fatalf("after expiry: %+v", br)
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.Close() }()
	select {
	case err := <-done:
		must(t, err)
	case <-ctx.Done():
		t.Fatal("Close did not stop the expiry loop")
	}
}

func TestHTTPBrokerRegistrationNamesTheIdentityACrashReplaced(t *testing.T) {
	h := newHarness(t)
	var br wire.Broker
	h.expect(200, "POST", "/v1/brokers", h.admin, testRegistration("broker-1", "s1", wire.FleetFeatures...), &br)
	self := testRegistration("broker-1", "s1", wire.FleetFeatures...)
	self.CrashedStorageID = "s1"
	h.expectError(400, "invalid_request", "POST", "/v1/brokers", h.admin, self, "crashed_storage_id")
	bad := testRegistration("broker-1", "s2", wire.FleetFeatures...)
	bad.CrashedStorageID = "not/a name"
	h.expectError(400, "invalid_request", "POST", "/v1/brokers", h.admin, bad, "crashed_storage_id")
	back := testRegistration("broker-1", "s2", wire.FleetFeatures...)
	back.CrashedStorageID = "s1"
	h.expect(200, "POST", "/v1/brokers", h.admin, back, &br)
	if br.StorageID != "s2" || br.CrashedStorageID != "s1" || br.State != wire.BrokerLive {
		t.Fatalf("back after a crash %+v", br)
	}
	// Placement sees it.
	raw, err := h.svc.store.PlacementInput(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range placementInput(raw).Brokers {
		if b.NodeID == "broker-1" && (b.CrashedStorageID != "s1" || b.StorageID != "s2" || b.RegisteredAtMs == 0) {
			t.Fatalf("placement broker %+v", b)
		}
	}
}
