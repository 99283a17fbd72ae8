package broker

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/internal/metricdoc"
	"github.com/felixmq/felix/wire"
)

// A broker in a cluster serves only the shards the control plane placed on
// it. Its core opens none of a stream's shards by itself
// (core.Config.PlacedShards); the broker opens each shard it gains with a
// view and closes each it loses. Catalog sync and views arrive
// independently: a shard gained before its stream reached the core opens
// when the stream does (catalogState.ApplyStream calls openOwned).

// ownership is what the broker keeps about the shards it owns.
type ownership struct {
	// mu serializes applying a view with opening the shards of a stream
	// the catalog just applied, so that a shard is never opened from a
	// view older than the one that closed it.
	mu sync.Mutex
	// streams and caches count the shards owned, for
	// felix_broker_shards_owned.
	streams, caches atomic.Int64
}

var ownershipHelp = map[string]string{
	"felix_broker_shards_owned": "Shards the cluster view places on this broker, by kind (stream or cache); 0 on a standalone broker, which serves every shard.",
}

// watchOwnership registers the owned-shard gauges.
func (s *Server) watchOwnership() {
	metricdoc.Describe(ownershipHelp)
	s.metrics.set.NewGauge(`felix_broker_shards_owned{kind="stream"}`, func() float64 { return float64(s.own.streams.Load()) })
	s.metrics.set.NewGauge(`felix_broker_shards_owned{kind="cache"}`, func() float64 { return float64(s.own.caches.Load()) })
}

// applyView makes v the view the broker routes by and acts on the shards
// this broker gained and lost with it.
func (s *Server) applyView(v wire.ClusterView) {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	gained, lost := s.routes.Apply(v)
	s.ownershipChanged(gained, lost)
	if rv := s.routes.view.Load(); rv != nil {
		s.repl.reconcile(rv)
	}
}

// ownershipChanged opens the shards this broker gained and closes the
// ones it lost (s.own.mu is held). A shard that stays here with a new
// generation is not closed: it only takes the new generation.
func (s *Server) ownershipChanged(gained, lost []OwnedShard) {
	stays := make(map[shardRef]bool, len(gained))
	for _, o := range gained {
		stays[o.ref()] = true
	}
	for _, o := range lost {
		s.countOwned(o.Kind, -1)
		if !stays[o.ref()] {
			s.loseShard(o)
		}
	}
	for _, o := range gained {
		s.countOwned(o.Kind, 1)
		if o.Kind == wire.ShardKindStream {
			s.openStreamShard(o.streamKey(), o.Shard, o.Generation, o.Incarnation)
		}
	}
}

func (o OwnedShard) ref() shardRef {
	return shardRef{kind: o.Kind, tenant: o.Tenant, ns: o.NS, name: o.Name, shard: o.Shard}
}

func (o OwnedShard) streamKey() core.StreamKey {
	return core.StreamKey{Tenant: o.Tenant, Namespace: o.NS, Stream: o.Name}
}

func (s *Server) countOwned(kind wire.ShardKind, d int64) {
	if kind == wire.ShardKindCache {
		s.own.caches.Add(d)
	} else {
		s.own.streams.Add(d)
	}
}

// openStreamShard opens a gained stream shard in the core. A stream the
// core does not hold yet, or holds in another incarnation, opens it when
// the catalog applies it.
func (s *Server) openStreamShard(k core.StreamKey, shard uint32, generation uint64, incarnation string) {
	st, ok := s.core.Stream(k)
	if !ok || (incarnation != "" && st.Spec().Incarnation != "" && st.Spec().Incarnation != incarnation) {
		return
	}
	if v := s.routes.view.Load(); v != nil {
		ref := shardRef{kind: wire.ShardKindStream, tenant: k.Tenant, ns: k.Namespace, name: k.Stream, shard: shard}
		if a, ok := v.assignments[ref]; ok && a.NodeID == s.routes.self && a.Generation == generation && needsRecovery(a) {
			// A durable shard with followers is taken over first
			// (repl_recover.go); it opens when that is done.
			if sh, err := st.Shard(shard); err == nil && sh != nil {
				return
			}
			s.recoverShard(a)
			return
		}
	}
	if err := s.core.OpenStreamShard(k, shard, generation); err != nil {
		var we *wire.Error
		if errors.As(err, &we) && we.Code == wire.CodeNotFound {
			return // removed meanwhile
		}
		s.log.Warn("opening a stream shard placed on this broker", "tenant", k.Tenant, "namespace", k.Namespace,
			"stream", k.Stream, "shard", shard, "generation", generation, "err", err)
	}
}

