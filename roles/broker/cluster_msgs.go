package broker

import (
	"errors"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/wire"
)

// The cluster messages of docs/protocol.md ("Cluster messages"): a client
// asks any broker which brokers there are, how a stream or cache is cut
// into shards and who owns each; the broker refuses a request that only
// a shard's owner serves with a redirect, and ends the event streams of a
// shard that moved with shard_moved. A standalone broker answers too,
// with the spec's standalone answers (no brokers, one shard owned by
// itself).

// ClusterFeatures are the cluster messages and behaviours every broker
// serves, standalone or not.
const ClusterFeatures = wire.FeatureTopology | wire.FeatureRedirect | wire.FeatureStreamShards |
	wire.FeatureCacheShards | wire.FeatureShardOwners | wire.FeatureShardMoved | wire.FeaturePublishWidth

// handleClusterMessage serves a cluster message on a control stream; false
// when msg is not one.
func (cs *controlStream) handleClusterMessage(msg wire.Message) bool {
	switch m := msg.(type) {
	case *wire.Topology:
		cs.sendMsg(&wire.TopologyView{Brokers: cs.srv.routes.Topology(), RequestID: m.RequestID})
	case *wire.StreamShards:
		cs.handleStreamShards(m)
	case *wire.CacheShards:
		cs.handleCacheShards(m)
	case *wire.ShardOwners:
		cs.handleShardOwners(m)
	case *wire.PublishWidth:
		cs.handlePublishWidth(m)
	default:
		return false
	}
	return true
}

// authorizeShape checks a question about how a resource of tenant is cut
// into shards: the token must be live and for that tenant. Shard counts
// and owners say nothing of the data, and publishers and subscribers
// alike need them, so no per-resource permission is asked.
func (cs *controlStream) authorizeShape(v wire.Validator, tenant string, rid uint64) bool {
	if err := v.Validate(); err != nil {
		cs.sendError(asWireError(err), &rid)
		return false
	}
	if cs.srv.verifier.Expired(cs.id) {
		cs.sendError(wire.NewError(wire.CodeUnauthorized, "token expired").WithDetail(wire.DetailReason, wire.ReasonTokenExpired), &rid)
		return false
	}
	if tenant != cs.id.TenantID {
		cs.sendError(wire.NewError(wire.CodeForbidden, "forbidden: the stream is authenticated for tenant %s, not %s", cs.id.TenantID, tenant).
			WithDetail(wire.DetailReason, wire.ReasonTenantMismatch), &rid)
		return false
	}
	return true
}

// streamShards returns a stream's shard count, 0 when the broker does not
// know it even after asking the catalog.
func (s *Server) streamShards(tenant, ns, stream string) uint32 {
	st, e := s.resolveStream(tenant, ns, stream)
	if e != nil {
		return 0
	}
	return st.Shards()
}

// cacheShards returns a cache's shard count, 0 when the broker does not
// know it even after asking the catalog.
func (s *Server) cacheShards(tenant, ns, cache string) uint32 {
	c, e := s.resolveCache(tenant, ns, cache)
	if e != nil {
		return 0
	}
	return c.Shards()
}

// handleStreamShards answers stream_shards. Every stream maps keys by
// jump hash (core.Stream.ShardForKey).
func (cs *controlStream) handleStreamShards(m *wire.StreamShards) {
	if !cs.authorizeShape(m, m.TenantID, m.RequestID) {
		return
	}
	ans := &wire.StreamShardsView{Shards: cs.srv.streamShards(m.TenantID, m.Namespace, m.Stream), RequestID: m.RequestID}
	if ans.Shards > 0 {
		ans.Routing = wire.RoutingJumpHash
	}
	cs.sendMsg(ans)
}

// handleCacheShards answers cache_shards.
func (cs *controlStream) handleCacheShards(m *wire.CacheShards) {
	if !cs.authorizeShape(m, m.TenantID, m.RequestID) {
		return
	}
	cs.sendMsg(&wire.CacheShardsView{Shards: cs.srv.cacheShards(m.TenantID, m.Namespace, m.Cache), RequestID: m.RequestID})
}

