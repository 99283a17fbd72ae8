package placement

import (
	"reflect"
	"strings"
	"testing"

	"github.com/felixmq/felix/wire"
)

func threeBrokers() []Broker {
	return []Broker{live("n1", "", "s1"), live("n2", "", "s2"), live("n3", "", "s3")}
}

func TestAStreamsShardsSpreadOverTheBrokers(t *testing.T) {
	for _, tc := range []struct {
		shards uint32
		want   []int // sorted shard counts per broker
	}{
		{1, []int{0, 0, 1}},
		{3, []int{1, 1, 1}},
		{6, []int{2, 2, 2}},
		{7, []int{2, 2, 3}},
	} {
		out := mustCompute(t, Input{Brokers: threeBrokers(), Resources: []Resource{stream("s", tc.shards, true)}})
		got := ownerCounts(out.Next, streamKey("s"))
		counts := []int{got["n1"], got["n2"], got["n3"]}
		if !sameMultiset(counts, tc.want) {
			t.Errorf("%d shards: per-broker counts %v, want %v", tc.shards, counts, tc.want)
		}
		if len(out.Decisions) != int(tc.shards) || out.Next.LastGeneration != uint64(tc.shards) {
			t.Errorf("%d shards: %d decisions, last generation %d", tc.shards, len(out.Decisions), out.Next.LastGeneration)
		}
		for _, d := range out.Decisions {
			if d.Kind != Placed || d.From != "" || d.To == "" {
				t.Errorf("decision %+v, want a placement", d)
			}
		}
	}
}

func sameMultiset(a, b []int) bool {
	count := map[int]int{}
	for _, x := range a {
		count[x]++
	}
	for _, x := range b {
		count[x]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestSingleShardResourcesBalanceTheClusterTotals(t *testing.T) {
	brokers := []Broker{live("n1", "", "s1"), live("n2", "", "s2"), live("n3", "", "s3"), live("n4", "", "s4")}
	var res []Resource
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		res = append(res, stream(name, 1, false))
	}
	res = append(res, Resource{Key: ResourceKey{Kind: KindCache, TenantID: "t", Namespace: "ns", Name: "a"}, Incarnation: "c1", Shards: 4})
	out := mustCompute(t, Input{Brokers: brokers, Resources: res})
	total := map[string]int{}
	for _, a := range out.Next.Assignments {
		total[a.Owner]++
	}
	for _, b := range brokers {
		if total[b.NodeID] != 3 {
			t.Errorf("totals %v, want 3 shards on every broker", total)
			break
		}
	}
}

func TestAStreamsShardsSpreadOverZones(t *testing.T) {
	// Zone a has three brokers, b and c one each: a three-shard stream
	// still lands in every zone, not on three brokers of zone a.
	brokers := []Broker{
		live("a1", "a", "s1"), live("a2", "a", "s2"), live("a3", "a", "s3"),
		live("b1", "b", "s4"), live("c1", "c", "s5"),
	}
	zone := map[string]string{"a1": "a", "a2": "a", "a3": "a", "b1": "b", "c1": "c"}
	out := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{stream("s", 3, true)}})
	zones := map[string]int{}
	for owner, n := range ownerCounts(out.Next, streamKey("s")) {
		zones[zone[owner]] += n
	}
	if !reflect.DeepEqual(zones, map[string]int{"a": 1, "b": 1, "c": 1}) {
		t.Errorf("per-zone counts %v, want one shard in each zone", zones)
	}

	// Two brokers in each of three zones: six shards, two per zone.
	brokers = []Broker{
		live("a1", "a", "s1"), live("a2", "a", "s2"), live("b1", "b", "s3"),
		live("b2", "b", "s4"), live("c1", "c", "s5"), live("c2", "c", "s6"),
	}
	zone = map[string]string{"a1": "a", "a2": "a", "b1": "b", "b2": "b", "c1": "c", "c2": "c"}
	out = mustCompute(t, Input{Brokers: brokers, Resources: []Resource{stream("s", 6, false)}})
	zones = map[string]int{}
	for owner, n := range ownerCounts(out.Next, streamKey("s")) {
		zones[zone[owner]] += n
		if n != 1 {
			t.Errorf("broker %s has %d shards, want 1", owner, n)
		}
	}
	if !reflect.DeepEqual(zones, map[string]int{"a": 2, "b": 2, "c": 2}) {
		t.Errorf("per-zone counts %v, want two shards in each zone", zones)
	}
}

