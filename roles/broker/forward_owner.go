package broker

import (
	"encoding/json"

	"github.com/felixmq/felix/roles/broker/peer"
	"github.com/felixmq/felix/wire"
)

// Generations across a forward. The entry sends the shard's ownership
// generation from its own view (fwdPublish.Generation,
// fwdCache.Generation); the owner, which serves the shard now, compares
// it with its own:
//
//   - the entry's is newer: the owner's view is behind (the shard may
//     have moved away from it and back, or its placement changed since
//     this owner last fetched). The owner refuses with shard_unavailable
//     (retry, reason stale_generation, naming both generations) and
//     fetches its view again at once; the client's retry finds the
//     owner up to date.
//   - the entry's is older: the owner does own the shard, so it serves
//     the request, and notes its own generation in the reply's header
//     (ownerGeneration); the entry then fetches its view again at once.
//   - equal, or either is 0 (a view without generations, a standalone
//     broker): nothing to say.
//
// A broker that does not own the shard at any generation refuses with
// not_leader, before any of this (serveForwardedPublish).

// reasonStaleGeneration is the shard_unavailable reason of a forward
// whose generation is newer than the owner's own.
const reasonStaleGeneration = "stale_generation"

// ownerGeneration is the header field an owner adds to a forward's reply
// when the entry's generation is older than its own.
type ownerGeneration struct {
	Generation uint64 `json:"generation,omitempty"`
}

// checkForwardGeneration refuses a forward whose generation (entryGen)
// is newer than the generation of rt, this broker's own, local route for
// the shard, and asks for a view fetch now. Nil when the forward may be
// served.
func (s *Server) checkForwardGeneration(kind wire.ShardKind, name string, shard uint32, rt Route, entryGen uint64) *wire.Error {
	if entryGen == 0 || rt.Generation == 0 || entryGen <= rt.Generation {
		return nil
	}
	s.viewSoon()
	return wire.NewError(wire.CodeShardUnavailable,
		"%s %s shard %d: the forward names ownership generation %d, this broker (%s) holds generation %d; its view is behind and is being fetched again",
		kind, name, shard, entryGen, s.nodeID(), rt.Generation).
		WithDetail(wire.DetailReason, reasonStaleGeneration).
		WithDetail("generation", rt.Generation).
		WithDetail("forward_generation", entryGen).
		WithDetail("node_id", s.nodeID())
}

// newerOwnGeneration is the owner's generation when the entry's is older
// (0 otherwise): what the owner notes in its reply.
func newerOwnGeneration(entryGen, ownGen uint64) uint64 {
	if entryGen == 0 || entryGen >= ownGen {
		return 0
	}
	return ownGen
}

// ownerGenerationHeader is a cache forward's reply header: the owner's
// generation when the entry's is older, nil otherwise.
func ownerGenerationHeader(entryGen, ownGen uint64) json.RawMessage {
	g := newerOwnGeneration(entryGen, ownGen)
	if g == 0 {
		return nil
	}
	b, _ := json.Marshal(ownerGeneration{Generation: g})
	return b
}

// noteOwnerGeneration runs at the entry on every answered forward: an
// owner that noted a generation newer than the entry's route asks for a
// view fetch now, so the entry stops naming a stale generation.
func (s *Server) noteOwnerGeneration(rt Route, rep peer.Reply) {
	if len(rep.Header) == 0 {
		return
	}
	var g ownerGeneration
	if json.Unmarshal(rep.Header, &g) == nil && g.Generation > rt.Generation {
		s.viewSoon()
	}
}

// viewSoon asks the polling loop for a view fetch now, in the background
// (one coalescing slot; nothing standalone).
func (s *Server) viewSoon() {
	if s.view.soonC == nil {
		return
	}
	select {
	case s.view.soonC <- struct{}{}:
	default:
	}
}

// unreachable is the refusal of a forward that was never sent: the
// owner's peer address did not answer (within the forward's timeout) or
// refused the link. It names the owner and its peer address.
func unreachable(rt Route, err error) *wire.Error {
	return wire.NewError(wire.CodeShardUnavailable, "cannot reach %s, the shard's owner, at peer address %s: %v", rt.NodeID, rt.PeerAddr, err).
		WithDetail(wire.DetailReason, fwdFailNotSent).WithDetail("node_id", rt.NodeID).WithDetail("peer_addr", rt.PeerAddr)
}
