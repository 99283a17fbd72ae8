package broker

import (
	"slices"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/wire"
)

// positions is what each heartbeat reports of the replicated shards this
// broker holds (wire.BrokerHeartbeat.Positions): for every durable shard
// it leads that has followers, its generation, durable offset and end;
// for every replica it holds of another broker's shard, the generation of
// the leader that last shipped to it and its durable offset. A
// leader-consistency shard's failover decides from them (placement's
// furthestReported). At most wire.MaxPositions, the first by shard.
func (r *replication) positions() []wire.ShardPosition {
	leading, following := r.held()
	out := make([]wire.ShardPosition, 0, len(leading)+len(following))
	for _, sr := range leading {
		sr.mu.Lock()
		gen, followers, stopped := sr.generation, sr.setSize > 1, sr.stopped
		sr.mu.Unlock()
		sh := sr.leaderShard()
		if gen == 0 || !followers || stopped || sh == nil {
			continue
		}
		// Durable first: the end read after it is never short of it.
		durable := sh.LogDurableOffset()
		end := max(sh.LogNextOffset(), durable)
		out = append(out, position(sr.ref, gen, true, durable, end))
	}
	for ref, gen := range following {
		rp, ok := r.s.core.StreamReplica(core.StreamKey{Tenant: ref.tenant, Namespace: ref.ns, Stream: ref.name}, ref.shard)
		if gen == 0 || !ok || rp.Damaged() {
			// A damaged copy reports nothing until it is refilled: a
			// leader-consistency shard must not promote it.
			continue
		}
		out = append(out, position(ref, gen, false, rp.DurableOffset(), 0))
	}
	slices.SortFunc(out, func(a, b wire.ShardPosition) int {
		return cmpKeys(a.Kind+"\x00"+a.TenantID+"\x00"+a.Namespace+"\x00"+a.Name, a.Shard, "",
			b.Kind+"\x00"+b.TenantID+"\x00"+b.Namespace+"\x00"+b.Name, b.Shard, "")
	})
	if len(out) > wire.MaxPositions {
		out = out[:wire.MaxPositions]
	}
	return out
}

// reportPositions is positions for a heartbeat: it first keeps them as
// what each copy promised (core.Broker.RecordPromises), so that a copy
// found shorter at its next open is known to be damaged.
func (r *replication) reportPositions() []wire.ShardPosition {
	ps := r.positions()
	if err := r.s.core.RecordPromises(core.PromisesOf(ps)); err != nil {
		r.s.log.Warn("keeping the copies' promised positions", "err", err)
	}
	return ps
}

func position(ref shardRef, gen uint64, leader bool, durable, end uint64) wire.ShardPosition {
	return wire.ShardPosition{Kind: string(ref.kind), TenantID: ref.tenant, Namespace: ref.ns, Name: ref.name, Shard: ref.shard,
		Generation: gen, Leader: leader, Durable: durable, End: end}
}
