package broker

import (
	"testing"

	"github.com/felixmq/felix/wire"
)

const commitFeatures = durableFeatures | wire.FeatureAtomicCommit

func commitMsg(stream string, reqID uint64, event string, ops ...wire.CommitOp) *wire.Commit {
	return &wire.Commit{TenantID: testTenant, Namespace: "prod", Stream: stream, RequestID: reqID,
		Ops: append([]wire.CommitOp{{Op: wire.CommitOpPublish, Payload: []byte(event)}}, ops...)}
}

func put(key, value string) wire.CommitOp {
	return wire.CommitOp{Op: wire.CommitOpPut, Key: key, Value: []byte(value)}
}

func stateGet(t *testing.T, s *tstream, stream, key string, reqID uint64) *wire.StateValue {
	t.Helper()
	s.send(&wire.StateGet{TenantID: testTenant, Namespace: "prod", Stream: stream, Key: key, RequestID: reqID})
	v, ok := s.recv().(*wire.StateValue)
	if !ok || v.RequestID != reqID || v.Key != key {
		t.Fatalf("state_get %s answered %#v", key, v)
	}
	return v
}

// TestCommitOverTheWire: FEATURE_ATOMIC_COMMIT is advertised with
// storage; a commit is answered publish_ok with its offset, the log holds
// its event alone as one record, state_get answers the state with that
// offset as its version, a commit_if at a stale offset is refused with
// the tail and writes nothing, and a restarted broker answers the same
// state (rebuilt from its log).
func TestCommitOverTheWire(t *testing.T) {
	cfg := testConfig()
	cfg.Durable.StorageDir = t.TempDir()
	e := startEnv(t, cfg, wire.StreamSpec{Stream: "log", Durable: true})
	if e.srv.serverFeatures()&wire.FeatureAtomicCommit == 0 {
		t.Fatal("FEATURE_ATOMIC_COMMIT not advertised with storage")
	}
	s := e.authed(e.dial(0), 0, commitFeatures, pubAll)
	s.send(publishIf("log", 1, 0, []byte("plain")))
	wantWritten(t, s.recv(), 1, 0)
	s.send(commitMsg("log", 2, "placed", put("order-42", "placed"), put("n", "1")))
	wantWritten(t, s.recv(), 2, 1)
	if v := stateGet(t, s, "log", "order-42", 3); string(v.Value) != "placed" || v.Version == nil || *v.Version != 1 {
		t.Fatalf("state %#v", v)
	}
	stale := commitMsg("log", 4, "late", put("order-42", "late"))
	zero := uint64(0)
	stale.ExpectedOffset = &zero
	s.send(stale)
	wantRefused(t, s.recv(), 4, 2)
	two := uint64(2)
	stale.ExpectedOffset, stale.RequestID = &two, 5
	stale.Ops = append(stale.Ops, wire.CommitOp{Op: wire.CommitOpDelete, Key: "n"})
	s.send(stale)
	wantWritten(t, s.recv(), 5, 2)
	if v := stateGet(t, s, "log", "n", 6); v.Value != nil || v.Version != nil {
		t.Fatalf("deleted key reads %#v", v)
	}
	recs := readLog(t, s, "log")
	if len(recs) != 3 || string(recs[1].Payload) != "placed" || string(recs[2].Payload) != "late" {
		t.Fatalf("log holds %+v", recs)
	}
	if err := e.shutdown(); err != nil {
		t.Fatal(err)
	}
	e = startEnv(t, cfg, wire.StreamSpec{Stream: "log", Durable: true})
	s = e.authed(e.dial(0), 0, commitFeatures, pubAll)
	if v := stateGet(t, s, "log", "order-42", 7); string(v.Value) != "late" || v.Version == nil || *v.Version != 2 {
		t.Fatalf("state after a restart %#v", v)
	}
	if v := stateGet(t, s, "log", "n", 8); v.Value != nil {
		t.Fatalf("deleted key after a restart %#v", v)
	}
}