func TestAJoiningBrokerTakesNewShardsAndMovesNone(t *testing.T) {
	brokers := []Broker{live("n1", "", "s1"), live("n2", "", "s2")}
	res := []Resource{stream("old", 4, true)}
	first := mustCompute(t, Input{Brokers: brokers, Resources: res})

	brokers = append(brokers, live("n3", "", "s3"))
	joined := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: first.Next})
	if len(joined.Decisions) != 0 {
		t.Fatalf("a join moved shards: %+v", joined.Decisions)
	}

	res = append(res, stream("x", 1, false), stream("y", 1, false))
	grown := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: joined.Next})
	for _, name := range []string{"x", "y"} {
		if a := find(t, grown.Next, ShardRef{streamKey(name), 0}); a.Owner != "n3" {
			t.Errorf("new stream %s went to %s, want the new broker n3 (fewest shards)", name, a.Owner)
		}
	}
	if len(grown.Decisions) != 2 {
		t.Errorf("decisions %+v, want the two placements only", grown.Decisions)
	}
}

func TestADownOwnersInMemoryShardsMoveAtOnce(t *testing.T) {
	brokers := threeBrokers()
	res := []Resource{stream("s", 3, false)}
	first := mustCompute(t, Input{Brokers: brokers, Resources: res})
	victim := find(t, first.Next, ShardRef{streamKey("s"), 1})

	for i := range brokers {
		if brokers[i].NodeID == victim.Owner {
			brokers[i].State = Down
		}
	}
	out := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: first.Next})
	moved := find(t, out.Next, victim.Shard)
	if moved.Owner == victim.Owner || moved.Unavailable != "" || moved.Generation != first.Next.LastGeneration+1 {
		t.Fatalf("shard on the down broker is now %+v, want a live owner at generation %d", moved, first.Next.LastGeneration+1)
	}
	want := []Decision{{Kind: Reassigned, Shard: victim.Shard, Incarnation: "i1", From: victim.Owner, To: moved.Owner, Generation: moved.Generation}}
	if !reflect.DeepEqual(out.Decisions, want) {
		t.Errorf("decisions %+v, want %+v", out.Decisions, want)
	}
}

func TestADurableShardWaitsForItsOwnerAndServesWhenItIsBack(t *testing.T) {
	brokers := threeBrokers()
	res := []Resource{stream("s", 3, true)}
	first := mustCompute(t, Input{Brokers: brokers, Resources: res})
	victim := find(t, first.Next, ShardRef{streamKey("s"), 2})
	if victim.StorageID == "" {
		t.Fatalf("durable assignment %+v does not record its storage identity", victim)
	}

	set := func(state BrokerState, storage string) {
		for i := range brokers {
			if brokers[i].NodeID == victim.Owner {
				brokers[i].State, brokers[i].StorageID = state, storage
			}
		}
	}
	set(Down, victim.StorageID)
	down := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: first.Next})
	waiting := find(t, down.Next, victim.Shard)
	if waiting.Owner != victim.Owner || waiting.Generation != victim.Generation || waiting.Unavailable != ReasonOwnerDown {
		t.Fatalf("durable shard of a down owner is %+v, want it kept and waiting (owner_down)", waiting)
	}
	if len(down.Decisions) != 1 || down.Decisions[0].Kind != Waiting || down.Decisions[0].Reason != ReasonOwnerDown {
		t.Errorf("decisions %+v, want one Waiting owner_down", down.Decisions)
	}

	set(Live, victim.StorageID)
	back := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: down.Next})
	if !reflect.DeepEqual(back.Next, first.Next) {
		t.Errorf("owner back with the same storage: %+v, want the first placement again", back.Next)
	}
	if len(back.Decisions) != 1 || back.Decisions[0].Kind != Restored {
		t.Errorf("decisions %+v, want one Restored", back.Decisions)
	}
}

func TestADurableShardWhoseOwnerLostItsStorageNeedsAnOperator(t *testing.T) {
	brokers := threeBrokers()
	res := []Resource{stream("s", 3, true)}
	first := mustCompute(t, Input{Brokers: brokers, Resources: res})
	victim := find(t, first.Next, ShardRef{streamKey("s"), 0})
	for i := range brokers {
		if brokers[i].NodeID == victim.Owner {
			brokers[i].StorageID = "fresh"
		}
	}
	out := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: first.Next})
	got := find(t, out.Next, victim.Shard)
	if got.Owner != victim.Owner || got.StorageID != victim.StorageID || got.Unavailable != ReasonStorageLost {
		t.Errorf("shard on a broker back with new storage is %+v, want it kept and storage_lost", got)
	}
	// Its in-memory neighbours on the same broker are not affected.
	mem := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{stream("m", 3, false)}})
	for _, a := range mem.Next.Assignments {
		if a.Unavailable != "" {
			t.Errorf("in-memory %+v is unavailable", a)
		}
	}
}

