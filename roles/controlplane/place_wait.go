package controlplane

import (
	"context"
	"time"

	"github.com/felixmq/felix/wire"
)

// A stream or cache create answers once the placement loop has placed the
// new resource's shards, so that `felix admin stream create X` then
// `felix pub X` never finds X "not assigned". The create's own command
// wakes the loop on every member (PlacementInputsChanged); the leader's
// pass writes an assignment for every shard, with an owner or as
// not_assigned when no broker is live. The create waits for those
// records, at most placeWait; past it, it answers anyway and logs it.
// Nothing waits when this member runs no placement loop.

// placeWait bounds a create's wait for the placement.
const placeWait = 3 * time.Second

// placePoll is how often the waiting create reads the placement.
const placePoll = 20 * time.Millisecond

// placedRef names one resource a create waits for.
type placedRef struct {
	kind, tenant, ns, name string
}

// awaitPlaced waits until every shard of every resource in refs has an
// assignment of the resource's current incarnation, at most placeWait.
func (s *Service) awaitPlaced(ctx context.Context, refs ...placedRef) {
	if s.placement == nil || len(refs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, placeWait)
	defer cancel()
	for _, r := range refs {
		placed, err := s.waitPlaced(ctx, r)
		if !placed {
			s.log.Warn("answering a create before the placement loop placed it", "kind", r.kind,
				"tenant", r.tenant, "namespace", r.ns, "name", r.name, "waited", placeWait, "err", err)
			return
		}
	}
}

// waitPlaced polls the placement of r until it is complete or ctx ends.
func (s *Service) waitPlaced(ctx context.Context, r placedRef) (bool, error) {
	inc, shards, ok, err := s.resourceShape(ctx, r)
	if err != nil || !ok {
		return false, err // deleted meanwhile: nothing to wait for, but say so
	}
	t := time.NewTicker(placePoll)
	defer t.Stop()
	for {
		as, _, err := s.store.ResourcePlacement(ctx, r.kind, r.tenant, r.ns, r.name)
		if err == nil && complete(as, inc, shards) {
			return true, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return false, err
		case <-t.C:
		}
	}
}

// resourceShape reads r's incarnation and shard count (0 counts as 1).
func (s *Service) resourceShape(ctx context.Context, r placedRef) (string, uint32, bool, error) {
	if r.kind == wire.PlacementCache {
		c, ok, err := s.store.Cache(ctx, r.tenant, r.ns, r.name)
		return c.Incarnation, max(c.Shards, 1), ok, err
	}
	sp, ok, err := s.store.Stream(ctx, r.tenant, r.ns, r.name)
	return sp.Incarnation, max(sp.Shards, 1), ok, err
}

// complete reports whether as holds an assignment of incarnation inc for
// each of shards shards.
func complete(as []wire.ShardAssignment, inc string, shards uint32) bool {
	seen := make([]bool, shards)
	n := uint32(0)
	for _, a := range as {
		if a.Incarnation == inc && a.Shard < shards && !seen[a.Shard] {
			seen[a.Shard] = true
			n++
		}
	}
	return n == shards
}