// TestCommitRefusals: an in-memory stream is refused not_durable, an op
// on another stream not_on_owning_shard with its index, a commit without
// exactly one event event_count, a token without stream.publish is
// forbidden (and state_get needs stream.subscribe), and a broker without
// storage does not serve commit at all.
func TestCommitRefusals(t *testing.T) {
	e := startDurable(t, testConfig(), wire.StreamSpec{Stream: "mem"})
	qc := e.dial(0)
	s := e.authed(qc, 0, commitFeatures, pubAll)
	s.send(commitMsg("mem", 1, "e", put("k", "v")))
	if we := expectCode(t, s.recv(), wire.CodeInvalidRequest); we.Reason() != "not_durable" {
		t.Fatalf("in-memory stream: %v", we)
	}
	other := put("k", "v")
	other.Stream = "inventory"
	s.send(commitMsg("log", 2, "e", put("a", "b"), other))
	we := expectCode(t, s.recv(), wire.CodeInvalidRequest)
	if we.Reason() != wire.ReasonNotOnOwningShard {
		t.Fatalf("op on another stream: %v", we)
	}
	if idx, ok := we.Detail["index"].(float64); !ok || idx != 2 {
		t.Fatalf("op on another stream: index %v", we.Detail["index"])
	}
	s.send(&wire.Commit{TenantID: testTenant, Namespace: "prod", Stream: "log", RequestID: 3, Ops: []wire.CommitOp{put("k", "v")}})
	if we := expectCode(t, s.recv(), wire.CodeInvalidRequest); we.Reason() != wire.ReasonEventCount {
		t.Fatalf("no event: %v", we)
	}
	reader := e.authed(qc, 0, commitFeatures, "stream.subscribe:*")
	reader.send(commitMsg("log", 4, "e"))
	expectCode(t, reader.recv(), wire.CodeForbidden)
	if v := stateGet(t, reader, "log", "k", 5); v.Value != nil {
		t.Fatalf("nothing was committed, state_get: %#v", v)
	}
	publisher := e.authed(qc, 0, commitFeatures, "stream.publish:*")
	publisher.send(&wire.StateGet{TenantID: testTenant, Namespace: "prod", Stream: "log", Key: "k", RequestID: 6})
	expectCode(t, publisher.recv(), wire.CodeForbidden)
	if got := readLog(t, s, "log"); len(got) != 0 {
		t.Fatalf("log holds %d records", len(got))
	}

	bare := startEnv(t, testConfig(), wire.StreamSpec{Stream: "log", Durable: true})
	if bare.srv.serverFeatures()&wire.FeatureAtomicCommit != 0 {
		t.Fatal("FEATURE_ATOMIC_COMMIT advertised without storage")
	}
	b := bare.authed(bare.dial(0), 0, allFeatures, pubAll)
	b.send(commitMsg("log", 9, "e"))
	if u, ok := b.recv().(*wire.Unsupported); !ok || u.RequestType != "commit" {
		t.Fatalf("commit without storage: %#v", u)
	}
}

// TestCommitNotForwarded: a broker that does not own the shard answers a
// commit and a state_get not_leader naming the owner and forwards
// neither; the owned shard is served.
func TestCommitNotForwarded(t *testing.T) {
	e := halfOwnedOrders(t)
	redirected := e.authed(e.dial(0), 0, commitFeatures|clusterFeatures, pubAll)
	zero, one := uint32(0), uint32(1)
	m := commitMsg("orders", 1, "x", put("k", "v"))
	m.Shard = &one
	redirected.send(m)
	nl, ok := redirected.recv().(*wire.NotLeader)
	if !ok || nl.NodeID != otherNode || nl.RequestID == nil || *nl.RequestID != 1 {
		t.Fatalf("commit to another broker's shard: %#v", nl)
	}
	redirected.send(&wire.StateGet{TenantID: testTenant, Namespace: "prod", Stream: "orders", Shard: &one, Key: "k", RequestID: 2})
	if nl, ok := redirected.recv().(*wire.NotLeader); !ok || nl.NodeID != otherNode || nl.RequestID == nil || *nl.RequestID != 2 {
		t.Fatalf("state_get of another broker's shard: %#v", nl)
	}
	if n := e.metric("felix_broker_forwarded_publishes_total"); n != 0 {
		t.Fatalf("%v publishes forwarded", n)
	}
	m = commitMsg("orders", 3, "mine", put("k", "v"))
	m.Shard = &zero
	redirected.send(m)
	wantWritten(t, redirected.recv(), 3, 0)
}

// TestCommitWaitsForTheFleetFeature: a broker that registers with a
// control plane refuses commits (unsupported, reason
// fleet_feature_not_finalized) until an answer lists atomic_commit as
// finalized, and again if one stops listing it; a broker that does not
// register takes them at once; the broker reports atomic_commit among the
// fleet features it implements.
func TestCommitWaitsForTheFleetFeature(t *testing.T) {
	reg := newFakeRegistry()
	srv := newTestBroker(t, testConfig(), Deps{Registry: reg})
	e := srv.commitGate()
	if e == nil || e.Code != wire.CodeUnsupported || e.Reason() != "fleet_feature_not_finalized" {
		t.Fatalf("before the feature is finalized: %v", e)
	}
	r := &registration{finalized: srv.fleetFinalized}
	r.learn(wire.Broker{FinalizedFeatures: []string{wire.FleetJumpHashRouting, wire.FleetAtomicCommit}})
	if e := srv.commitGate(); e != nil {
		t.Fatalf("once finalized: %v", e)
	}
	r.learn(wire.Broker{FinalizedFeatures: []string{wire.FleetJumpHashRouting}})
	if srv.commitGate() == nil {
		t.Fatal("an answer without atomic_commit left commits open")
	}
	if e := newTestBroker(t, testConfig(), Deps{}).commitGate(); e != nil {
		t.Fatalf("a broker without a control plane: %v", e)
	}
	found := false
	for _, f := range ImplementedFleetFeatures {
		found = found || f == wire.FleetAtomicCommit
	}
	if !found {
		t.Fatal("atomic_commit is not among the implemented fleet features")
	}
}