// handleShardOwners answers shard_owners from the route table; a resource
// the broker does not know is not_found.
func (cs *controlStream) handleShardOwners(m *wire.ShardOwners) {
	if !cs.authorizeShape(m, m.TenantID, m.RequestID) {
		return
	}
	var n uint32
	var e *wire.Error
	if m.Kind == wire.ShardKindCache {
		var c *core.Cache
		if c, e = cs.srv.resolveCache(m.TenantID, m.Namespace, m.Name); e == nil {
			n = c.Shards()
		}
	} else {
		var st *core.Stream
		if st, e = cs.srv.resolveStream(m.TenantID, m.Namespace, m.Name); e == nil {
			n = st.Shards()
		}
	}
	if e != nil {
		cs.sendError(e, &m.RequestID)
		return
	}
	cs.sendMsg(&wire.ShardOwnersView{RequestID: m.RequestID, Owners: cs.srv.routes.Owners(m.Kind, m.TenantID, m.Namespace, m.Name, n)})
}

// routeRefusal is why a request to one shard that is never forwarded
// cannot be served here (not_leader naming the owner, or
// shard_unavailable); nil when this broker serves the shard. A shard the
// view does not place yet refreshes the view once (Server.route).
func (s *Server) routeRefusal(kind wire.ShardKind, tenant, ns, name string, shard uint32) *wire.Error {
	return s.route(s.workCtx, kind, tenant, ns, name, shard).Err(kind, name, shard)
}

// sendRefusal sends e, as a not_leader message when it is a redirect and
// the client offered FEATURE_REDIRECT, as an error otherwise.
func (cs *controlStream) sendRefusal(e *wire.Error, rid *uint64) {
	if cs.features&wire.FeatureRedirect != 0 {
		if nl, ok := wire.NotLeaderFromError(e); ok && nl.Addr != "" {
			nl.RequestID = rid
			cs.sendMsg(nl)
			return
		}
	}
	cs.sendError(e, rid)
}

// watchRoute refuses a cache watch this broker cannot serve: a key watch
// reads its key's shard, a prefix watch the shard it names; a prefix
// watch naming none reads every shard, which only a broker owning them
// all serves (others refuse with reason watch_needs_shard: watch each
// shard, cache_shards says how many).
func (s *Server) watchRoute(m *wire.CacheWatch, shards uint32) *wire.Error {
	route := func(i uint32) *wire.Error {
		return s.routeRefusal(wire.ShardKindCache, m.TenantID, m.Namespace, m.Cache, i)
	}
	switch {
	case !m.Prefix:
		return route(wire.ShardForKey([]byte(m.Key), shards))
	case m.Shard != nil:
		if err := wire.CheckShard("cache", m.Cache, *m.Shard, shards); err != nil {
			return asWireError(err)
		}
		return route(*m.Shard)
	}
	for i := range shards {
		if route(i) != nil {
			return wire.NewError(wire.CodeInvalidRequest, "cache %s has %d shards and this broker does not own them all: watch the prefix on each shard (cache_watch with shard)", m.Cache, shards).
				WithDetail(wire.DetailReason, ReasonWatchNeedsShard).WithDetail(wire.DetailShards, shards)
		}
	}
	return nil
}

// ReasonWatchNeedsShard refuses a prefix watch without a shard on a
// multi-shard cache whose shards this broker does not all own.
const ReasonWatchNeedsShard = "watch_needs_shard"

// movedFrame is the last frame of an event stream (subscription or watch
// id) whose shard moved: shard_moved for a client that offered
// FEATURE_SHARD_MOVED, else the not_leader (or shard_unavailable) error.
// ok is false when err is not a move.
func movedFrame(err error, id uint64, shardMoved, withCodes bool) (wire.Message, bool) {
	var moved *core.ShardMovedError
	if !errors.As(err, &moved) {
		return nil, false
	}
	if shardMoved {
		m := moved.Moved
		m.SubscriptionID = id
		return &m, true
	}
	return moved.WireError().ErrorMessage(withCodes), true
}
