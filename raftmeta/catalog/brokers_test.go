package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/felixmq/felix/wire"
)

// brokerReg is a registration of node with storage identity sid.
func brokerReg(node, sid string, features ...string) wire.BrokerRegistration {
	return wire.BrokerRegistration{NodeID: node, ClientAddrs: []string{"127.0.0.1:5000"}, Zone: "z1",
		Features: features, StorageID: sid}
}

// applier applies commands at increasing indexes.
type applier struct {
	t   *testing.T
	c   *Catalog
	idx uint64
}

func (a *applier) apply(cmd []byte) ([]byte, error) {
	a.idx++
	return a.c.Apply(a.idx, cmd)
}

func (a *applier) record(cmd []byte) wire.Broker {
	a.t.Helper()
	res, err := a.apply(cmd)
	if err != nil {
		a.t.Fatal(err)
	}
	var br wire.Broker
	if err := json.Unmarshal(res, &br); err != nil {
		a.t.Fatalf("result %q: %v", res, err)
	}
	return br
}

func (a *applier) refused(cmd []byte, kind error, words ...string) {
	a.t.Helper()
	_, err := a.apply(cmd)
	if !errors.Is(err, kind) {
		a.t.Fatalf("got %v, want %v", err, kind)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			a.t.Fatalf("error %q does not say %q", err, w)
		}
	}
}

func TestBrokerRegisterAndRestart(t *testing.T) {
	a := &applier{t: t, c: openTestCatalog(t)}
	br := a.record(CmdRegisterBroker(brokerReg("b1", "s1", wire.FleetJumpHashRouting), 1000))
	if br.State != wire.BrokerLive || br.RegisteredAtMs != 1000 || br.LastHeartbeatMs != 1000 || br.Registrations != 1 || br.Zone != "z1" {
		t.Fatalf("registered %+v", br)
	}
	// The same broker restarting (same storage identity) registers again.
	if br = a.record(CmdRegisterBroker(brokerReg("b1", "s1", wire.FleetJumpHashRouting), 2000)); br.Registrations != 2 || br.RegisteredAtMs != 2000 {
		t.Fatalf("re-registered %+v", br)
	}
	// Another broker under the same node id while the first is live.
	a.refused(CmdRegisterBroker(brokerReg("b1", "s2", wire.FleetJumpHashRouting), 2500), ErrConflict, "duplicate node id", "s1", "s2")
	a.refused(CmdRegisterBroker(wire.BrokerRegistration{NodeID: "b2"}, 1), ErrBadCommand)
	list, err := a.c.Brokers()
	if err != nil || len(list) != 1 || list[0].StorageID != "s1" {
		t.Fatalf("brokers %+v %v", list, err)
	}
}

func TestBrokerHeartbeatRefusals(t *testing.T) {
	a := &applier{t: t, c: openTestCatalog(t)}
	a.refused(CmdHeartbeatBroker("ghost", "s1", 10), ErrNotFound, `"ghost" is not registered`)
	a.record(CmdRegisterBroker(brokerReg("b1", "s1"), 1000))
	if br := a.record(CmdHeartbeatBroker("b1", "s1", 3000)); br.LastHeartbeatMs != 3000 {
		t.Fatalf("heartbeat %+v", br)
	}
	if br := a.record(CmdHeartbeatBroker("b1", "s1", 2000)); br.LastHeartbeatMs != 3000 {
		t.Fatalf("a late heartbeat moved the time back: %+v", br)
	}
	a.refused(CmdHeartbeatBroker("b1", "s-old", 4000), ErrConflict, "storage identity s1, not s-old")
	a.refused(CmdDeregisterBroker("ghost"), ErrNotFound, "ghost")
	if _, err := a.apply(CmdDeregisterBroker("b1")); err != nil {
		t.Fatal(err)
	}
	a.refused(CmdHeartbeatBroker("b1", "s1", 5000), ErrConflict, "deregistered", "register again")
	// A deregistered broker may register again, under any identity.
	if br := a.record(CmdRegisterBroker(brokerReg("b1", "s9"), 6000)); br.State != wire.BrokerLive || br.StorageID != "s9" {
		t.Fatalf("re-registered %+v", br)
	}
}

