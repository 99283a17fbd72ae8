package controlplane

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/raftmeta/catalog"
	"github.com/felixmq/felix/wire"
)

// placeCatalog creates tenant t, namespace ns, an in-memory stream "s"
// with shards shards and a one-shard cache "c" through store.
func placeCatalog(t *testing.T, s Store, shards uint32) {
	t.Helper()
	must(t, s.PutTenant(bg, wire.Tenant{TenantID: "t"}))
	must(t, s.PutNamespace(bg, wire.Namespace{TenantID: "t", Namespace: "ns"}))
	must(t, s.CreateStream(bg, wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s", Shards: shards, Incarnation: "i1"}))
	must(t, s.CreateCache(bg, wire.CacheSpec{TenantID: "t", Namespace: "ns", Cache: "c", Incarnation: "c1"}))
}

func placementOf(t *testing.T, s Store) catalog.PlacementInput {
	t.Helper()
	in, err := s.PlacementInput(bg)
	must(t, err)
	return in
}

// Only the leader places; a new leader carries on from the records: the
// in-memory shards of a broker marked down move to a live one at new
// generations, and a deleted stream's assignments are dropped.
func TestPlacementAcrossLeaderChange(t *testing.T) {
	g := openTestGroup(t, 3)
	placers := map[uint64]*placer{}
	for id, s := range g.stores {
		placers[id] = &placer{store: s, log: quietLogger(), cfg: PlacementConfig{Interval: time.Second}}
	}
	passAll := func() {
		for id, p := range placers {
			if g.stores[id] != nil {
				must(t, p.pass(bg))
			}
		}
	}
	first := g.leader(t)
	s := g.stores[first]
	for _, node := range []string{"b1", "b2"} {
		_, err := s.RegisterBroker(bg, testRegistration(node, "sid-"+node), 1000)
		must(t, err)
	}
	placeCatalog(t, s, 4)
	passAll()
	in := placementOf(t, s)
	if in.Revision != 1 || len(in.Assignments) != 5 || in.LastGeneration != 5 {
		t.Fatalf("after the first passes (only the leader places, once): revision %d, %d assignments, generation %d",
			in.Revision, len(in.Assignments), in.LastGeneration)
	}
	owned := map[string]int{}
	for _, a := range in.Assignments {
		if a.Kind == wire.PlacementStream {
			owned[a.NodeID]++
		}
		if a.Unavailable != "" || a.Generation == 0 {
			t.Fatalf("not served: %+v", a)
		}
	}
	if owned["b1"] != 2 || owned["b2"] != 2 {
		t.Fatalf("stream shards not spread: %v", owned)
	}

	g.stop(first)
	delete(placers, first)
	next := g.stores[g.leader(t)]
	br := brokerState(t, next, "b1")
	down, err := next.MarkBrokerDown(bg, "b1", br.LastHeartbeatMs, 99_000)
	if err != nil || !down {
		t.Fatalf("mark b1 down: %v %v", down, err)
	}
	passAll()
	after := placementOf(t, next)
	for _, a := range after.Assignments {
		if a.NodeID != "b2" || a.Unavailable != "" {
			t.Fatalf("an in-memory shard stayed on the down broker: %+v", a)
		}
	}
	if after.LastGeneration <= in.LastGeneration || after.Revision != 2 {
		t.Fatalf("generation %d -> %d, revision %d", in.LastGeneration, after.LastGeneration, after.Revision)
	}
	if br := brokerState(t, next, "b2"); br.ShardsOwned != 5 {
		t.Fatalf("b2 owns %d shards, want 5", br.ShardsOwned)
	}

	must(t, next.DeleteStream(bg, "t", "ns", "s"))
	passAll()
	final := placementOf(t, next)
	if len(final.Assignments) != 1 || final.Assignments[0].Kind != wire.PlacementCache {
		t.Fatalf("after the delete: %+v", final.Assignments)
	}
}

// A pass computed from a placement that changed since is refused, and
// the next pass computes from the new one.
func TestPlacementStalePassIsRefused(t *testing.T) {
	store := openTestRaft(t, t.TempDir())
	waitFor(t, "a leader", store.Ready)
	_, err := store.RegisterBroker(bg, testRegistration("b1", "s1"), 1000)
	must(t, err)
	placeCatalog(t, store, 2)
	stale := placementOf(t, store)
	p := &placer{store: store, log: quietLogger(), cfg: PlacementConfig{Interval: time.Second}}
	must(t, p.pass(bg))
	err = store.ApplyPlacement(bg, catalog.PlacementChange{ExpectRevision: stale.Revision,
		ExpectLastGeneration: stale.LastGeneration, LastGeneration: 99})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "stale placement") {
		t.Fatalf("stale pass: %v", err)
	}
	must(t, p.pass(bg)) // nothing to change: no new revision
	if in := placementOf(t, store); in.Revision != 1 || in.LastGeneration != 3 {
		t.Fatalf("revision %d, generation %d", in.Revision, in.LastGeneration)
	}
}

// The loop started by StartPlacement places on its ticks and stops on
// Close.
func TestPlacementLoopRunsOnTicks(t *testing.T) {
	store := openTestRaft(t, t.TempDir())
	svc, err := New(Config{Logger: quietLogger()}, store)
	must(t, err)
	tickC := make(chan time.Time) // unbuffered: a send returns once the loop took it
	svc.StartPlacement(PlacementConfig{Interval: time.Hour, tickC: tickC})
	waitFor(t, "a leader", store.Ready)
	_, err = svc.RegisterBroker(bg, testRegistration("b1", "s1"))
	must(t, err)
	placeCatalog(t, store, 3)
	tickC <- time.Time{}
	tickC <- time.Time{} // waits out the first pass
	in := placementOf(t, store)
	if len(in.Assignments) != 4 || in.Assignments[0].NodeID != "b1" {
		t.Fatalf("after a tick: %+v", in.Assignments)
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.Close() }()
	select {
	case err := <-done:
		must(t, err)
	case <-ctx.Done():
		t.Fatal("Close did not stop the placement loop")
	}
}

func TestPlacementConfigFromEnv(t *testing.T) {
	cfg, err := PlacementConfigFromEnv(func(string) string { return "" })
	if err != nil || cfg.Interval != DefaultPlacementInterval || cfg.RestoreAfter != DefaultRestoreAfter {
		t.Fatalf("%+v %v", cfg, err)
	}
	env := map[string]string{"FELIX_SHARD_RECONCILE_INTERVAL_MS": "250", "FELIX_SHARD_RESTORE_AFTER_MS": "1000"}
	cfg, err = PlacementConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || cfg.Interval != 250*time.Millisecond || cfg.RestoreAfter != time.Second {
		t.Fatalf("%+v %v", cfg, err)
	}
	env = map[string]string{"FELIX_SHARD_RECONCILE_INTERVAL_MS": "0", "FELIX_SHARD_RESTORE_AFTER_MS": "999"}
	_, err = PlacementConfigFromEnv(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "FELIX_SHARD_RECONCILE_INTERVAL_MS") ||
		!strings.Contains(err.Error(), "FELIX_SHARD_RESTORE_AFTER_MS") {
		t.Fatalf("0 and 999 ms: %v, want both refused by name", err)
	}
	env = map[string]string{"FELIX_SHARD_RESTORE_AFTER_MS": "86400001"}
	if _, err = PlacementConfigFromEnv(func(k string) string { return env[k] }); err == nil {
		t.Fatal("a restore delay over a day accepted")
	}
}

// followersOf returns the node ids of the followers of stream "r" shard 0.
func followersOf(t *testing.T, s Store) []string {
	t.Helper()
	for _, a := range placementOf(t, s).Assignments {
		if a.Kind == wire.PlacementStream && a.Name == "r" && a.Shard == 0 {
			var ids []string
			for _, r := range a.Replicas {
				ids = append(ids, r.NodeID)
			}
			return ids
		}
	}
	t.Fatal("stream r has no assignment")
	return nil
}

// A follower whose broker the expiry loop marked down is replaced once
// it has been down for RestoreAfter on the placer's clock, not before;
// a placer that has just become leader counts from then.
func TestPlacementRestoresAFollowerDownPastTheDelay(t *testing.T) {
	store := openTestRaft(t, t.TempDir())
	waitFor(t, "a leader", store.Ready)
	for _, node := range []string{"b1", "b2", "b3", "b4", "b5"} {
		_, err := store.RegisterBroker(bg, testRegistration(node, "sid-"+node), 1000)
		must(t, err)
	}
	must(t, store.PutTenant(bg, wire.Tenant{TenantID: "t"}))
	must(t, store.PutNamespace(bg, wire.Namespace{TenantID: "t", Namespace: "ns"}))
	must(t, store.CreateStream(bg, wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "r", Shards: 1,
		Durable: true, ReplicationFactor: 3, Incarnation: "i1"}))
	nowMs := int64(1_000_000)
	clock := func() time.Time { return time.UnixMilli(nowMs) }
	cfg := PlacementConfig{Interval: time.Second, RestoreAfter: time.Minute}
	p := &placer{store: store, log: quietLogger(), cfg: cfg, now: clock}
	must(t, p.pass(bg))
	first := followersOf(t, store)
	if len(first) != 2 {
		t.Fatalf("followers %v, want two", first)
	}
	markDown := func(node string, atMs int64) {
		t.Helper()
		down, err := store.MarkBrokerDown(bg, node, brokerState(t, store, node).LastHeartbeatMs, atMs)
		if err != nil || !down {
			t.Fatalf("mark %s down: %v %v", node, down, err)
		}
	}
	markDown(first[0], 1_010_000)
	nowMs = 1_010_000 + 60_000 - 1
	must(t, p.pass(bg))
	if got := followersOf(t, store); !slices.Equal(got, first) {
		t.Fatalf("1 ms before the delay: followers %v, want %v", got, first)
	}
	nowMs++
	must(t, p.pass(bg))
	second := followersOf(t, store)
	if len(second) != 2 || second[0] != first[1] || slices.Contains(first, second[1]) {
		t.Fatalf("after the delay: followers %v, want %s kept and a broker that held no copy", second, first[1])
	}

	// Another placer takes over long after the next follower went down:
	// it counts from its own first pass.
	markDown(second[0], 1_080_000)
	nowMs = 2_000_000
	p2 := &placer{store: store, log: quietLogger(), cfg: cfg, now: clock}
	must(t, p2.pass(bg))
	if got := followersOf(t, store); !slices.Equal(got, second) {
		t.Fatalf("a new leader's first pass: followers %v, want %v (the count restarts)", got, second)
	}
	nowMs += 60_000
	must(t, p2.pass(bg))
	third := followersOf(t, store)
	if len(third) != 2 || third[0] != second[1] || slices.Contains(first, third[1]) || slices.Contains(second, third[1]) {
		t.Fatalf("a delay after the new leader's first pass: followers %v, want %s kept and the fifth broker", third, second[1])
	}
}
