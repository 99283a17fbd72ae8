package controlplane

import (
	"errors"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// handoffOf is the request handing stream "r" shard 0 from its owner in
// a to node at generation gen.
func handoffOf(a wire.ShardAssignment, gen uint64, to string) wire.HandoffRequest {
	return wire.HandoffRequest{Kind: wire.PlacementStream, TenantID: "t", Namespace: "ns", Name: "r", Shard: 0,
		Generation: gen, From: a.NodeID, To: to}
}

func shardOf(t *testing.T, s Store) wire.ShardAssignment {
	t.Helper()
	for _, a := range placementOf(t, s).Assignments {
		if a.Kind == wire.PlacementStream && a.Name == "r" && a.Shard == 0 {
			return a
		}
	}
	t.Fatal("stream r has no assignment")
	return wire.ShardAssignment{}
}

func refusedFor(t *testing.T, err error, reason string) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != codeConflict || we.Detail[wire.DetailReason] != reason {
		t.Fatalf("got %v, want a conflict for %s", err, reason)
	}
}

// A planned handoff applies only when the placement backs it, commits
// through Raft, survives a leader change, and the placement loop keeps
// it.
func TestAHandoffIsAppliedOrRefusedAndSurvivesALeaderChange(t *testing.T) {
	g := openTestGroup(t, 3)
	first := g.leader(t)
	s := g.stores[first]
	for _, node := range []string{"b1", "b2", "b3", "b4"} {
		_, err := s.RegisterBroker(bg, testRegistration(node, "sid-"+node), 1000)
		must(t, err)
	}
	must(t, s.PutTenant(bg, wire.Tenant{TenantID: "t"}))
	must(t, s.PutNamespace(bg, wire.Namespace{TenantID: "t", Namespace: "ns"}))
	must(t, s.CreateStream(bg, wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "r", Shards: 1,
		Durable: true, ReplicationFactor: 3, Consistency: "quorum", Incarnation: "i1"}))
	p := &placer{store: s, log: quietLogger(), cfg: PlacementConfig{Interval: time.Second}}
	must(t, p.pass(bg))
	a := shardOf(t, s)
	if len(a.Replicas) != 2 {
		t.Fatalf("replicas %+v", a.Replicas)
	}
	var other string // the registered broker that holds no copy
	for _, n := range []string{"b1", "b2", "b3", "b4"} {
		if n != a.NodeID && n != a.Replicas[0].NodeID && n != a.Replicas[1].NodeID {
			other = n
		}
	}
	// Served by a follower member of the group: it reads after a barrier
	// and its proposal reaches the leader.
	var member uint64
	for id := range g.stores {
		if id != first {
			member = id
			break
		}
	}
	svc, err := New(Config{Logger: quietLogger()}, g.stores[member])
	must(t, err)
	_, err = svc.HandOffShard(bg, handoffOf(a, a.Generation+1, a.Replicas[0].NodeID))
	refusedFor(t, err, "stale_generation")
	_, err = svc.HandOffShard(bg, handoffOf(a, a.Generation, other))
	refusedFor(t, err, "not_a_replica")
	wrongFrom := handoffOf(a, a.Generation, a.Replicas[0].NodeID)
	wrongFrom.From = a.Replicas[1].NodeID
	_, err = svc.HandOffShard(bg, wrongFrom)
	refusedFor(t, err, "not_owner")
	// The second follower comes back with a new data directory: its copy
	// is gone, so it may not take the shard.
	lost := a.Replicas[1].NodeID
	if down, err := s.MarkBrokerDown(bg, lost, brokerState(t, s, lost).LastHeartbeatMs, 2000); err != nil || !down {
		t.Fatalf("mark %s down: %v %v", lost, down, err)
	}
	_, err = svc.HandOffShard(bg, handoffOf(a, a.Generation, lost))
	refusedFor(t, err, "target_not_live")
	_, err = s.RegisterBroker(bg, testRegistration(lost, "sid-new"), 3000)
	must(t, err)
	_, err = svc.HandOffShard(bg, handoffOf(a, a.Generation, lost))
	refusedFor(t, err, "storage_mismatch")
	if now := shardOf(t, s); now.NodeID != a.NodeID || now.Generation != a.Generation {
		t.Fatalf("a refused handoff changed the shard: %+v", now)
	}

	to := a.Replicas[0].NodeID
	got, err := svc.HandOffShard(bg, handoffOf(a, a.Generation, to))
	must(t, err)
	if got.NodeID != to || got.StorageID != "sid-"+to || got.Generation <= a.Generation || got.Replicas[0].NodeID != a.NodeID {
		t.Fatalf("after the handoff: %+v (was %+v)", got, a)
	}
	// The same request again is stale now.
	_, err = svc.HandOffShard(bg, handoffOf(a, a.Generation, to))
	refusedFor(t, err, "not_owner")

	g.stop(first)
	next := g.stores[g.leader(t)]
	if now := shardOf(t, next); now.NodeID != to || now.Generation != got.Generation {
		t.Fatalf("after a leader change: %+v, want %+v", now, got)
	}
	p2 := &placer{store: next, log: quietLogger(), cfg: PlacementConfig{Interval: time.Second}}
	must(t, p2.pass(bg))
	after := shardOf(t, next)
	if after.NodeID != to || after.Generation != got.Generation || after.Replicas[0].NodeID != a.NodeID {
		t.Fatalf("the placement loop undid the handoff: %+v", after)
	}
	// And it is handed back through the new leader.
	svc2, err := New(Config{Logger: quietLogger()}, next)
	must(t, err)
	back, err := svc2.HandOffShard(bg, handoffOf(after, after.Generation, a.NodeID))
	must(t, err)
	if back.NodeID != a.NodeID || back.Generation <= after.Generation {
		t.Fatalf("handed back: %+v", back)
	}
}
