package controlplane

import (
	"context"
	"errors"
	"net/http"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/roles/controlplane/placement"
	"github.com/felixmq/felix/wire"
)

// HandOffShard applies a planned handoff (a stopping broker gives a shard
// it leads to a caught-up follower; docs/placement.md, "Planned
// handoff"): after a barrier it checks the request against the placement
// and the registry (placement.Handoff) and commits the result to Raft as
// a compare-and-set placement change, computed again when the placement
// changed meanwhile. The answer is the shard's new assignment; a request
// the placement does not back is refused with code conflict (409), its
// reason in the detail. It is also the in-process call of felix serve's
// broker.
func (s *Service) HandOffShard(ctx context.Context, req wire.HandoffRequest) (wire.ShardAssignment, error) {
	var p problems
	p.name("tenant_id", req.TenantID)
	p.name("namespace", req.Namespace)
	p.name("name", req.Name)
	p.name("from", req.From)
	p.name("to", req.To)
	if req.Kind != wire.PlacementStream {
		p.add("kind", "%q: only %q shards are handed off", req.Kind, wire.PlacementStream)
	}
	if err := p.err(); err != nil {
		return wire.ShardAssignment{}, err
	}
	preq := placement.HandoffRequest{Shard: placement.ShardRef{Resource: placement.ResourceKey{Kind: placement.Kind(req.Kind),
		TenantID: req.TenantID, Namespace: req.Namespace, Name: req.Name}, Shard: req.Shard},
		Generation: req.Generation, From: req.From, To: req.To}
	for try := 1; ; try++ {
		a, err := s.handOffOnce(ctx, preq)
		if !errors.Is(err, ErrConflict) || try == placementRetries {
			return a, err
		}
	}
}

func (s *Service) handOffOnce(ctx context.Context, req placement.HandoffRequest) (wire.ShardAssignment, error) {
	in, err := s.store.PlacementInput(ctx)
	if err != nil {
		return wire.ShardAssignment{}, err
	}
	out, err := placement.Handoff(placementInput(in), req)
	var refused *placement.HandoffRefused
	if errors.As(err, &refused) {
		return wire.ShardAssignment{}, (&wire.Error{Code: codeConflict, Retry: wire.RetryFatal, Message: refused.Error()}).
			WithDetail(wire.DetailReason, refused.Reason)
	}
	if err != nil {
		return wire.ShardAssignment{}, err
	}
	if err := s.store.ApplyPlacement(ctx, placementChange(in, out.Next)); err != nil {
		return wire.ShardAssignment{}, err
	}
	d := out.Decisions[0]
	s.log.Info("placement", "decision", string(d.Kind), "shard", shardName(d.Shard), "generation", d.Generation, "from", d.From, "to", d.To)
	for _, a := range out.Next.Assignments {
		if a.Shard == req.Shard {
			return toRecord(a), nil
		}
	}
	return wire.ShardAssignment{}, errors.New("handoff: the shard is missing from the placement it computed")
}

func (s *Service) postHandoff(r *http.Request, _ *auth.Identity) (int, any, error) {
	var req wire.HandoffRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	a, err := s.HandOffShard(r.Context(), req)
	return http.StatusOK, a, err
}
