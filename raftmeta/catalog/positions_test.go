package catalog

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/felixmq/felix/wire"
)

// positionsOfNode reads node's kept reports.
func positionsOfNode(t *testing.T, c *Catalog, node string) (BrokerPositions, bool) {
	t.Helper()
	all, err := c.Positions()
	if err != nil {
		t.Fatal(err)
	}
	for _, bp := range all {
		if bp.NodeID == node {
			return bp, true
		}
	}
	return BrokerPositions{}, false
}

func TestPositionReportsAreKeptStampedBoundedAndSetAsideOnANewIdentity(t *testing.T) {
	a := &applier{t: t, c: openTestCatalog(t)}
	a.record(CmdRegisterBroker(brokerReg("b1", "s1"), 1000))
	pos := func(durable uint64) []wire.ShardPosition {
		return []wire.ShardPosition{{Kind: "stream", TenantID: "t", Namespace: "ns", Name: "s", Shard: 1, Generation: 4, Durable: durable}}
	}
	if _, ok := positionsOfNode(t, a.c, "b1"); ok {
		t.Fatal("a record before any report")
	}
	a.record(CmdHeartbeatBrokerReport(wire.BrokerHeartbeat{NodeID: "b1", StorageID: "s1", Positions: pos(10)}, 2000))
	bp, _ := positionsOfNode(t, a.c, "b1")
	if want := (wire.PositionReport{StorageID: "s1", AtMs: 2000, Positions: pos(10)}); !reflect.DeepEqual(bp.Current, want) || bp.Previous != nil {
		t.Fatalf("kept %+v, want current %+v", bp, want)
	}
	// The broker record (what the registry and the cluster view read)
	// does not carry them.
	if brs, _ := a.c.Brokers(); len(brs) != 1 {
		t.Fatalf("brokers %+v", brs)
	}
	// A late heartbeat does not bring older positions back; a newer one
	// replaces them.
	a.record(CmdHeartbeatBrokerReport(wire.BrokerHeartbeat{NodeID: "b1", StorageID: "s1", Positions: pos(5)}, 1500))
	a.record(CmdHeartbeatBrokerReport(wire.BrokerHeartbeat{NodeID: "b1", StorageID: "s1", Positions: pos(12)}, 3000))
	if bp, _ := positionsOfNode(t, a.c, "b1"); bp.Current.Positions[0].Durable != 12 || bp.Current.AtMs != 3000 {
		t.Fatalf("kept %+v, want durable 12 at 3000", bp.Current)
	}
	// More than wire.MaxPositions is refused, and changes nothing.
	many := make([]wire.ShardPosition, wire.MaxPositions+1)
	a.refused(CmdHeartbeatBrokerReport(wire.BrokerHeartbeat{NodeID: "b1", StorageID: "s1", Positions: many}, 4000), ErrBadCommand, "at most")
	if bp, _ := positionsOfNode(t, a.c, "b1"); bp.Current.AtMs != 3000 {
		t.Fatalf("a refused report changed the record: %+v", bp.Current)
	}
	// Registering again under the same identity keeps the report.
	if _, err := a.apply(CmdMarkBrokerDown("b1", 3000, 30000)); err != nil {
		t.Fatal(err)
	}
	a.record(CmdRegisterBroker(brokerReg("b1", "s1"), 31000))
	if bp, _ := positionsOfNode(t, a.c, "b1"); bp.Current.StorageID != "s1" || bp.Previous != nil {
		t.Fatalf("after a restart with its storage: %+v", bp)
	}
	// Under a new identity it no longer counts as the current report: it
	// is set aside as the previous one, and the next report is current.
	if _, err := a.apply(CmdMarkBrokerDown("b1", 31000, 60000)); err != nil {
		t.Fatal(err)
	}
	a.record(CmdRegisterBroker(brokerReg("b1", "s2"), 61000))
	bp, _ = positionsOfNode(t, a.c, "b1")
	if bp.Current.StorageID != "" || len(bp.Current.Positions) != 0 || bp.Previous == nil || bp.Previous.StorageID != "s1" {
		t.Fatalf("after a new identity: %+v", bp)
	}
	a.record(CmdHeartbeatBrokerReport(wire.BrokerHeartbeat{NodeID: "b1", StorageID: "s2"}, 62000))
	bp, _ = positionsOfNode(t, a.c, "b1")
	if bp.Current.StorageID != "s2" || len(bp.Current.Positions) != 0 || bp.Previous == nil || bp.Previous.Positions[0].Durable != 12 {
		t.Fatalf("after the first report under s2: %+v", bp)
	}
	// A third identity drops the first.
	if _, err := a.apply(CmdMarkBrokerDown("b1", 62000, 90000)); err != nil {
		t.Fatal(err)
	}
	a.record(CmdRegisterBroker(brokerReg("b1", "s3"), 91000))
	if bp, _ := positionsOfNode(t, a.c, "b1"); bp.Previous == nil || bp.Previous.StorageID != "s2" {
		t.Fatalf("after a third identity: %+v", bp)
	}
	// Placement reads them with its input, and a snapshot carries them.
	in, err := a.c.PlacementInput()
	if err != nil || len(in.Positions) != 1 || in.Positions[0].NodeID != "b1" {
		t.Fatalf("placement input positions %+v, %v", in.Positions, err)
	}
	z := openTestCatalog(t)
	if err := z.Restore(bytes.NewReader(catalogSnapshotBytes(t, a.c))); err != nil {
		t.Fatal(err)
	}
	if got, _ := z.Positions(); !reflect.DeepEqual(got, in.Positions) {
		t.Fatalf("restored %+v, want %+v", got, in.Positions)
	}
}
