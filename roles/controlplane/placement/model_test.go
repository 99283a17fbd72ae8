package placement

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// world is a random cluster that the model test changes one step at a
// time, feeding each Compute output back as the next current state.
type world struct {
	rng       *rand.Rand
	zones     []string // zones a joining broker picks from ("" = none)
	brokers   []Broker
	resources []Resource
	state     State
	serial    int // makes node ids, storage ids and incarnations unique
	// fresh lists the resources created or re-created by the last step.
	fresh map[ResourceKey]bool
	// nowMs is the world's clock, handed to Compute; wait advances it and
	// down records it in the broker's DownSinceMs.
	nowMs int64
	// ends is how far each shard's leader has written; reports holds
	// every broker's last position report under each storage identity,
	// made by report after each step by the brokers that are live.
	ends    map[ShardRef]uint64
	reports map[reportKey]Report
}

// modelRestoreAfterMs is the model's FELIX_SHARD_RESTORE_AFTER_MS.
const modelRestoreAfterMs = 1000

// step is one random change to the world; it returns what it did.
type step func(w *world) string

var steps = []struct {
	weight int
	do     step
}{
	{3, (*world).join},
	{3, (*world).down},
	{2, (*world).comeBack},
	{1, (*world).comeBackWithNewStorage},
	{2, (*world).comeBackAfterCrash},
	{1, (*world).drain},
	{1, (*world).deregister},
	{4, (*world).create},
	{2, (*world).remove},
	{1, (*world).recreate},
	{3, (*world).wait},
	{1, func(*world) string { return "nothing" }},
}

func (w *world) next() string { w.serial++; return fmt.Sprint(w.serial) }

func (w *world) join() string {
	b := Broker{NodeID: "n" + w.next(), Zone: w.zones[w.rng.IntN(len(w.zones))], State: Live, StorageID: "s" + w.next()}
	w.brokers = append(w.brokers, b)
	return "join " + b.NodeID
}

// pick returns the index of a random broker satisfying ok, or -1.
func (w *world) pick(ok func(Broker) bool) int {
	var idx []int
	for i, b := range w.brokers {
		if ok(b) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return -1
	}
	return idx[w.rng.IntN(len(idx))]
}

func (w *world) setState(ok func(Broker) bool, state BrokerState, newStorage bool, verb string) string {
	i := w.pick(ok)
	if i < 0 {
		return verb + " (none)"
	}
	w.brokers[i].State, w.brokers[i].DownSinceMs = state, 0
	if state == Down {
		w.brokers[i].DownSinceMs = w.nowMs
	}
	if newStorage {
		w.brokers[i].StorageID, w.brokers[i].CrashedStorageID = "s"+w.next(), ""
	}
	return verb + " " + w.brokers[i].NodeID
}

func (w *world) down() string {
	return w.setState(func(b Broker) bool { return b.State != Down }, Down, false, "down")
}

func (w *world) comeBack() string {
	return w.setState(func(b Broker) bool { return b.State != Live }, Live, false, "back")
}

func (w *world) comeBackWithNewStorage() string {
	return w.setState(func(b Broker) bool { return b.State == Down }, Live, true, "back with new storage")
}

// comeBackAfterCrash has a broker, down or not, register again under a
// new storage identity after its machine crashed: it names the one it
// replaced, and its copies under that one may be short.
func (w *world) comeBackAfterCrash() string {
	i := w.pick(func(Broker) bool { return true })
	if i < 0 {
		return "back after a crash (none)"
	}
	b := &w.brokers[i]
	b.CrashedStorageID, b.StorageID = b.StorageID, "s"+w.next()
	b.State, b.DownSinceMs, b.RegisteredAtMs = Live, 0, w.nowMs
	return "back after a crash " + b.NodeID
}

func (w *world) drain() string {
	return w.setState(func(b Broker) bool { return b.State == Live }, Draining, false, "drain")
}

// wait advances the clock by up to one and a half restore delays, so
// down brokers' followers come due for replacement.
func (w *world) wait() string {
	d := w.rng.Int64N(modelRestoreAfterMs * 3 / 2)
	w.nowMs += d
	return fmt.Sprintf("wait %d ms", d)
}

func (w *world) deregister() string {
	i := w.pick(func(b Broker) bool { return b.State == Down })
	if i < 0 {
		return "deregister (none)"
	}
	id := w.brokers[i].NodeID
	w.brokers = slices.Delete(w.brokers, i, i+1)
	return "deregister " + id
}