func TestWithoutALiveBrokerShardsWaitThenArePlaced(t *testing.T) {
	res := []Resource{stream("d", 2, true), stream("m", 2, false)}
	none := mustCompute(t, Input{Brokers: []Broker{{NodeID: "n1", State: Down, StorageID: "s1"}}, Resources: res})
	for _, a := range none.Next.Assignments {
		if a.Owner != "" || a.Unavailable != ReasonNotAssigned {
			t.Errorf("with no live broker %+v, want not_assigned", a)
		}
	}
	brokers := []Broker{live("n1", "", "s1")}
	placed := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: none.Next})
	for _, a := range placed.Next.Assignments {
		if a.Owner != "n1" || a.Unavailable != "" {
			t.Errorf("after n1 is live %+v, want it on n1", a)
		}
	}

	// n1 goes down and is the only broker: its in-memory shards wait too,
	// and move as soon as another broker is live.
	brokers[0].State = Down
	alone := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: placed.Next})
	for _, a := range alone.Next.Assignments {
		if a.Owner != "n1" || a.Unavailable != ReasonOwnerDown {
			t.Errorf("with its only broker down %+v, want it waiting on n1", a)
		}
	}
	brokers = append(brokers, live("n2", "", "s2"))
	rescued := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: alone.Next})
	for _, a := range rescued.Next.Assignments {
		durable := a.Shard.Resource.Name == "d"
		if durable && (a.Owner != "n1" || a.Unavailable != ReasonOwnerDown) || !durable && (a.Owner != "n2" || a.Unavailable != "") {
			t.Errorf("after n2 joins %+v", a)
		}
	}
}

func TestAnUnregisteredOwnerCountsAsDown(t *testing.T) {
	res := []Resource{stream("d", 1, true), stream("m", 1, false)}
	cur := mustCompute(t, Input{Brokers: []Broker{live("gone", "", "s0")}, Resources: res})
	out := mustCompute(t, Input{Brokers: []Broker{live("n1", "", "s1")}, Resources: res, Current: cur.Next})
	if a := find(t, out.Next, ShardRef{streamKey("d"), 0}); a.Owner != "gone" || a.Unavailable != ReasonOwnerDown {
		t.Errorf("durable shard of an unregistered owner %+v, want it waiting", a)
	}
	if a := find(t, out.Next, ShardRef{streamKey("m"), 0}); a.Owner != "n1" {
		t.Errorf("in-memory shard of an unregistered owner %+v, want it on n1", a)
	}
}

func TestADrainingBrokerKeepsItsShardsAndTakesNoNewOnes(t *testing.T) {
	brokers := threeBrokers()
	res := []Resource{stream("s", 3, false)}
	first := mustCompute(t, Input{Brokers: brokers, Resources: res})
	brokers[0].State = Draining
	res = append(res, stream("new", 6, false))
	out := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: first.Next})
	for _, a := range first.Next.Assignments {
		if got := find(t, out.Next, a.Shard); !reflect.DeepEqual(got, a) {
			t.Errorf("%v changed from %+v to %+v", a.Shard, a, got)
		}
	}
	if n := ownerCounts(out.Next, streamKey("new"))["n1"]; n != 0 {
		t.Errorf("the draining broker took %d new shards", n)
	}
}

func TestDeletedAndRecreatedResources(t *testing.T) {
	brokers := threeBrokers()
	res := []Resource{stream("keep", 2, true), stream("del", 2, true), stream("again", 2, true)}
	first := mustCompute(t, Input{Brokers: brokers, Resources: res})

	again := stream("again", 3, true)
	again.Incarnation = "i2"
	res = []Resource{res[0], again}
	out := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: first.Next})

	kinds := map[string][]DecisionKind{}
	for _, d := range out.Decisions {
		kinds[d.Shard.Resource.Name] = append(kinds[d.Shard.Resource.Name], d.Kind)
		if d.Kind == Dropped && d.Shard.Resource.Name == "del" && d.Reason != DropDeleted ||
			d.Kind == Dropped && d.Shard.Resource.Name == "again" && d.Reason != DropRecreated {
			t.Errorf("drop %+v has the wrong reason", d)
		}
	}
	want := map[string][]DecisionKind{
		"del":   {Dropped, Dropped},
		"again": {Dropped, Placed, Dropped, Placed, Placed},
	}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("decision kinds %v, want %v", kinds, want)
	}
	for _, a := range out.Next.Assignments {
		if a.Shard.Resource.Name == "again" && (a.Incarnation != "i2" || a.Generation <= first.Next.LastGeneration) {
			t.Errorf("re-created %+v, want incarnation i2 at a generation above %d", a, first.Next.LastGeneration)
		}
	}
}