// loseShard closes a stream shard (its subscribers end with shard_moved;
// a durable log closes, its files stay) or drops a cache shard's keys
// (its watches end likewise).
func (s *Server) loseShard(o OwnedShard) {
	s.stopRecovery(o.ref())
	moved := s.movedCause(o)
	switch o.Kind {
	case wire.ShardKindStream:
		k := o.streamKey()
		if st, ok := s.core.Stream(k); ok {
			if sh, err := st.Shard(o.Shard); err == nil && sh.Durable() {
				next := sh.NextOffset()
				moved.Moved.ResumeFrom = &next
			}
		}
		s.core.CloseStreamShard(k, o.Shard, moved)
	case wire.ShardKindCache:
		if c, ok := s.core.Cache(core.CacheKey{Tenant: o.Tenant, Namespace: o.NS, Cache: o.Name}); ok {
			c.DropShard(o.Shard, c.Shards(), moved)
		}
	}
}

// movedCause says where a lost shard went: the new owner, its client
// address and generation when the view names one that serves it.
func (s *Server) movedCause(o OwnedShard) *core.ShardMovedError {
	m := wire.ShardMoved{Shard: o.Shard}
	if to := o.To; to.NodeID != "" && to.Unavailable == "" {
		m.Generation = to.Generation
		if b, ok := s.routes.Broker(to.NodeID); ok && len(b.ClientAddrs) > 0 && b.ClientAddrs[0] != "" {
			m.NodeID, m.Addr = to.NodeID, b.ClientAddrs[0]
		}
	}
	return &core.ShardMovedError{Moved: m}
}

// openOwned opens the shards of a stream the catalog just applied that
// the view places on this broker (a replaced stream opens none by
// itself). Standalone brokers open every shard in the core already.
func (s *Server) openOwned(spec wire.StreamSpec) {
	if s.cluster == nil {
		return
	}
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	v := s.routes.view.Load()
	if v == nil {
		return
	}
	k := core.StreamKey{Tenant: spec.TenantID, Namespace: spec.Namespace, Stream: spec.Stream}
	for i := range max(spec.Shards, 1) {
		a, ok := v.assignments[shardRef{kind: wire.ShardKindStream, tenant: k.Tenant, ns: k.Namespace, name: k.Stream, shard: i}]
		if ok && s.routes.mine(a) {
			s.openStreamShard(k, i, a.Generation, a.Incarnation)
		}
	}
}

// servedShard is st.Shard for a request the route table sent here. The
// catalog makes a stream visible before it opens the shards the view
// places here (openOwned runs after the apply, sometimes after fetching
// the view), so a request that arrives in between finds its shard not
// open yet: it opens the owned shards itself (serialized with the
// catalog's open by s.own.mu) and asks once more.
func (s *Server) servedShard(st *core.Stream, idx uint32) (*core.Shard, error) {
	sh, err := st.Shard(idx)
	if err == nil || s.cluster == nil {
		return sh, err
	}
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeShardUnavailable || we.Detail[wire.DetailReason] != core.ReasonNotReady {
		return sh, err
	}
	s.openOwned(st.Spec())
	k := st.Key()
	if done, ok := s.recovering(shardRef{kind: wire.ShardKindStream, tenant: k.Tenant, ns: k.Namespace, name: k.Stream, shard: idx}); ok {
		// Being taken over: wait a little for it rather than refuse.
		t := time.NewTimer(2 * time.Second)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	return st.Shard(idx)
}
