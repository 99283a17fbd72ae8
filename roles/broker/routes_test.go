package broker

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// sa is an assignment of shard n of stream t/ns/name (kind "cache" when
// name starts with "c").
func sa(name string, n uint32, node string, gen uint64, unavailable string) wire.ShardAssignment {
	kind := wire.PlacementStream
	if name[0] == 'c' {
		kind = wire.PlacementCache
	}
	return wire.ShardAssignment{Kind: kind, TenantID: "t", Namespace: "ns", Name: name, Shard: n, Incarnation: "i",
		NodeID: node, Generation: gen, Unavailable: unavailable}
}

func testBrokers() []wire.Broker {
	br := func(id string, state wire.BrokerState, addrs ...string) wire.Broker {
		return wire.Broker{BrokerRegistration: wire.BrokerRegistration{NodeID: id, ClientAddrs: addrs, PeerAddr: id + ":peer"}, State: state}
	}
	return []wire.Broker{br("b1", wire.BrokerLive, "b1:5000"), br("b2", wire.BrokerLive, "b2:5000", "b2:6000"),
		br("b3", wire.BrokerDown, "b3:5000"), br("b4", wire.BrokerLive)}
}

func testView(tag string, as ...wire.ShardAssignment) wire.ClusterView {
	return wire.ClusterView{Tag: tag, Brokers: testBrokers(), Assignments: as}
}

// names lists owned shards as "name/shard@generation", sorted.
func names(os []OwnedShard) []string {
	var out []string
	for _, o := range os {
		out = append(out, o.Name+"/"+string(rune('0'+o.Shard))+"@"+string(rune('0'+o.Generation)))
	}
	slices.Sort(out)
	return out
}

func TestRoutesApplyGainedAndLost(t *testing.T) {
	rt := newRouteTable("b1", false)
	if rt.Tag() != "" {
		t.Fatalf("tag before a view: %q", rt.Tag())
	}
	gained, lost := rt.Apply(testView("v1", sa("s", 0, "b1", 1, ""), sa("s", 1, "b2", 2, ""), sa("c", 0, "b1", 3, ""),
		sa("s", 2, "b1", 4, wire.UnavailableOwnerDown)))
	if g := names(gained); !slices.Equal(g, []string{"c/0@3", "s/0@1"}) || len(lost) != 0 || rt.Tag() != "v1" {
		t.Fatalf("first view: gained %v, lost %v, tag %s", g, names(lost), rt.Tag())
	}
	// s/0 stays here at a new generation (lost, then gained), s/1 comes
	// here, c/0 goes to b2, s/2 is served again.
	gained, lost = rt.Apply(testView("v2", sa("s", 0, "b1", 5, ""), sa("s", 1, "b1", 6, ""), sa("c", 0, "b2", 7, ""),
		sa("s", 2, "b1", 4, "")))
	if g, l := names(gained), names(lost); !slices.Equal(g, []string{"s/0@5", "s/1@6", "s/2@4"}) || !slices.Equal(l, []string{"c/0@3", "s/0@1"}) {
		t.Fatalf("second view: gained %v, lost %v", g, l)
	}
	for _, o := range lost {
		if o.Name == "c" && (o.To.NodeID != "b2" || o.To.Generation != 7 || o.Kind != wire.ShardKindCache) {
			t.Fatalf("lost cache shard: %+v", o)
		}
	}
	// The same view again changes nothing; a shard that leaves the view
	// or stops being served is lost.
	if gained, lost = rt.Apply(testView("v2", sa("s", 0, "b1", 5, ""), sa("s", 1, "b1", 6, ""), sa("c", 0, "b2", 7, ""),
		sa("s", 2, "b1", 4, ""))); len(gained)+len(lost) != 0 {
		t.Fatalf("same view: gained %v, lost %v", names(gained), names(lost))
	}
	gained, lost = rt.Apply(testView("v3", sa("s", 0, "b1", 5, wire.UnavailableOwnerDown), sa("s", 2, "b1", 4, "")))
	if l := names(lost); len(gained) != 0 || !slices.Equal(l, []string{"s/0@5", "s/1@6"}) {
		t.Fatalf("third view: gained %v, lost %v", names(gained), l)
	}
}

