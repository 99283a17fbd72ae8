package controlplane

import (
	"context"
	"net/http"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/raftmeta/catalog"
	"github.com/felixmq/felix/roles/controlplane/placement"
	"github.com/felixmq/felix/wire"
)

const pPlacementReplication = "/v1/placement/replication"

func (s *Service) getReplication(r *http.Request, _ *auth.Identity) (int, any, error) {
	v, err := s.Replication(r.Context())
	return http.StatusOK, v, err
}

// Replication reports every durable shard whose stream has a replication
// factor above 1 or that is under-replicated: its leader, its followers
// and the state of each copy, against the factor. It reads the registry,
// the catalog and the placement as the placement loop does (after a
// barrier), on any member.
//
// Each copy carries its broker's last reported position for the shard
// (the report made under the copy's storage identity) and how old that
// report is, and each follower its lag behind the leader's reported end.
func (s *Service) Replication(ctx context.Context) (wire.ReplicationView, error) {
	in, err := s.store.PlacementInput(ctx)
	if err != nil {
		return wire.ReplicationView{}, err
	}
	pos := newPositionIndex(in.Positions, s.now().UnixMilli())
	reps := placement.Replication(placementInput(in))
	v := wire.ReplicationView{Shards: make([]wire.ShardReplication, 0, len(reps))}
	for _, r := range reps {
		k := r.Shard.Resource
		sr := wire.ShardReplication{Kind: string(k.Kind), TenantID: k.TenantID, Namespace: k.Namespace, Name: k.Name,
			Shard: r.Shard.Shard, Generation: r.Generation, Leader: r.Leader.NodeID, LeaderState: r.Leader.State,
			Desired: r.Desired, Current: r.Current, UnderReplicated: r.UnderReplicated(),
			Replicas: make([]wire.ReplicaState, 0, len(r.Replicas))}
		sr.LeaderPosition = pos.of(r.Leader.NodeID, r.Leader.StorageID, r.Shard)
		for _, c := range r.Replicas {
			rs := wire.ReplicaState{NodeID: c.NodeID, StorageID: c.StorageID, State: c.State, Position: pos.of(c.NodeID, c.StorageID, r.Shard)}
			if l, f := sr.LeaderPosition, rs.Position; l != nil && f != nil && l.Generation == sr.Generation && f.Generation == sr.Generation {
				lag := l.End - min(l.End, f.Durable)
				rs.Lag = &lag
			}
			sr.Replicas = append(sr.Replicas, rs)
		}
		v.Shards = append(v.Shards, sr)
	}
	return v, nil
}

// positionIndex finds a copy's last reported position: the report its
// broker made under the copy's storage identity.
type positionIndex struct {
	nowMs   int64
	reports map[[2]string]*wire.PositionReport
	shards  map[*wire.PositionReport]map[placement.ShardRef]wire.ShardPosition
}

func newPositionIndex(all []catalog.BrokerPositions, nowMs int64) *positionIndex {
	x := &positionIndex{nowMs: nowMs, reports: map[[2]string]*wire.PositionReport{},
		shards: map[*wire.PositionReport]map[placement.ShardRef]wire.ShardPosition{}}
	for i := range all {
		for _, rep := range []*wire.PositionReport{&all[i].Current, all[i].Previous} {
			if rep != nil && rep.StorageID != "" {
				x.reports[[2]string{all[i].NodeID, rep.StorageID}] = rep
			}
		}
	}
	return x
}

// of is node's last reported position for shard under storage, or nil.
func (x *positionIndex) of(node, storage string, shard placement.ShardRef) *wire.CopyPosition {
	rep := x.reports[[2]string{node, storage}]
	if rep == nil || node == "" {
		return nil
	}
	m, ok := x.shards[rep]
	if !ok {
		m = make(map[placement.ShardRef]wire.ShardPosition, len(rep.Positions))
		for _, sp := range rep.Positions {
			m[positionRef(sp)] = sp
		}
		x.shards[rep] = m
	}
	sp, ok := m[shard]
	if !ok {
		return nil
	}
	return &wire.CopyPosition{Generation: sp.Generation, Durable: sp.Durable, End: sp.End, ReportAgeMs: max(0, x.nowMs-rep.AtMs)}
}
