package catalog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/felixmq/felix/wire"
)

func streamShard(name string, shard uint32, node string, gen uint64) wire.ShardAssignment {
	return wire.ShardAssignment{Kind: wire.PlacementStream, TenantID: "t", Namespace: "ns", Name: name,
		Shard: shard, Incarnation: "i1", NodeID: node, Generation: gen, Consistency: "leader"}
}

// placementScript places two shards of "a" and one of cache "c", then
// moves one, drops "a" and checks a stale pass is refused in between.
func placementScript() [][]byte {
	cache := wire.ShardAssignment{Kind: wire.PlacementCache, TenantID: "t", Namespace: "ns", Name: "c", NodeID: "b2", Generation: 3}
	return [][]byte{
		CmdRegisterBroker(brokerReg("b1", "s1"), 10),
		CmdRegisterBroker(brokerReg("b2", "s2"), 10),
		CmdApplyPlacement(PlacementChange{LastGeneration: 3,
			Put: []wire.ShardAssignment{streamShard("a", 0, "b1", 1), streamShard("a", 1, "b2", 2), cache}}),
		CmdApplyPlacement(PlacementChange{LastGeneration: 3}), // stale: revision 0
		CmdApplyPlacement(PlacementChange{ExpectRevision: 1, ExpectLastGeneration: 3, LastGeneration: 4,
			Put: []wire.ShardAssignment{streamShard("a", 1, "b1", 4)}}),
		CmdApplyPlacement(PlacementChange{ExpectRevision: 2, ExpectLastGeneration: 4, LastGeneration: 4,
			Drop: []ShardKey{KeyOf(streamShard("a", 0, "", 0)), KeyOf(streamShard("a", 1, "", 0))}}),
	}
}

func TestPlacementApply(t *testing.T) {
	a := &applier{t: t, c: openTestCatalog(t)}
	cmds := placementScript()
	for _, cmd := range cmds[:3] {
		if _, err := a.apply(cmd); err != nil {
			t.Fatal(err)
		}
	}
	got, gen, err := a.c.ResourcePlacement(wire.PlacementStream, "t", "ns", "a")
	if err != nil || gen != 3 || len(got) != 2 || got[0].NodeID != "b1" || got[1].NodeID != "b2" || got[1].Generation != 2 {
		t.Fatalf("stream a: %+v gen %d %v", got, gen, err)
	}
	a.refused(cmds[3], ErrConflict, "stale placement", "revision 1")
	if res, err := a.apply(cmds[4]); err != nil || string(res) != "2" {
		t.Fatalf("move: %q %v", res, err)
	}
	brokers, err := a.c.Brokers()
	if err != nil || brokers[0].ShardsOwned != 2 || brokers[1].ShardsOwned != 1 {
		t.Fatalf("shards owned: %+v %v", brokers, err)
	}
	if _, err := a.apply(cmds[5]); err != nil {
		t.Fatal(err)
	}
	st, err := a.c.Placement()
	if err != nil || len(st.Assignments) != 1 || st.Assignments[0].Kind != wire.PlacementCache || st.LastGeneration != 4 || st.Revision != 3 {
		t.Fatalf("after drop: %+v %v", st, err)
	}
}

func TestPlacementRefusesBadChanges(t *testing.T) {
	a := &applier{t: t, c: openTestCatalog(t)}
	a.refused(CmdApplyPlacement(PlacementChange{LastGeneration: 1, Put: []wire.ShardAssignment{streamShard("a", 0, "b1", 2)}}),
		ErrBadCommand, "above the counter")
	a.refused(CmdApplyPlacement(PlacementChange{LastGeneration: 1, Put: []wire.ShardAssignment{streamShard("a", 0, "", 0)}}),
		ErrBadCommand, "no owner")
	a.refused(CmdApplyPlacement(PlacementChange{LastGeneration: 1, Put: []wire.ShardAssignment{{Kind: "topic", TenantID: "t", Namespace: "n", Name: "x", NodeID: "b"}}}),
		ErrBadCommand, "required")
	if _, err := a.apply(CmdApplyPlacement(PlacementChange{LastGeneration: 5})); err != nil {
		t.Fatal(err)
	}
	a.refused(CmdApplyPlacement(PlacementChange{ExpectRevision: 1, ExpectLastGeneration: 5, LastGeneration: 4}),
		ErrBadCommand, "go back")
	// A refused command leaves nothing behind.
	st, err := a.c.Placement()
	if err != nil || len(st.Assignments) != 0 || st.LastGeneration != 5 || st.Revision != 1 {
		t.Fatalf("%+v %v", st, err)
	}
}