func (w *world) create() string {
	kind := KindStream
	if w.rng.IntN(3) == 0 {
		kind = KindCache
	}
	r := Resource{
		Key:         ResourceKey{Kind: kind, TenantID: "t", Namespace: "ns", Name: "r" + w.next()},
		Incarnation: "i" + w.next(), Shards: uint32(w.rng.IntN(9)), Durable: w.rng.IntN(2) == 0,
		ReplicationFactor: uint32(1 + w.rng.IntN(4)), Consistency: []string{"leader", "quorum"}[w.rng.IntN(2)],
	}
	w.resources = append(w.resources, r)
	w.fresh[r.Key] = true
	return fmt.Sprintf("create %s shards=%d durable=%v rf=%d %s", r.Key, r.Shards, r.Durable, r.ReplicationFactor, r.Consistency)
}

func (w *world) remove() string {
	if len(w.resources) == 0 {
		return "delete (none)"
	}
	i := w.rng.IntN(len(w.resources))
	k := w.resources[i].Key
	w.resources = slices.Delete(w.resources, i, i+1)
	return "delete " + k.String()
}

func (w *world) recreate() string {
	if len(w.resources) == 0 {
		return "recreate (none)"
	}
	r := &w.resources[w.rng.IntN(len(w.resources))]
	r.Incarnation, r.Shards, r.Durable = "i"+w.next(), uint32(1+w.rng.IntN(8)), w.rng.IntN(2) == 0
	r.ReplicationFactor = uint32(1 + w.rng.IntN(4))
	w.fresh[r.Key] = true
	return "recreate " + r.Key.String()
}

// input is the world as Compute sees it, with its slices shuffled so
// every step also checks that order does not matter.
func (w *world) input() Input {
	in := Input{Brokers: slices.Clone(w.brokers), Resources: slices.Clone(w.resources), Current: w.state,
		NowMs: w.nowMs, RestoreAfterMs: modelRestoreAfterMs}
	keys := make([]reportKey, 0, len(w.reports))
	for k := range w.reports {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b reportKey) int { return strings.Compare(a.node+"\x00"+a.storage, b.node+"\x00"+b.storage) })
	for _, k := range keys {
		in.Reports = append(in.Reports, w.reports[k])
	}
	w.rng.Shuffle(len(in.Reports), func(i, j int) { in.Reports[i], in.Reports[j] = in.Reports[j], in.Reports[i] })
	in.Current.Assignments = slices.Clone(w.state.Assignments)
	w.rng.Shuffle(len(in.Brokers), func(i, j int) { in.Brokers[i], in.Brokers[j] = in.Brokers[j], in.Brokers[i] })
	w.rng.Shuffle(len(in.Resources), func(i, j int) { in.Resources[i], in.Resources[j] = in.Resources[j], in.Resources[i] })
	a := in.Current.Assignments
	w.rng.Shuffle(len(a), func(i, j int) { a[i], a[j] = a[j], a[i] })
	return in
}

// report advances every served shard's log and has every live broker
// report its positions: a leader its end, a follower a little behind it
// or level with it, at the generation it follows.
func (w *world) report() {
	live := map[string]string{}
	for _, b := range w.brokers {
		if b.State == Live {
			live[b.NodeID] = b.StorageID
		}
	}
	fresh := map[reportKey]Report{}
	get := func(node string) Report {
		k := reportKey{node, live[node]}
		r, ok := fresh[k]
		if !ok {
			r = Report{NodeID: node, StorageID: live[node], AtMs: w.nowMs, Positions: map[ShardRef]Position{}}
			fresh[k] = r
		}
		return r
	}
	for _, a := range w.state.Assignments {
		if len(a.Replicas) == 0 || a.Unavailable != "" {
			continue
		}
		end := w.ends[a.Shard] + uint64(w.rng.IntN(3))
		w.ends[a.Shard] = end
		if s, ok := live[a.Owner]; ok && s == a.StorageID {
			get(a.Owner).Positions[a.Shard] = Position{Generation: a.Generation, Leader: true, Durable: end}
		}
		for _, rep := range a.Replicas {
			if s, ok := live[rep.NodeID]; ok && s == rep.StorageID {
				get(rep.NodeID).Positions[a.Shard] = Position{Generation: a.Generation, Durable: end - min(end, uint64(w.rng.IntN(3)))}
			}
		}
	}
	for node, s := range live {
		w.reports[reportKey{node, s}] = get(node)
	}
}