func TestBrokerMarkDown(t *testing.T) {
	a := &applier{t: t, c: openTestCatalog(t)}
	a.record(CmdRegisterBroker(brokerReg("b1", "s1"), 1000))
	a.record(CmdHeartbeatBroker("b1", "s1", 2000))
	// The leader judged the heartbeat of 1000; one came since: left live.
	if res, err := a.apply(CmdMarkBrokerDown("b1", 1000, 20000)); err != nil || string(res) != "0" {
		t.Fatalf("stale mark down: %q %v", res, err)
	}
	if res, err := a.apply(CmdMarkBrokerDown("ghost", 0, 20000)); err != nil || string(res) != "0" {
		t.Fatalf("mark down of an unknown broker: %q %v", res, err)
	}
	if res, err := a.apply(CmdMarkBrokerDown("b1", 2000, 21000)); err != nil || string(res) != "1" {
		t.Fatalf("mark down: %q %v", res, err)
	}
	list, _ := a.c.Brokers()
	if list[0].State != wire.BrokerDown || list[0].DownAtMs != 21000 {
		t.Fatalf("after mark down %+v", list[0])
	}
	a.refused(CmdHeartbeatBroker("b1", "s1", 22000), ErrConflict, "marked down")
	// Down, its node id may come back under a new storage identity.
	if br := a.record(CmdRegisterBroker(brokerReg("b1", "s2"), 23000)); br.State != wire.BrokerLive || br.DownAtMs != 0 {
		t.Fatalf("registered after down %+v", br)
	}
}

func featureState(t *testing.T, c *Catalog) map[string]wire.FleetFeature {
	t.Helper()
	view, err := c.FleetFeatures()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]wire.FleetFeature{}
	for _, f := range view.Features {
		out[f.Name] = f
	}
	return out
}

func TestFleetNewClusterFinalizesAtFirstRegistration(t *testing.T) {
	a := &applier{t: t, c: openTestCatalog(t)}
	all := slices.Clone(wire.FleetFeatures)
	br := a.record(CmdRegisterBroker(brokerReg("b1", "s1", all...), 1000))
	if len(br.FinalizedFeatures) != len(all)-1 || slices.Contains(br.FinalizedFeatures, wire.FleetPublisherPrincipal) {
		t.Fatalf("the registration's answer names finalized %v", br.FinalizedFeatures)
	}
	if br = a.record(CmdHeartbeatBroker("b1", "s1", 1100)); len(br.FinalizedFeatures) != len(all)-1 {
		t.Fatalf("the heartbeat's answer names finalized %v", br.FinalizedFeatures)
	}
	if list, _ := a.c.Brokers(); list[0].FinalizedFeatures != nil {
		t.Fatalf("the stored record holds the gate: %+v", list[0])
	}
	fs := featureState(t, a.c)
	for _, name := range wire.FleetFeatures {
		want := name != wire.FleetPublisherPrincipal
		if fs[name].Finalized != want || !fs[name].Supported {
			t.Fatalf("%s: %+v, want finalized=%v", name, fs[name], want)
		}
	}
	// A broker without a finalized feature is refused, by name.
	a.refused(CmdRegisterBroker(brokerReg("b2", "s2", wire.FleetJumpHashRouting), 2000), ErrConflict, "b2", wire.FleetMajorityAck)
	// One with everything but publisher_principal joins; then that
	// feature cannot be finalized, and the refusal names the broker.
	a.record(CmdRegisterBroker(brokerReg("b3", "s3", all[:len(all)-1]...), 3000))
	a.refused(CmdFinalizeFeatures([]string{wire.FleetPublisherPrincipal}), ErrConflict, "b3", wire.FleetPublisherPrincipal)
	a.refused(CmdFinalizeFeatures([]string{"warp_drive"}), ErrNotFound, "warp_drive")
	if fs = featureState(t, a.c); !slices.Equal(fs[wire.FleetPublisherPrincipal].Missing, []string{"b3"}) {
		t.Fatalf("publisher_principal %+v", fs[wire.FleetPublisherPrincipal])
	}
	// Once b3 is gone, it can.
	a.apply(CmdDeregisterBroker("b3"))
	if _, err := a.apply(CmdFinalizeFeatures([]string{wire.FleetPublisherPrincipal})); err != nil {
		t.Fatal(err)
	}
	if fs = featureState(t, a.c); !fs[wire.FleetPublisherPrincipal].Finalized {
		t.Fatal("publisher_principal not finalized")
	}
}

