package broker

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/roles/broker/peer"
	"github.com/felixmq/felix/wire"
)

// Refusal reasons of repl_append (detail "reason" of a shard_unavailable).
const (
	// replReasonGap: the records start past the follower's copy; detail
	// "next" says where it ends.
	replReasonGap = "offset_gap"
	// replReasonStale: the caller's generation is older than the
	// follower's view of the shard.
	replReasonStale = "stale_generation"
	// replReasonNotReplica: the follower's view does not make it a
	// replica of the shard under that leader.
	replReasonNotReplica = "not_a_replica"
	// replReasonDiverged: the follower's record before the shipment is
	// of another generation than the leader's; detail "generation" and
	// "next" say which and where its copy ends.
	replReasonDiverged = "diverged"
)

// serveReplAppend is a follower's side of repl_append: it checks that its
// view names the caller as the shard's leader at the call's generation
// and itself as a follower, writes the records into its replica of the
// shard and answers how far the replica reaches and holds.
func (s *Server) serveReplAppend(ctx context.Context, from peer.Peer, req peer.Request) peer.Reply {
	var h replAppend
	if err := json.Unmarshal(req.Header, &h); err != nil {
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "repl_append header: %v", err))
	}
	recs, err := parseReplRecords(req.Body, h.From, shipMaxRecords)
	if err != nil {
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "repl_append body: %v", err))
	}
	ref := shardRef{kind: wire.ShardKindStream, tenant: h.TenantID, ns: h.Namespace, name: h.Stream, shard: h.Shard}
	if e := s.checkShipper(ref, from.NodeID, h); e != nil {
		return peer.ErrorReply(e)
	}
	k := core.StreamKey{Tenant: h.TenantID, Namespace: h.Namespace, Stream: h.Stream}
	if st, ok := s.core.Stream(k); ok && h.Incarnation != "" && st.Spec().Incarnation != "" && st.Spec().Incarnation != h.Incarnation {
		return peer.ErrorReply(wire.NewError(wire.CodeNotFound, "stream %s here is another incarnation than the leader's %s", h.Stream, h.Incarnation).
			WithDetail(wire.DetailReason, "incarnation"))
	}
	r, err := s.core.OpenStreamReplica(k, h.Shard)
	if err != nil {
		return peer.ErrorReply(asWireError(err))
	}
	if err := ctx.Err(); err != nil {
		// The leader gave up the call (or its link died): write nothing
		// it will not hear about.
		return peer.ErrorReply(wire.NewError(wire.CodeShardUnavailable, "the call ended before it was served: %v", err))
	}
	s.repl.noteFollowing(ref, h.Generation)
	r.SetCommitted(h.Committed)
	sm := core.Shipment{Generation: h.Generation, From: h.From, PrevGeneration: h.PrevGeneration,
		TruncateTo: h.TruncateTo, Tail: h.Tail, Records: recs}
	if h.AfterPrior {
		// The leader sent calls before this one that may reach us
		// later (the peer link's call streams keep no order between
		// them): wait for them rather than refuse a gap at once.
		sm.AwaitPrior = shipAwaitPrior
	}
	next, durable, err := r.Ship(ctx, sm)
	var gap *core.OffsetGapError
	var div *core.DivergedError
	switch {
	case errors.As(err, &gap):
		return peer.ErrorReply(wire.NewError(wire.CodeShardUnavailable, "%v", err).
			WithDetail(wire.DetailReason, replReasonGap).WithDetail("next", gap.Want))
	case errors.As(err, &div):
		return peer.ErrorReply(wire.NewError(wire.CodeShardUnavailable, "%v", err).
			WithDetail(wire.DetailReason, replReasonDiverged).WithDetail("generation", div.Generation).WithDetail("next", div.Next))
	case err != nil:
		return peer.ErrorReply(asWireError(err))
	}
	s.repl.appliedRecords.Add(len(recs))
	s.repl.noteHeard(ref, from.NodeID, h.Generation)
	out, _ := json.Marshal(replAppended{Next: next, Durable: durable})
	return peer.Reply{Header: out}
}

// checkShipper refuses a repl_append that this broker's view does not
// back: another leader, another generation, or not a follower here. A
// generation newer than the view's fetches the view.
func (s *Server) checkShipper(ref shardRef, leader string, h replAppend) *wire.Error {
	v := s.routes.view.Load()
	var a wire.ShardAssignment
	ok := false
	if v != nil {
		a, ok = v.assignments[ref]
	}
	switch {
	case !ok || h.Generation > a.Generation:
		s.viewSoon()
		return wire.NewError(wire.CodeShardUnavailable, "shard %d of %s: this broker's view does not know generation %d yet", ref.shard, ref.name, h.Generation).
			WithDetail(wire.DetailReason, core.ReasonNotReady)
	case h.Generation < a.Generation:
		return wire.NewError(wire.CodeShardUnavailable, "shard %d of %s: generation %d is stale; the view has %d (led by %s)", ref.shard, ref.name, h.Generation, a.Generation, a.NodeID).
			WithDetail(wire.DetailReason, replReasonStale).WithDetail("generation", a.Generation)
	case a.NodeID != leader:
		return wire.NewError(wire.CodeShardUnavailable, "shard %d of %s at generation %d is led by %s, not %s", ref.shard, ref.name, a.Generation, a.NodeID, leader).
			WithDetail(wire.DetailReason, replReasonStale)
	case !replicaOf(a, s.routes.self):
		return wire.NewError(wire.CodeShardUnavailable, "shard %d of %s: %s is not one of its followers", ref.shard, ref.name, s.routes.self).
			WithDetail(wire.DetailReason, replReasonNotReplica)
	}
	return nil
}
