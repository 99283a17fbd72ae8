package placement

import (
	"sort"

	"github.com/felixmq/felix/wire"
)

// chooser picks the owner of each shard that needs one. Among the live
// brokers (draining and down ones take nothing new) it takes the one
// with, in this order:
//
//  1. the fewest shards of the same resource (so a resource's shards
//     spread over the brokers like a round robin: within one of each
//     other when placed together);
//  2. the fewest shards of the same resource in its zone (so they spread
//     over zones as far as rule 1 allows; a broker without a zone is
//     alone in its own);
//  3. the fewest shards in the whole cluster;
//  4. the lowest tie-break hash of (resource, shard, node id), a
//     rendezvous hash, so ties do not all fall to the same broker;
//  5. the lowest node id (should two hashes collide).
//
// Counts include every kept assignment and every choice made so far in
// this Compute call, so the result does not depend on map order.
type chooser struct {
	// live are the live brokers, sorted by node id.
	live []*candidate
	// byNode indexes live by node id.
	byNode map[string]*candidate
	// zoneOf is the zone number of every registered broker (numbers
	// index zoneCount; brokers without a zone each have their own).
	zoneOf map[string]int
	// zoneCount is the current resource's shard count per zone number.
	zoneCount []int
	// seed is the current resource's tie-break seed.
	seed uint64
}

// candidate is one live broker with its running counts.
type candidate struct {
	b    *Broker
	zone int
	// hash is the node id's hash, mixed into the tie-break.
	hash uint64
	// total counts the shards it owns in the cluster.
	total int
	// own counts the current resource's shards it owns.
	own int
}

// newChooser builds the candidates and counts every owner p kept.
func newChooser(p *planner) *chooser {
	ch := &chooser{
		byNode: make(map[string]*candidate),
		zoneOf: make(map[string]int, len(p.brokers)),
	}
	zones := make(map[string]int)
	for id, b := range p.brokers {
		z, ok := zones[zoneKey(b)]
		if !ok {
			z = len(zones)
			zones[zoneKey(b)] = z
		}
		ch.zoneOf[id] = z
		if b.State == Live {
			c := &candidate{b: b, zone: z, hash: wire.KeyHash(id)}
			ch.live = append(ch.live, c)
			ch.byNode[id] = c
		}
	}
	ch.zoneCount = make([]int, len(zones))
	sort.Slice(ch.live, func(i, j int) bool { return ch.live[i].b.NodeID < ch.live[j].b.NodeID })
	for _, rp := range p.plans {
		rp.eachKept(func(a *Assignment) {
			if c := ch.byNode[a.Owner]; c != nil {
				c.total++
			}
		})
	}
	return ch
}

// zoneKey is b's zone, or a key of its own when it has none.
func zoneKey(b *Broker) string {
	if b.Zone == "" {
		return "\x00" + b.NodeID
	}
	return b.Zone
}

// eachKept calls f for every shard of rp that keeps its owner.
func (rp *resourcePlan) eachKept(f func(a *Assignment)) {
	next := 0
	for i := range rp.shards {
		if next < len(rp.needy) && rp.needy[next] == uint32(i) {
			next++
			continue
		}
		if rp.shards[i].Owner != "" {
			f(&rp.shards[i])
		}
	}
}

// startResource resets the per-resource counts to rp's kept shards.
func (ch *chooser) startResource(rp *resourcePlan) {
	for _, c := range ch.live {
		c.own = 0
	}
	clear(ch.zoneCount)
	rp.eachKept(func(a *Assignment) {
		if c := ch.byNode[a.Owner]; c != nil {
			c.own++
		}
		if z, ok := ch.zoneOf[a.Owner]; ok {
			ch.zoneCount[z]++
		}
	})
	ch.seed = wire.KeyHash(rp.r.Key.String())
}

// choose returns the owner for shard of the current resource and counts
// it, or false when no broker is live.
func (ch *chooser) choose(shard uint32) (*Broker, bool) {
	var best *candidate
	shardSeed := mix(ch.seed + uint64(shard)*0x9e3779b97f4a7c15)
	for _, c := range ch.live {
		if best == nil || ch.better(c, best, shardSeed) {
			best = c
		}
	}
	if best == nil {
		return nil, false
	}
	best.own++
	best.total++
	ch.zoneCount[best.zone]++
	return best.b, true
}

// better reports whether c ranks before best (the rules on chooser).
func (ch *chooser) better(c, best *candidate, shardSeed uint64) bool {
	if c.own != best.own {
		return c.own < best.own
	}
	if zc, zb := ch.zoneCount[c.zone], ch.zoneCount[best.zone]; zc != zb {
		return zc < zb
	}
	if c.total != best.total {
		return c.total < best.total
	}
	if hc, hb := mix(c.hash^shardSeed), mix(best.hash^shardSeed); hc != hb {
		return hc < hb
	}
	return c.b.NodeID < best.b.NodeID
}

// mix is splitmix64's finalizer: a fixed bijection that scatters bits.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