func TestAShrunkShardCountDropsTheShardsBeyondIt(t *testing.T) {
	res := []Resource{stream("s", 4, false)}
	first := mustCompute(t, Input{Brokers: threeBrokers(), Resources: res})
	res[0].Shards = 2
	out := mustCompute(t, Input{Brokers: threeBrokers(), Resources: res, Current: first.Next})
	if len(out.Decisions) != 2 || out.Decisions[0].Reason != DropBeyondShards || out.Decisions[1].Shard.Shard != 3 {
		t.Errorf("decisions %+v, want shards 2 and 3 dropped beyond the count", out.Decisions)
	}
}

func TestTheOrderOfTheInputDoesNotMatter(t *testing.T) {
	brokers := []Broker{live("n1", "a", "s1"), live("n2", "b", "s2"), live("n3", "a", "s3"), live("n4", "", "s4")}
	res := []Resource{stream("x", 5, true), stream("y", 3, false), stream("z", 1, true)}
	want := mustCompute(t, Input{Brokers: brokers, Resources: res})
	rb := []Broker{brokers[3], brokers[1], brokers[0], brokers[2]}
	rr := []Resource{res[2], res[0], res[1]}
	got := mustCompute(t, Input{Brokers: rb, Resources: rr})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reordered input gave another placement:\n%+v\nwant\n%+v", got, want)
	}
}

func TestBadInputIsRefusedWithEveryProblem(t *testing.T) {
	in := Input{
		Brokers:   []Broker{live("n1", "", "s1"), live("n1", "", "s2"), {NodeID: "", State: Live}, {NodeID: "n9", State: "asleep"}},
		Resources: []Resource{stream("s", 1, false), stream("s", 1, false), {Key: ResourceKey{Kind: "queue", Name: "q"}}, stream("big", MaxShards+1, false)},
		Current: State{LastGeneration: 2, Assignments: []Assignment{
			{Shard: ShardRef{streamKey("s"), 0}, Owner: "n1", Generation: 3},
			{Shard: ShardRef{streamKey("s"), 0}, Owner: "n1", Generation: 1},
			{Shard: ShardRef{streamKey("t"), 0}, Owner: "n1"},
		}},
	}
	_, err := Compute(in)
	got := strings.Join(inputError(t, err), "\n")
	for _, want := range []string{
		`broker "n1" is listed twice`, "broker 2 has an empty node id", `state "asleep"`,
		"stream:t/ns/s is listed twice", `kind "queue"`, "65537 shards",
		"two assignments", "generation 3 above the last generation 2", "at generation 0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems\n%s\ndo not mention %q", got, want)
		}
	}
}

func TestAnInputErrorListsAtMostTwentyProblemsAndCountsTheRest(t *testing.T) {
	var in Input
	for i := 0; i < 30; i++ {
		in.Brokers = append(in.Brokers, Broker{State: Live})
	}
	_, err := Compute(in)
	problems := inputError(t, err)
	if len(problems) != maxProblems+1 || problems[maxProblems] != "and 10 more" {
		t.Errorf("%d problems, last %q", len(problems), problems[len(problems)-1])
	}
}

func TestCatalogSpecsBecomeResources(t *testing.T) {
	s := StreamResource(wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s", Shards: 4, Durable: true,
		Consistency: "quorum", ReplicationFactor: 3, Incarnation: "7"})
	want := Resource{Key: streamKey("s"), Incarnation: "7", Shards: 4, Durable: true, ReplicationFactor: 3, Consistency: "quorum"}
	if s != want {
		t.Errorf("stream resource %+v, want %+v", s, want)
	}
	if d := StreamResource(wire.StreamSpec{Stream: "s"}); d.ReplicationFactor != 1 || d.Consistency != "leader" {
		t.Errorf("stream defaults %+v, want one copy and leader", d)
	}
	c := CacheResource(wire.CacheSpec{TenantID: "t", Namespace: "ns", Cache: "c", Incarnation: "2"})
	want = Resource{Key: ResourceKey{Kind: KindCache, TenantID: "t", Namespace: "ns", Name: "c"}, Incarnation: "2",
		ReplicationFactor: 1, Consistency: "leader"}
	if c != want {
		t.Errorf("cache resource %+v, want %+v", c, want)
	}
	out := mustCompute(t, Input{Brokers: threeBrokers(), Resources: []Resource{c}})
	if len(out.Next.Assignments) != 1 {
		t.Errorf("a cache of 0 shards got %d assignments, want 1", len(out.Next.Assignments))
	}
}