func TestRoutesRoute(t *testing.T) {
	rt := newRouteTable("b1", false)
	if r := rt.Route(wire.ShardKindStream, "t", "ns", "s", 0); r.Unavailable != unavailableNotReady {
		t.Fatalf("before a view: %+v", r)
	}
	rt.Apply(testView("v1", sa("s", 0, "b1", 1, ""), sa("s", 1, "b2", 2, ""), sa("s", 2, "b3", 3, wire.UnavailableOwnerDown),
		sa("s", 3, "", 0, wire.UnavailableNotAssigned), sa("s", 4, "b4", 5, ""), sa("c", 0, "b2", 6, "")))
	route := func(n uint32) Route { return rt.Route(wire.ShardKindStream, "t", "ns", "s", n) }
	if r := route(0); !r.Local || r.Generation != 1 || r.Err(wire.ShardKindStream, "s", 0) != nil {
		t.Fatalf("local: %+v", r)
	}
	r := route(1)
	if r.Local || r.NodeID != "b2" || r.Addr != "b2:5000" || r.PeerAddr != "b2:peer" || r.Generation != 2 {
		t.Fatalf("remote: %+v", r)
	}
	var we *wire.Error
	if err := r.Err(wire.ShardKindStream, "s", 1); !errors.As(error(err), &we) || we.Code != wire.CodeNotLeader {
		t.Fatalf("remote refusal: %v", err)
	}
	for n, want := range map[uint32]string{2: wire.UnavailableOwnerDown, 3: wire.UnavailableNotAssigned, 9: wire.UnavailableNotAssigned} {
		if r := route(n); r.Local || r.NodeID != "" || r.Unavailable != want {
			t.Fatalf("shard %d: %+v, want %s", n, r, want)
		}
		if err := route(n).Err(wire.ShardKindStream, "s", n); err == nil || err.Code != wire.CodeShardUnavailable {
			t.Fatalf("shard %d refusal: %v", n, err)
		}
	}
	if r := rt.Route(wire.ShardKindCache, "t", "ns", "c", 0); r.NodeID != "b2" {
		t.Fatalf("cache shard: %+v", r)
	}
	if r := rt.Route(wire.ShardKindCache, "t", "ns", "s", 0); r.Unavailable != wire.UnavailableNotAssigned {
		t.Fatalf("a stream's shard asked as a cache: %+v", r)
	}

	owners := rt.Owners(wire.ShardKindStream, "t", "ns", "s", 6)
	want := []wire.ShardOwner{
		{Shard: 0, NodeID: "b1", Addr: "b1:5000", Generation: 1},
		{Shard: 1, NodeID: "b2", Addr: "b2:5000", Generation: 2},
		{Shard: 2, Generation: 3, Unavailable: wire.UnavailableOwnerDown},
		{Shard: 3, Unavailable: wire.UnavailableNotAssigned},
		{Shard: 4, Generation: 5, Unavailable: unavailableNotReady}, // owner without a client address
		{Shard: 5, Unavailable: wire.UnavailableNotAssigned},
	}
	if !slices.Equal(owners, want) {
		t.Fatalf("owners:\n got %+v\nwant %+v", owners, want)
	}
	top := rt.Topology()
	if !slices.Equal(top, []wire.TopologyBroker{{NodeID: "b1", Addr: "b1:5000"}, {NodeID: "b2", Addr: "b2:5000"}}) {
		t.Fatalf("topology (serving brokers with an address): %+v", top)
	}
	if b, ok := rt.Broker("b3"); !ok || b.State != wire.BrokerDown {
		t.Fatalf("broker b3: %+v %v", b, ok)
	}
}

// A lapsed lease makes the shards this broker owns not_ready (others'
// routes are unchanged); a renewal restores them. An older renewal never
// shortens the lease; expiry 0 keeps none.
func TestRoutesLease(t *testing.T) {
	rt := newRouteTable("b1", false)
	base := time.Unix(1000, 0)
	now := base
	rt.now = func() time.Time { return now }
	rt.Apply(testView("v1", sa("s", 0, "b1", 1, ""), sa("s", 1, "b2", 2, "")))
	local := func() Route { return rt.Route(wire.ShardKindStream, "t", "ns", "s", 0) }
	if !local().Local || !rt.leaseHeld() {
		t.Fatal("without a renewal no lease is kept: the shard is served")
	}
	rt.Renew(base, 10*time.Second)
	now = base.Add(9 * time.Second)
	if !local().Local {
		t.Fatalf("within the lease: %+v", local())
	}
	now = base.Add(10 * time.Second)
	if r := local(); r.Local || r.Unavailable != unavailableNotReady || r.Generation != 1 {
		t.Fatalf("lease lapsed: %+v", r)
	}
	// A broker whose lease lapsed may have been deposed: it does not say
	// that nobody serves the shard.
	if err := local().Err(wire.ShardKindStream, "s", 0); err == nil || err.Code != wire.CodeShardUnavailable ||
		strings.Contains(err.Message, "not served by any broker") || !strings.Contains(err.Message, "lease lapsed") {
		t.Fatalf("refusal with the lease lapsed: %v", err)
	}
	if r := rt.Route(wire.ShardKindStream, "t", "ns", "s", 1); r.NodeID != "b2" {
		t.Fatalf("another broker's shard with the lease lapsed: %+v", r)
	}
	if o := rt.Owners(wire.ShardKindStream, "t", "ns", "s", 1); o[0].Unavailable != unavailableNotReady {
		t.Fatalf("owners with the lease lapsed: %+v", o)
	}
	rt.Renew(base.Add(5*time.Second), 10*time.Second)
	if !local().Local {
		t.Fatalf("renewed: %+v", local())
	}
	rt.Renew(base, 10*time.Second) // an older answer arriving late
	if !local().Local {
		t.Fatal("an older renewal shortened the lease")
	}
	now = base.Add(time.Hour)
	rt.Renew(base, 0)
	if !local().Local {
		t.Fatal("expiry 0 keeps no lease: the shard is served")
	}
}

func TestRoutesStandalone(t *testing.T) {
	rt := newRouteTable("b1", true)
	rt.now = func() time.Time { return time.Unix(1<<40, 0) }
	rt.Renew(time.Unix(0, 0), time.Second) // lapsed long ago: ignored standalone
	if r := rt.Route(wire.ShardKindStream, "t", "ns", "s", 7); !r.Local || r.Generation != 0 {
		t.Fatalf("standalone route: %+v", r)
	}
	if o := rt.Owners(wire.ShardKindStream, "t", "ns", "s", 4); !slices.Equal(o, []wire.ShardOwner{{Shard: 0}}) {
		t.Fatalf("standalone owners: %+v", o)
	}
	if top := rt.Topology(); len(top) != 0 {
		t.Fatalf("standalone topology: %+v", top)
	}
}
