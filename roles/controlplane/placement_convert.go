package controlplane

import (
	"slices"

	"github.com/felixmq/felix/raftmeta/catalog"
	"github.com/felixmq/felix/roles/controlplane/placement"
	"github.com/felixmq/felix/wire"
)

// placementInput turns what the catalog holds into placement's Input,
// without a clock reading or a restore delay (the placement loop adds
// them). Deregistered brokers are left out: placement treats their
// shards as those of a broker that is gone. A down broker is down since
// the expiry loop marked it (DownAtMs, on the leader's clock then), or,
// in a record without that time, since its last heartbeat.
func placementInput(in catalog.PlacementInput) placement.Input {
	var out placement.Input
	for _, br := range in.Brokers {
		st, ok := brokerStates[br.State]
		if !ok {
			continue
		}
		b := placement.Broker{NodeID: br.NodeID, Zone: br.Zone, State: st, StorageID: br.StorageID,
			CrashedStorageID: br.CrashedStorageID, RegisteredAtMs: br.RegisteredAtMs}
		if st == placement.Down {
			b.DownSinceMs = br.DownAtMs
			if b.DownSinceMs <= 0 {
				b.DownSinceMs = max(br.LastHeartbeatMs, 0)
			}
		}
		for _, su := range br.Suspects {
			b.Suspects = append(b.Suspects, placement.Suspicion{
				Shard: placement.ShardRef{Resource: placement.ResourceKey{Kind: placement.Kind(su.Kind), TenantID: su.TenantID,
					Namespace: su.Namespace, Name: su.Name}, Shard: su.Shard},
				Generation: su.Generation, Leader: su.Leader})
		}
		out.Brokers = append(out.Brokers, b)
	}
	for _, s := range in.Streams {
		out.Resources = append(out.Resources, placement.StreamResource(s))
	}
	for _, c := range in.Caches {
		out.Resources = append(out.Resources, placement.CacheResource(c))
	}
	for _, bp := range in.Positions {
		out.Reports = appendReports(out.Reports, bp)
	}
	out.Current.LastGeneration = in.LastGeneration
	for _, a := range in.Assignments {
		out.Current.Assignments = append(out.Current.Assignments, fromRecord(a))
	}
	return out
}

// appendReports adds a broker's kept reports (the current one, and the
// one under its previous storage identity) to out as placement reports.
func appendReports(out []placement.Report, bp catalog.BrokerPositions) []placement.Report {
	for _, rep := range []*wire.PositionReport{&bp.Current, bp.Previous} {
		if rep == nil || rep.StorageID == "" || bp.NodeID == "" {
			continue
		}
		if bp.Previous != nil && rep == bp.Previous && bp.Previous.StorageID == bp.Current.StorageID {
			continue // cannot happen: the catalog rotates on a new identity
		}
		r := placement.Report{NodeID: bp.NodeID, StorageID: rep.StorageID, AtMs: rep.AtMs,
			Positions: make(map[placement.ShardRef]placement.Position, len(rep.Positions))}
		for _, sp := range rep.Positions {
			r.Positions[positionRef(sp)] = placement.Position{Generation: sp.Generation, Leader: sp.Leader, Durable: sp.Durable}
		}
		out = append(out, r)
	}
	return out
}

// positionRef is the shard a position names.
func positionRef(sp wire.ShardPosition) placement.ShardRef {
	return placement.ShardRef{Resource: placement.ResourceKey{Kind: placement.Kind(sp.Kind), TenantID: sp.TenantID,
		Namespace: sp.Namespace, Name: sp.Name}, Shard: sp.Shard}
}

var brokerStates = map[wire.BrokerState]placement.BrokerState{
	wire.BrokerLive: placement.Live, wire.BrokerDraining: placement.Draining, wire.BrokerDown: placement.Down,
}

func fromRecord(a wire.ShardAssignment) placement.Assignment {
	out := placement.Assignment{
		Shard: placement.ShardRef{Resource: placement.ResourceKey{Kind: placement.Kind(a.Kind), TenantID: a.TenantID,
			Namespace: a.Namespace, Name: a.Name}, Shard: a.Shard},
		Incarnation: a.Incarnation, Owner: a.NodeID, StorageID: a.StorageID, Generation: a.Generation,
		Unavailable: a.Unavailable, Consistency: a.Consistency,
	}
	for _, r := range a.Replicas {
		out.Replicas = append(out.Replicas, placement.Replica{NodeID: r.NodeID, StorageID: r.StorageID})
	}
	return out
}

func toRecord(a placement.Assignment) wire.ShardAssignment {
	k := a.Shard.Resource
	out := wire.ShardAssignment{Kind: string(k.Kind), TenantID: k.TenantID, Namespace: k.Namespace, Name: k.Name,
		Shard: a.Shard.Shard, Incarnation: a.Incarnation, NodeID: a.Owner, StorageID: a.StorageID,
		Generation: a.Generation, Unavailable: a.Unavailable, Consistency: a.Consistency}
	for _, r := range a.Replicas {
		out.Replicas = append(out.Replicas, wire.ShardReplica{NodeID: r.NodeID, StorageID: r.StorageID})
	}
	return out
}

// placementChange is the command that takes the catalog from what it
// read (in) to next: the records that differ, the ones to drop, and the
// counter, guarded by the revision and counter read.
func placementChange(in catalog.PlacementInput, next placement.State) catalog.PlacementChange {
	ch := catalog.PlacementChange{ExpectRevision: in.Revision, ExpectLastGeneration: in.LastGeneration,
		LastGeneration: next.LastGeneration}
	current := make(map[catalog.ShardKey]wire.ShardAssignment, len(in.Assignments))
	for _, a := range in.Assignments {
		current[catalog.KeyOf(a)] = a
	}
	for _, na := range next.Assignments {
		rec := toRecord(na)
		k := catalog.KeyOf(rec)
		old, had := current[k]
		delete(current, k)
		if !had || !sameRecord(old, rec) {
			ch.Put = append(ch.Put, rec)
		}
	}
	for k := range current {
		ch.Drop = append(ch.Drop, k)
	}
	slices.SortFunc(ch.Drop, func(a, b catalog.ShardKey) int { return compareKeys(a, b) })
	return ch
}

func sameRecord(a, b wire.ShardAssignment) bool {
	return a.Kind == b.Kind && a.TenantID == b.TenantID && a.Namespace == b.Namespace && a.Name == b.Name &&
		a.Shard == b.Shard && a.Incarnation == b.Incarnation && a.NodeID == b.NodeID && a.StorageID == b.StorageID &&
		a.Generation == b.Generation && a.Unavailable == b.Unavailable && a.Consistency == b.Consistency &&
		slices.Equal(a.Replicas, b.Replicas)
}

func compareKeys(a, b catalog.ShardKey) int {
	for _, c := range [][2]string{{a.Kind, b.Kind}, {a.TenantID, b.TenantID}, {a.Namespace, b.Namespace}, {a.Name, b.Name}} {
		if c[0] != c[1] {
			if c[0] < c[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case a.Shard < b.Shard:
		return -1
	case a.Shard > b.Shard:
		return 1
	}
	return 0
}