// Two members applying the same commands, one at a time and in one
// batch, end with byte-identical snapshots.
func TestPlacementDeterministic(t *testing.T) {
	one, two := &applier{t: t, c: openTestCatalog(t)}, &applier{t: t, c: openTestCatalog(t)}
	for _, cmd := range placementScript() {
		_, err1 := one.apply(cmd)
		_, err2 := two.apply(cmd)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("outcomes differ: %v, %v", err1, err2)
		}
	}
	if !bytes.Equal(catalogSnapshotBytes(t, one.c), catalogSnapshotBytes(t, two.c)) {
		t.Fatal("snapshots differ")
	}
}

func TestPlacementInputAndSignal(t *testing.T) {
	a := &applier{t: t, c: openTestCatalog(t)}
	changed := a.c.PlacementInputsChanged()
	if a.c.PlacementInputsChanged() != changed {
		t.Fatal("a second call gave another channel")
	}
	for _, cmd := range [][]byte{
		CmdWrite(wire.KindTenants, ModeCreate, wire.CatalogItem{Tenant: &wire.Tenant{TenantID: "t"}}),
		CmdWrite(wire.KindNamespaces, ModeCreate, wire.CatalogItem{Namespace: &wire.Namespace{TenantID: "t", Namespace: "ns"}}),
		CmdWrite(wire.KindStreams, ModeCreate, wire.CatalogItem{Stream: &wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s", Shards: 4}}),
		CmdWrite(wire.KindCaches, ModeCreate, wire.CatalogItem{Cache: &wire.CacheSpec{TenantID: "t", Namespace: "ns", Cache: "c"}}),
	} {
		if _, err := a.apply(cmd); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-changed:
	default:
		t.Fatal("no signal after a stream was created")
	}
	if _, err := a.apply(CmdHeartbeatBroker("nobody", "s", 1)); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	select {
	case <-changed:
		t.Fatal("a heartbeat signalled a placement input change")
	default:
	}
	in, err := a.c.PlacementInput()
	if err != nil || len(in.Streams) != 1 || in.Streams[0].Shards != 4 || len(in.Caches) != 1 || len(in.Brokers) != 0 {
		t.Fatalf("%+v %v", in, err)
	}
}

// ClusterChanged's channel closes once a command that may change the
// cluster view commits, and only then; a stream write leaves it open.
func TestClusterChangedClosesOnViewInputs(t *testing.T) {
	a := &applier{t: t, c: openTestCatalog(t)}
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	ch := a.c.ClusterChanged()
	if a.c.ClusterChanged() != ch {
		t.Fatal("a second call gave another channel")
	}
	if _, err := a.apply(CmdWrite(wire.KindTenants, ModeCreate, wire.CatalogItem{Tenant: &wire.Tenant{TenantID: "t"}})); err != nil {
		t.Fatal(err)
	}
	if closed(ch) {
		t.Fatal("a tenant write closed the channel")
	}
	a.record(CmdRegisterBroker(brokerReg("b1", "s1", wire.FleetJumpHashRouting), 1000))
	if !closed(ch) {
		t.Fatal("a registration left the channel open")
	}
	next := a.c.ClusterChanged()
	if next == ch || closed(next) {
		t.Fatal("no fresh channel after the close")
	}
	if _, err := a.apply(CmdMarkBrokerDown("b1", 1000, 20000)); err != nil {
		t.Fatal(err)
	}
	if !closed(next) {
		t.Fatal("marking a broker down left the channel open")
	}
}
