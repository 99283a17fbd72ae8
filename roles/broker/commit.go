package broker

import (
	"slices"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/wire"
)

// Atomic commits, commit and state_get (FEATURE_ATOMIC_COMMIT, advertised
// with durable storage; docs/atomic-commit.md).
//
// A commit takes publish_if's path: authorized as stream.publish, the same
// budgets and the shard's lane, never forwarded (a broker that does not
// own the shard answers not_leader), a durable shard only, answered with
// publish_ok carrying its offset once durable, or publish_refused with
// offset_mismatch when its expected_offset is not the shard's next. Its
// claim is core.Shard.ClaimCommit, run in lane order: the event and its
// state ops are one record, and the state changes under the claim lock.
//
// state_get reads a key of one shard's state, authorized as
// stream.subscribe (a read of the stream), served by the shard's owner
// alone (not_leader otherwise), answered with state_value.

// fleetFinalized records the finalized fleet features a control plane's
// answer carried (registration.learn).
func (s *Server) fleetFinalized(names []string) {
	s.atomicCommitOn.Store(slices.Contains(names, wire.FleetAtomicCommit))
}

// commitGate refuses a commit on a broker that registers with a control
// plane until the fleet has finalized atomic_commit: a commit is a record
// in log layout version 3, which a broker of an earlier release (a
// follower, or this shard's next leader) refuses. A broker that does not
// register (no control plane) takes commits at once.
func (s *Server) commitGate() *wire.Error {
	if s.registry == nil || s.atomicCommitOn.Load() {
		return nil
	}
	e := wire.NewError(wire.CodeUnsupported, "atomic commits need the fleet feature %s finalized (felix admin features finalize %s); nothing was written",
		wire.FleetAtomicCommit, wire.FleetAtomicCommit).WithDetail(wire.DetailReason, "fleet_feature_not_finalized").WithDetail("feature", wire.FleetAtomicCommit)
	e.Retry = wire.RetryFatal
	return e
}

// handleCommit serves one commit.
func (cs *controlStream) handleCommit(m *wire.Commit) {
	r := &pubRequest{tenant: m.TenantID, ns: m.Namespace, stream: m.Stream, key: m.EntityKey, shard: m.Shard,
		acked: true, requestID: m.RequestID, expected: m.ExpectedOffset, commit: &commitOps{}}
	if m.Validate() == nil {
		r.payloads = [][]byte{m.Event()}
		r.commit.ops = stateOps(m.Ops)
	}
	if e := cs.srv.commitGate(); e != nil {
		if !cs.takeTicket(r) {
			return
		}
		cs.refuse(r, e)
		return
	}
	cs.publishValidated(r, m)
}

// commitOps are a commit's state ops, carried by its pubRequest.
type commitOps struct {
	ops []core.StateOp
}

func stateOps(ops []wire.CommitOp) []core.StateOp {
	out := make([]core.StateOp, 0, len(ops))
	for _, op := range ops {
		switch op.Op {
		case wire.CommitOpPut:
			v := op.Value
			if v == nil {
				v = []byte{}
			}
			out = append(out, core.StateOp{Key: op.Key, Value: v})
		case wire.CommitOpDelete:
			out = append(out, core.StateOp{Key: op.Key, Delete: true})
		}
	}
	return out
}

// errCommitNotDurable refuses a commit to an in-memory stream.
func errCommitNotDurable(stream string) *wire.Error {
	return wire.NewError(wire.CodeInvalidRequest, "stream %s is not durable: an atomic commit needs a durable stream, whose log holds the event and its state as one record", stream).
		WithDetail(wire.DetailReason, "not_durable")
}

// handleStateGet answers one state_get.
func (cs *controlStream) handleStateGet(m *wire.StateGet) {
	rid := m.RequestID
	if err := m.Validate(); err != nil {
		cs.sendError(asWireError(err), &rid)
		return
	}
	idx := uint32(0)
	if m.Shard != nil {
		idx = *m.Shard
	} else if st, e := cs.srv.resolveStream(m.TenantID, m.Namespace, m.Stream); e == nil {
		idx = st.ShardForKey(m.EntityKey)
	}
	sh, e := cs.readableShard(m, m.TenantID, m.Namespace, m.Stream, idx)
	if e != nil {
		cs.sendRefusal(e, &rid)
		return
	}
	v, ver, ok, err := sh.StateGet(m.Key)
	if err != nil {
		cs.sendError(asWireError(err), &rid)
		return
	}
	ans := &wire.StateValue{RequestID: rid, Key: m.Key}
	if ok {
		ans.Value, ans.Version = v, &ver
		if ans.Value == nil {
			ans.Value = []byte{}
		}
	}
	cs.sendMsg(ans)
}