func TestFleetExistingClusterWaitsForTheOperator(t *testing.T) {
	a := &applier{t: t, c: openTestCatalog(t)}
	for _, cmd := range [][]byte{
		CmdWrite(wire.KindTenants, ModeCreate, wire.CatalogItem{Tenant: &wire.Tenant{TenantID: "acme"}}),
		CmdWrite(wire.KindNamespaces, ModeCreate, wire.CatalogItem{Namespace: &wire.Namespace{TenantID: "acme", Namespace: "prod"}}),
		CmdWrite(wire.KindStreams, ModeCreate, wire.CatalogItem{Stream: &wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: "s", Shards: 1}}),
	} {
		if _, err := a.apply(cmd); err != nil {
			t.Fatal(err)
		}
	}
	a.record(CmdRegisterBroker(brokerReg("b1", "s1", wire.FleetJumpHashRouting, wire.FleetMajorityAck), 1000))
	fs := featureState(t, a.c)
	if fs[wire.FleetJumpHashRouting].Finalized || !fs[wire.FleetJumpHashRouting].Supported || fs[wire.FleetGenerationStart].Supported {
		t.Fatalf("features %+v", fs)
	}
	a.refused(CmdFinalizeFeatures([]string{wire.FleetGenerationStart}), ErrConflict, "b1")
	// No names: every supported feature.
	if _, err := a.apply(CmdFinalizeFeatures(nil)); err != nil {
		t.Fatal(err)
	}
	fs = featureState(t, a.c)
	if !fs[wire.FleetJumpHashRouting].Finalized || !fs[wire.FleetMajorityAck].Finalized || fs[wire.FleetGenerationStart].Finalized {
		t.Fatalf("after finalize %+v", fs)
	}
}

// brokerScript exercises every registry command, refusals included.
func brokerScript() [][]byte {
	all := wire.FleetFeatures
	return [][]byte{
		CmdRegisterBroker(brokerReg("b1", "s1", all...), 1000),
		CmdRegisterBroker(brokerReg("b2", "s2", all...), 1001),
		CmdRegisterBroker(brokerReg("b1", "sX", all...), 1002), // duplicate
		CmdRegisterBroker(brokerReg("b3", "s3"), 1003),         // lacks finalized features
		CmdHeartbeatBroker("b1", "s1", 5000),
		CmdHeartbeatBroker("ghost", "s", 5000),
		CmdMarkBrokerDown("b2", 1001, 20000),
		CmdHeartbeatBroker("b2", "s2", 20001),
		CmdDeregisterBroker("b1"),
		CmdHeartbeatBroker("b1", "s1", 20002),
		CmdFinalizeFeatures(nil),
		CmdFinalizeFeatures([]string{"nope"}),
		[]byte(`{"v":1,"op":"broker_register"}`),
		CmdRegisterBroker(crashedReg("b2", "s2c", "s2", all...), 20003),
		CmdRegisterBroker(crashedReg("b2", "s2c", "s2c", all...), 20004), // crashed is itself
	}
}

// crashedReg is a registration of node under sid, back after a crash of
// its identity crashed.
func crashedReg(node, sid, crashed string, features ...string) wire.BrokerRegistration {
	reg := brokerReg(node, sid, features...)
	reg.CrashedStorageID = crashed
	return reg
}

