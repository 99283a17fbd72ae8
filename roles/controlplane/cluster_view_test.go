package controlplane

import (
	"fmt"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

const viewPath = "/v1/cluster/view"

// The view lists the registered brokers and every assignment under a
// tag; the tag is answered 304 while nothing a broker routes by changed
// (heartbeats included), and changes with a placement or a broker's state.
func TestHTTPClusterView(t *testing.T) {
	h := newHarness(t)
	for _, n := range []string{"b1", "b2"} {
		_, err := h.svc.RegisterBroker(bg, testRegistration(n, "sid-"+n))
		must(t, err)
	}
	ns := "/v1/tenants/default/namespaces/default"
	h.expect(201, "POST", ns+"/streams", h.admin, map[string]any{"stream": "s", "shards": 4}, nil)
	h.expect(201, "POST", ns+"/caches", h.admin, map[string]any{"cache": "c"}, nil)
	p := &placer{store: h.svc.store, log: quietLogger(), cfg: PlacementConfig{Interval: time.Second}}
	must(t, p.pass(bg))

	var v wire.ClusterView
	h.expect(200, "GET", viewPath, h.admin, nil, &v)
	id, err := h.svc.ClusterID(bg)
	must(t, err)
	if v.ClusterID != id || v.Tag == "" || v.PlacementRevision != 1 || len(v.Brokers) != 2 || len(v.Assignments) != 5 {
		t.Fatalf("view: %+v", v)
	}
	owners := map[string]int{}
	for _, a := range v.Assignments {
		owners[a.NodeID]++
		if a.Generation == 0 || a.Unavailable != "" {
			t.Fatalf("assignment not served: %+v", a)
		}
	}
	if owners["b1"]+owners["b2"] != 5 || v.Assignments[0].Kind != wire.PlacementCache {
		t.Fatalf("assignments (cache first, in key order): %+v", v.Assignments)
	}

	// Unchanged, and after heartbeats only: 304 without a body.
	notModified := func(tag string) {
		t.Helper()
		status, body := h.do("GET", viewPath+"?known="+tag, h.admin, nil)
		if status != 304 || len(body) != 0 {
			t.Fatalf("known=%s: status %d, body %q; want 304 and none", tag, status, body)
		}
	}
	notModified(v.Tag)
	time.Sleep(2 * time.Millisecond) // a later heartbeat time
	_, err = h.svc.HeartbeatBroker(bg, wire.BrokerHeartbeat{NodeID: "b1", StorageID: "sid-b1"})
	must(t, err)
	notModified(v.Tag)
	if _, changed, err := h.svc.ClusterView(bg, v.Tag); err != nil || changed {
		t.Fatalf("in process after a heartbeat: changed %v, %v", changed, err)
	}

	// A stale tag gets the view.
	var again wire.ClusterView
	h.expect(200, "GET", viewPath+"?known=0-stale", h.admin, nil, &again)
	if again.Tag != v.Tag {
		t.Fatalf("tag changed by a heartbeat: %s then %s", v.Tag, again.Tag)
	}

	// A broker marked down changes the tag.
	br := brokerState(t, h.svc.store, "b2")
	down, err := h.svc.store.MarkBrokerDown(bg, "b2", br.LastHeartbeatMs, br.LastHeartbeatMs+1)
	if err != nil || !down {
		t.Fatalf("mark down: %v %v", down, err)
	}
	var afterDown wire.ClusterView
	h.expect(200, "GET", viewPath+"?known="+v.Tag, h.admin, nil, &afterDown)
	if afterDown.Tag == v.Tag || afterDown.PlacementRevision != 1 {
		t.Fatalf("after b2 went down: tag %s (was %s), revision %d", afterDown.Tag, v.Tag, afterDown.PlacementRevision)
	}
	for _, b := range afterDown.Brokers {
		if b.NodeID == "b2" && b.State != wire.BrokerDown {
			t.Fatalf("b2: %+v", b)
		}
	}

	// The placement pass that follows changes it again; a deregistered
	// broker is left out.
	must(t, p.pass(bg))
	must(t, h.svc.DeregisterBroker(bg, "b2"))
	var last wire.ClusterView
	h.expect(200, "GET", viewPath+"?known="+afterDown.Tag, h.admin, nil, &last)
	if last.Tag == afterDown.Tag || last.PlacementRevision != 2 || len(last.Brokers) != 1 || last.Brokers[0].NodeID != "b1" {
		t.Fatalf("after a pass and a deregistration: %+v", last)
	}

	// Authorized like the broker registry.
	tenantAdmin := h.token("default", "ta", "tenant.manage:tenant:default")
	h.expectError(403, "forbidden", "GET", viewPath, tenantAdmin, nil)
	h.expectError(401, "unauthorized", "GET", viewPath, "", nil)
}

// Registration and heartbeat answers carry the expiry timeout once the
// expiry loop is configured.
func TestRegistryAnswersCarryExpiryTimeout(t *testing.T) {
	h := newHarness(t)
	br, err := h.svc.RegisterBroker(bg, testRegistration("b1", "sid-b1"))
	must(t, err)
	if br.ExpiryTimeoutMs != 0 {
		t.Fatalf("without an expiry loop: %d", br.ExpiryTimeoutMs)
	}
	h.svc.StartExpiry(ExpiryConfig{Timeout: 1234 * time.Millisecond, Sweep: time.Hour})
	var got wire.Broker
	h.expect(200, "POST", "/v1/brokers/b1/heartbeat", h.admin, wire.BrokerHeartbeat{StorageID: "sid-b1"}, &got)
	if got.ExpiryTimeoutMs != 1234 {
		t.Fatalf("heartbeat answer: %+v", got)
	}
	h.expect(200, "POST", "/v1/brokers", h.admin, testRegistration("b1", "sid-b1"), &got)
	if got.ExpiryTimeoutMs != 1234 {
		t.Fatalf("registration answer: %+v", got)
	}
}

// With the placement loop running, a create answers once its shards are
// placed: the placement read right after it names an owner for each.
func TestCreateWaitsForPlacement(t *testing.T) {
	h := newHarness(t)
	_, err := h.svc.RegisterBroker(bg, testRegistration("b1", "sid-b1"))
	must(t, err)
	h.svc.StartPlacement(PlacementConfig{Interval: time.Hour}) // passes only when woken
	ns := "/v1/tenants/default/namespaces/default"
	check := func(kind, name string, shards int) {
		t.Helper()
		var v wire.PlacementView
		h.expect(200, "GET", fmt.Sprintf("/v1/placement/%ss/default/default/%s", kind, name), h.admin, nil, &v)
		if len(v.Shards) != shards {
			t.Fatalf("%s %s: %+v", kind, name, v)
		}
		for _, a := range v.Shards {
			if a.NodeID != "b1" || a.Generation == 0 {
				t.Fatalf("%s %s shard %d not placed when the create answered: %+v", kind, name, a.Shard, a)
			}
		}
	}
	for i := range 3 {
		name := fmt.Sprintf("s%d", i)
		h.expect(201, "POST", ns+"/streams", h.admin, map[string]any{"stream": name, "shards": 3}, nil)
		check("stream", name, 3)
	}
	h.expect(201, "POST", ns+"/caches", h.admin, map[string]any{"cache": "c"}, nil)
	check("cache", "c", 1)
	h.expect(201, "POST", ns+"/batch", h.admin, map[string]any{
		"streams": []any{map[string]any{"stream": "bs", "shards": 2}},
		"caches":  []any{map[string]any{"cache": "bc"}},
	}, nil)
	check("stream", "bs", 2)
	check("cache", "bc", 1)
}

// Every member answers the same view, a follower included (after a
// barrier, so it holds the leader's last writes), and every member's
// registry answers carry the expiry timeout.
func TestClusterViewOnEveryMember(t *testing.T) {
	g := openTestGroup(t, 3)
	leader := g.leader(t)
	follower := leader%3 + 1
	svcs := map[uint64]*Service{}
	for _, id := range []uint64{leader, follower} {
		svc, err := New(Config{Logger: quietLogger()}, g.stores[id])
		must(t, err)
		svc.StartExpiry(ExpiryConfig{Timeout: 2500 * time.Millisecond, Sweep: time.Hour})
		t.Cleanup(svc.expiry.stop) // the group closes the stores
		svcs[id] = svc
	}
	br, err := svcs[follower].RegisterBroker(bg, testRegistration("b1", "sid-b1"))
	must(t, err)
	if br.ExpiryTimeoutMs != 2500 {
		t.Fatalf("registration answered by a follower: %+v", br)
	}
	placeCatalog(t, g.stores[leader], 2)
	p := &placer{store: g.stores[leader], log: quietLogger(), cfg: PlacementConfig{Interval: time.Second}}
	must(t, p.pass(bg))
	fv, changed, err := svcs[follower].ClusterView(bg, "")
	if err != nil || !changed || len(fv.Assignments) != 3 || len(fv.Brokers) != 1 || fv.PlacementRevision != 1 {
		t.Fatalf("follower's view: %+v %v %v", fv, changed, err)
	}
	lv, _, err := svcs[leader].ClusterView(bg, "")
	must(t, err)
	if lv.Tag != fv.Tag || lv.ClusterID != fv.ClusterID {
		t.Fatalf("tags differ: leader %s %s, follower %s %s", lv.Tag, lv.ClusterID, fv.Tag, fv.ClusterID)
	}
	if _, changed, err := svcs[follower].ClusterView(bg, lv.Tag); err != nil || changed {
		t.Fatalf("follower with the leader's tag: %v %v", changed, err)
	}
}

// A view watch answers at once for a stale tag, holds while the tag is
// current (heartbeats do not end it), answers with the new tag as soon
// as a broker registers, answers 304 once its wait passed, and ends
// when the service stops waiting.
func TestClusterViewWatch(t *testing.T) {
	h := newHarness(t)
	_, err := h.svc.RegisterBroker(bg, testRegistration("b1", "sid-b1"))
	must(t, err)
	var v wire.ClusterView
	h.expect(200, "GET", viewPath, h.admin, nil, &v)

	var ch viewChange
	h.expect(200, "GET", viewPath+"/changes?known=0-stale&wait_ms=5000", h.admin, nil, &ch)
	if ch.Tag != v.Tag {
		t.Fatalf("stale tag answered %q, want %q", ch.Tag, v.Tag)
	}
	if status, body := h.do("GET", viewPath+"/changes?known="+v.Tag+"&wait_ms=20", h.admin, nil); status != 304 || len(body) != 0 {
		t.Fatalf("current tag after its wait: %d %q, want 304", status, body)
	}
	for _, q := range []string{"wait_ms=-1", "wait_ms=x", "wait_ms=20001"} {
		h.expect(400, "GET", viewPath+"/changes?known="+v.Tag+"&"+q, h.admin, nil, nil)
	}

	type answer struct {
		tag     string
		changed bool
		err     error
	}
	got := make(chan answer, 1)
	go func() {
		tag, changed, err := h.svc.WaitClusterViewChange(bg, v.Tag, 10*time.Second)
		got <- answer{tag, changed, err}
	}()
	time.Sleep(50 * time.Millisecond)
	_, err = h.svc.HeartbeatBroker(bg, wire.BrokerHeartbeat{NodeID: "b1", StorageID: "sid-b1"})
	must(t, err)
	select {
	case a := <-got:
		t.Fatalf("a heartbeat ended the wait: %+v", a)
	case <-time.After(100 * time.Millisecond):
	}
	_, err = h.svc.RegisterBroker(bg, testRegistration("b2", "sid-b2"))
	must(t, err)
	var a answer
	select {
	case a = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("a registration did not end the wait")
	}
	var after wire.ClusterView
	h.expect(200, "GET", viewPath, h.admin, nil, &after)
	if a.err != nil || !a.changed || a.tag != after.Tag || a.tag == v.Tag {
		t.Fatalf("wait answered %+v; the view's tag is %s (was %s)", a, after.Tag, v.Tag)
	}

	go func() {
		tag, changed, err := h.svc.WaitClusterViewChange(bg, after.Tag, 10*time.Second)
		got <- answer{tag, changed, err}
	}()
	time.Sleep(50 * time.Millisecond)
	h.svc.EndWaits()
	select {
	case a = <-got:
		if a.changed || a.err != nil {
			t.Fatalf("ended wait answered %+v, want unchanged", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("EndWaits did not end a held wait")
	}
	if _, changed, err := h.svc.WaitClusterViewChange(bg, after.Tag, 10*time.Second); changed || err != nil {
		t.Fatalf("a wait after EndWaits: %v %v", changed, err)
	}
}
