package controlplane

import (
	"context"
	"net/http"
	"strings"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

const (
	pPlacementStream = "/v1/placement/streams/{tenant}/{namespace}/{stream}"
	pPlacementCache  = "/v1/placement/caches/{tenant}/{namespace}/{cache}"
)

// readResource is the resource and action a scopeRead route's caller
// may hold instead of tenant.manage: stream.subscribe on the stream, or
// cache.read on the whole cache.
func readResource(r *http.Request) (auth.Action, string) {
	t, ns := r.PathValue("tenant"), r.PathValue("namespace")
	if c := r.PathValue("cache"); c != "" {
		return auth.ActionCacheRead, strings.TrimSuffix(auth.CacheResource(t, ns, c, ""), "/")
	}
	return auth.ActionStreamSubscribe, auth.StreamResource(t, ns, r.PathValue("stream"))
}

func (s *Service) getStreamPlacement(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace", "stream")
	if err != nil {
		return 0, nil, err
	}
	sp, ok, err := s.store.Stream(r.Context(), n[0], n[1], n[2])
	if err != nil || !ok {
		return found(sp, ok, err, streamWhat(n[0], n[1], n[2]))
	}
	v, err := s.ResourcePlacement(r.Context(), wire.PlacementStream, n[0], n[1], n[2], sp.Incarnation, sp.Shards)
	return http.StatusOK, v, err
}

func (s *Service) getCachePlacement(r *http.Request, _ *auth.Identity) (int, any, error) {
	n, err := pathNames(r, "tenant", "namespace", "cache")
	if err != nil {
		return 0, nil, err
	}
	cs, ok, err := s.store.Cache(r.Context(), n[0], n[1], n[2])
	if err != nil || !ok {
		return found(cs, ok, err, cacheWhat(n[0], n[1], n[2]))
	}
	v, err := s.ResourcePlacement(r.Context(), wire.PlacementCache, n[0], n[1], n[2], cs.Incarnation, cs.Shards)
	return http.StatusOK, v, err
}

// ResourcePlacement returns the placement of every shard of one stream or
// cache of the given incarnation and shard count (0 counts as 1). A shard
// the placement loop has not placed (yet) for that incarnation is listed
// as not_assigned at generation 0.
func (s *Service) ResourcePlacement(ctx context.Context, kind, tenant, ns, name, incarnation string, shards uint32) (wire.PlacementView, error) {
	as, gen, err := s.store.ResourcePlacement(ctx, kind, tenant, ns, name)
	if err != nil {
		return wire.PlacementView{}, err
	}
	v := wire.PlacementView{Kind: kind, TenantID: tenant, Namespace: ns, Name: name, LastGeneration: gen,
		Shards: make([]wire.ShardAssignment, max(shards, 1))}
	for i := range v.Shards {
		v.Shards[i] = wire.ShardAssignment{Kind: kind, TenantID: tenant, Namespace: ns, Name: name, Shard: uint32(i),
			Incarnation: incarnation, Unavailable: wire.UnavailableNotAssigned}
	}
	for _, a := range as {
		if int(a.Shard) < len(v.Shards) && a.Incarnation == incarnation {
			v.Shards[a.Shard] = a
		}
	}
	return v, nil
}