func TestABrokerBackAfterACrashKeepsTheIdentityItReplacedOnItsRecord(t *testing.T) {
	a := &applier{t: t, c: openTestCatalog(t)}
	a.record(CmdRegisterBroker(brokerReg("b1", "s1"), 1000))
	// Back under a new identity before it was marked down: not a
	// duplicate, since it names the identity it replaced.
	br := a.record(CmdRegisterBroker(crashedReg("b1", "s2", "s1"), 2000))
	if br.StorageID != "s2" || br.CrashedStorageID != "s1" || br.State != wire.BrokerLive {
		t.Fatalf("back after a crash %+v", br)
	}
	// Registering again under s2 without naming the crash (a heartbeat
	// refused, a restart in the same boot) keeps it on the record.
	if br = a.record(CmdRegisterBroker(brokerReg("b1", "s2"), 3000)); br.CrashedStorageID != "s1" {
		t.Fatalf("registered again %+v", br)
	}
	// Naming an identity it never had is no excuse for a duplicate.
	a.refused(CmdRegisterBroker(crashedReg("b1", "s3", "s1"), 3500), ErrConflict, "duplicate node id")
	a.refused(CmdRegisterBroker(crashedReg("b1", "s2", "s2"), 3600), ErrBadCommand, "crashed storage id")
	// A new identity without a crash (a wiped directory) clears it.
	if res, err := a.apply(CmdMarkBrokerDown("b1", 3000, 20000)); err != nil || string(res) != "1" {
		t.Fatalf("mark down: %q %v", res, err)
	}
	if br = a.record(CmdRegisterBroker(brokerReg("b1", "s4"), 21000)); br.CrashedStorageID != "" {
		t.Fatalf("after a wiped directory %+v", br)
	}
	// A record written before the field existed decodes without it.
	var old wire.Broker
	if err := json.Unmarshal([]byte(`{"node_id":"b9","client_addrs":["x:1"],"features":[],"storage_id":"s9","state":"live"}`), &old); err != nil ||
		old.CrashedStorageID != "" || old.StorageID != "s9" {
		t.Fatalf("old record %+v %v", old, err)
	}
}

func TestBrokerCommandsAreDeterministic(t *testing.T) {
	x, y := openTestCatalog(t), openTestCatalog(t)
	for i, cmd := range brokerScript() {
		rx, ex := x.Apply(uint64(i+1), cmd)
		ry, ey := y.Apply(uint64(i+1), cmd)
		if !bytes.Equal(rx, ry) || fmt.Sprint(ex) != fmt.Sprint(ey) {
			t.Fatalf("command %d: %q/%v vs %q/%v", i, rx, ex, ry, ey)
		}
		if ex != nil && !isDeterministic(ex) {
			t.Fatalf("command %d: local error %v", i, ex)
		}
	}
	if !bytes.Equal(catalogSnapshotBytes(t, x), catalogSnapshotBytes(t, y)) {
		t.Fatal("the same registry commands gave different snapshots")
	}
	// A restored replica holds the same registry.
	z := openTestCatalog(t)
	if err := z.Restore(bytes.NewReader(catalogSnapshotBytes(t, x))); err != nil {
		t.Fatal(err)
	}
	bx, _ := x.Brokers()
	bz, _ := z.Brokers()
	if fmt.Sprint(bx) != fmt.Sprint(bz) || len(bz) != 2 {
		t.Fatalf("restored registry %+v, want %+v", bz, bx)
	}
}

func TestAHeartbeatCarriesItsSuspectsAndALateOneDoesNotBringThemBack(t *testing.T) {
	a := &applier{t: t, c: openTestCatalog(t)}
	a.record(CmdRegisterBroker(brokerReg("b1", "s1"), 1000))
	sus := wire.ShardSuspect{Kind: "stream", TenantID: "t", Namespace: "ns", Name: "s", Shard: 2, Generation: 7, Leader: "b2"}
	if br := a.record(CmdHeartbeatBroker("b1", "s1", 2000, sus)); len(br.Suspects) != 1 || br.Suspects[0] != sus {
		t.Fatalf("suspects %+v", br.Suspects)
	}
	if br := a.record(CmdHeartbeatBroker("b1", "s1", 3000)); len(br.Suspects) != 0 {
		t.Fatalf("suspects kept after a heartbeat without them: %+v", br.Suspects)
	}
	if br := a.record(CmdHeartbeatBroker("b1", "s1", 2500, sus)); len(br.Suspects) != 0 {
		t.Fatalf("a late heartbeat brought suspects back: %+v", br.Suspects)
	}
}