// checkFresh: a resource placed whole in this step spreads its shards
// within one of each other over the live brokers, and over
// min(shards, zones) zones.
func (w *world) checkFresh(out Output) error {
	zone, liveZones := map[string]string{}, map[string]bool{}
	for _, b := range w.brokers {
		if b.State == Live {
			zone[b.NodeID] = zoneKey(&b)
			liveZones[zoneKey(&b)] = true
		}
	}
	if len(zone) == 0 {
		return nil
	}
	for _, r := range w.resources {
		if !w.fresh[r.Key] {
			continue
		}
		counts := ownerCounts(out.Next, r.Key)
		lo, hi := int(^uint(0)>>1), 0
		zones := map[string]bool{}
		for id := range zone {
			lo, hi = min(lo, counts[id]), max(hi, counts[id])
		}
		for owner := range counts {
			zones[zone[owner]] = true
		}
		if hi-lo > 1 {
			return fmt.Errorf("new %s spreads %v over %d live brokers (min %d, max %d)", r.Key, counts, len(zone), lo, hi)
		}
		if want := min(int(max(r.Shards, 1)), len(liveZones)); len(zones) != want {
			return fmt.Errorf("new %s covers %d zones (%v), want %d", r.Key, len(zones), counts, want)
		}
	}
	return nil
}

func TestRandomClustersKeepEveryInvariant(t *testing.T) {
	seeds, stepsPerSeed := 24, 250
	if testing.Short() {
		seeds = 8
	}
	zoneSets := [][]string{{""}, {"a", "b", "c"}, {"a", "b", ""}, {"a", "a", "a", "b"}}
	restores := 0 // followers replaced by restore, over every seed
	promotions, leaderPromotions, reopened := 0, 0, 0
	for seed := 0; seed < seeds; seed++ {
		w := &world{rng: rand.New(rand.NewPCG(uint64(seed), 14)), zones: zoneSets[seed%len(zoneSets)], nowMs: 1,
			ends: map[ShardRef]uint64{}, reports: map[reportKey]Report{}}
		for i := 0; i < 3; i++ {
			w.join()
		}
		var history []string
		for n := 0; n < stepsPerSeed; n++ {
			w.fresh = map[ResourceKey]bool{}
			history = append(history, w.randomStep())
			in := w.input()
			out, err := Compute(in)
			if err == nil {
				err = checkStep(in, out)
			}
			if err == nil {
				err = w.checkFresh(out)
			}
			if err == nil {
				err = checkOrderFree(w, in, out)
			}
			if err != nil {
				t.Fatalf("seed %d step %d: %v\nlast steps: %q", seed, n, err, history[max(0, len(history)-8):])
			}
			for _, d := range out.Decisions {
				if d.Reason == ReplicaRestore {
					restores++
				}
				if d.Kind == Reopened {
					reopened++
				}
				if d.Kind == Promoted {
					promotions++
					if in.Current.Assignments != nil && consistencyOf(in, d.Shard) != "quorum" {
						leaderPromotions++
					}
				}
			}
			w.state = out.Next
			w.report()
		}
	}
	if restores == 0 {
		t.Error("no follower was replaced by restore: the model does not exercise it")
	}
	if promotions == 0 || leaderPromotions == 0 {
		t.Errorf("%d shards promoted, %d of consistency leader: the model does not exercise both", promotions, leaderPromotions)
	}
	if reopened == 0 {
		t.Error("no shard was reopened on an owner back after a crash: the model does not exercise it")
	}
	t.Logf("%d followers replaced by restore, %d followers promoted (%d on leader shards), %d shards reopened after a crash",
		restores, promotions, leaderPromotions, reopened)
}

// consistencyOf is the consistency shard's assignment had in in.
func consistencyOf(in Input, shard ShardRef) string {
	for _, a := range in.Current.Assignments {
		if a.Shard == shard {
			return a.Consistency
		}
	}
	return ""
}

// checkOrderFree: the same input in another order gives the same output.
func checkOrderFree(w *world, in Input, out Output) error {
	w.state = in.Current
	again, err := Compute(w.input())
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(again, out) {
		return fmt.Errorf("a reordered input gave another output")
	}
	return nil
}

func (w *world) randomStep() string {
	total := 0
	for _, s := range steps {
		total += s.weight
	}
	n := w.rng.IntN(total)
	for _, s := range steps {
		if n < s.weight {
			return s.do(w)
		}
		n -= s.weight
	}
	panic("unreachable")
}
