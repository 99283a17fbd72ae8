package placement

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// replicated is a durable stream with factor rf.
func replicated(name string, shards, rf uint32) Resource {
	r := stream(name, shards, true)
	r.ReplicationFactor = rf
	return r
}

// followers returns the node ids of a's followers.
func followers(a Assignment) []string {
	var ids []string
	for _, r := range a.Replicas {
		ids = append(ids, r.NodeID)
	}
	return ids
}

// kinds counts out's decisions by kind.
func kinds(out Output) map[DecisionKind]int {
	n := map[DecisionKind]int{}
	for _, d := range out.Decisions {
		n[d.Kind]++
	}
	return n
}

func TestADurableShardGetsFactorMinusOneFollowersInOtherZones(t *testing.T) {
	brokers := []Broker{
		live("a1", "a", "s1"), live("a2", "a", "s2"), live("b1", "b", "s3"), live("c1", "c", "s4"),
	}
	zone := map[string]string{"a1": "a", "a2": "a", "b1": "b", "c1": "c"}
	out := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{replicated("s", 4, 3)}})
	for _, a := range out.Next.Assignments {
		if len(a.Replicas) != 2 {
			t.Fatalf("%v has followers %v, want 2", a.Shard, followers(a))
		}
		zones := map[string]bool{zone[a.Owner]: true}
		for _, r := range a.Replicas {
			zones[zone[r.NodeID]] = true
			if want := "s" + r.NodeID[len(r.NodeID)-1:]; r.StorageID == "" {
				t.Errorf("follower %+v has no storage id (want %s's)", r, want)
			}
		}
		if len(zones) != 3 {
			t.Errorf("%v: owner %s, followers %v cover %d zones, want 3", a.Shard, a.Owner, followers(a), len(zones))
		}
		if a.Generation == 0 || a.Generation > 4 {
			t.Errorf("%v at generation %d: followers must not take generations", a.Shard, a.Generation)
		}
	}
	if k := kinds(out); k[Placed] != 4 || k[ReplicaAdded] != 8 {
		t.Errorf("decisions %v, want 4 placed and 8 replica_added", k)
	}
}

func TestInMemoryShardsAndCachesHaveNoFollowers(t *testing.T) {
	mem := stream("m", 3, false)
	mem.ReplicationFactor = 3
	cache := Resource{Key: ResourceKey{Kind: KindCache, TenantID: "t", Namespace: "ns", Name: "c"}, Incarnation: "c1",
		Shards: 2, ReplicationFactor: 1}
	one := replicated("one", 2, 1)
	res := []Resource{mem, cache, one}
	first := mustCompute(t, Input{Brokers: threeBrokers(), Resources: res})
	for _, a := range first.Next.Assignments {
		if len(a.Replicas) != 0 {
			t.Errorf("%v has followers %v", a.Shard, followers(a))
		}
	}
	// Followers handed in on such shards are dropped as not wanted, with
	// owner and generation unchanged.
	cur := State{LastGeneration: first.Next.LastGeneration, Assignments: slices.Clone(first.Next.Assignments)}
	for i := range cur.Assignments {
		cur.Assignments[i].Replicas = []Replica{{NodeID: "n9", StorageID: "s9"}}
	}
	out := mustCompute(t, Input{Brokers: threeBrokers(), Resources: res, Current: cur})
	if !reflect.DeepEqual(out.Next, first.Next) {
		t.Errorf("after dropping the followers %+v, want %+v", out.Next, first.Next)
	}
	for _, d := range out.Decisions {
		if d.Kind != ReplicaDropped || d.Replica != "n9" || d.Reason != ReplicaNotWanted {
			t.Errorf("decision %+v, want n9 dropped as not wanted", d)
		}
	}
}

func TestFollowersStayAcrossPassesAndADownOneStaysListed(t *testing.T) {
	brokers := []Broker{live("n1", "", "s1"), live("n2", "", "s2"), live("n3", "", "s3"), live("n4", "", "s4")}
	res := []Resource{replicated("s", 6, 3)}
	first := mustCompute(t, Input{Brokers: brokers, Resources: res})

	// A fifth broker joins: nothing moves.
	brokers = append(brokers, live("n5", "", "s5"))
	joined := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: first.Next})
	if len(joined.Decisions) != 0 {
		t.Fatalf("a join changed followers: %+v", joined.Decisions)
	}

	// A follower's broker goes down: its shards keep it listed, and
	// nothing else changes (no restore delay is given: see restore_test.go).
	victim := find(t, first.Next, ShardRef{streamKey("s"), 0}).Replicas[0].NodeID
	for i := range brokers {
		if brokers[i].NodeID == victim {
			brokers[i].State = Down
		}
	}
	down := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: first.Next})
	for _, a := range down.Next.Assignments {
		prev := find(t, first.Next, a.Shard)
		if a.Owner != victim && !reflect.DeepEqual(a.Replicas, prev.Replicas) {
			t.Errorf("%v followers %v -> %v after a follower went down", a.Shard, followers(prev), followers(a))
		}
	}
	for _, d := range down.Decisions {
		if d.Kind == ReplicaAdded || d.Kind == ReplicaDropped {
			t.Errorf("decision %+v after a follower went down, want none on followers", d)
		}
	}
}

func TestAShortSetIsToppedUpWhenABrokerJoins(t *testing.T) {
	brokers := []Broker{live("n1", "", "s1")}
	res := []Resource{replicated("s", 2, 3)}
	alone := mustCompute(t, Input{Brokers: brokers, Resources: res})
	for _, a := range alone.Next.Assignments {
		if a.Owner != "n1" || len(a.Replicas) != 0 || a.Unavailable != "" {
			t.Fatalf("on one broker %+v, want the leader alone, serving", a)
		}
	}
	brokers = append(brokers, live("n2", "", "s2"), Broker{NodeID: "n3", State: Draining, StorageID: "s3"})
	two := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: alone.Next})
	for _, a := range two.Next.Assignments {
		if !reflect.DeepEqual(a.Replicas, []Replica{{NodeID: "n2", StorageID: "s2"}}) {
			t.Errorf("%v followers %+v, want n2 only (n3 drains)", a.Shard, a.Replicas)
		}
		if a.Generation != find(t, alone.Next, a.Shard).Generation {
			t.Errorf("%v changed generation on a top-up", a.Shard)
		}
	}
	if k := kinds(two); k[ReplicaAdded] != 2 || len(two.Decisions) != 2 {
		t.Errorf("decisions %+v, want two replica_added", two.Decisions)
	}
	brokers = append(brokers, live("n4", "", "s4"))
	full := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: two.Next})
	for _, a := range full.Next.Assignments {
		if got := followers(a); !reflect.DeepEqual(got, []string{"n2", "n4"}) {
			t.Errorf("%v followers %v, want [n2 n4]", a.Shard, got)
		}
	}
}

func TestAFollowerThatLostItsCopyIsDroppedAndReplaced(t *testing.T) {
	brokers := []Broker{live("n1", "", "s1"), live("n2", "", "s2"), live("n3", "", "s3")}
	storage := map[string]string{"n1": "s1", "n2": "s2", "n3": "s3"}
	res := []Resource{replicated("s", 1, 2)}
	first := mustCompute(t, Input{Brokers: brokers, Resources: res})
	a := first.Next.Assignments[0]
	f := a.Replicas[0].NodeID

	// The follower comes back with a new data directory: its old copy is
	// dropped and a new one chosen (it may be the same broker, whose new
	// directory holds nothing yet, under its new storage identity).
	for i := range brokers {
		if brokers[i].NodeID == f {
			brokers[i].StorageID, storage[f] = "fresh", "fresh"
		}
	}
	out := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: first.Next})
	got := out.Next.Assignments[0]
	if got.Generation != a.Generation || len(got.Replicas) != 1 || got.Replicas[0].StorageID != storage[got.Replicas[0].NodeID] {
		t.Fatalf("after %s lost its storage: %+v, want one follower on its current storage at generation %d", f, got, a.Generation)
	}
	nf := got.Replicas[0].NodeID
	want := []Decision{
		{Kind: ReplicaDropped, Shard: a.Shard, Incarnation: "i1", From: a.Owner, To: a.Owner, Replica: f, Generation: a.Generation, Reason: ReplicaStorageLost},
		{Kind: ReplicaAdded, Shard: a.Shard, Incarnation: "i1", From: a.Owner, To: a.Owner, Replica: nf, Generation: a.Generation},
	}
	if !reflect.DeepEqual(out.Decisions, want) {
		t.Errorf("decisions %+v, want %+v", out.Decisions, want)
	}

	// The follower is deregistered: dropped, and the last broker takes
	// its place.
	var kept []Broker
	for _, b := range brokers {
		if b.NodeID != nf {
			kept = append(kept, b)
		}
	}
	gone := mustCompute(t, Input{Brokers: kept, Resources: res, Current: out.Next})
	got = gone.Next.Assignments[0]
	if len(got.Replicas) != 1 || got.Replicas[0].NodeID == nf || got.Replicas[0].NodeID == a.Owner {
		t.Errorf("after %s was deregistered: followers %+v, want the third broker", nf, got.Replicas)
	}
	if len(gone.Decisions) != 2 || gone.Decisions[0].Kind != ReplicaDropped || gone.Decisions[0].Reason != ReplicaGone {
		t.Errorf("decisions %+v, want the drop of a deregistered follower, then an add", gone.Decisions)
	}
}

func TestAWaitingShardKeepsItsFollowersAndTakesNoNewOnes(t *testing.T) {
	brokers := []Broker{live("n1", "", "s1"), live("n2", "", "s2")}
	res := []Resource{replicated("s", 1, 3)}
	first := mustCompute(t, Input{Brokers: brokers, Resources: res})
	owner := first.Next.Assignments[0].Owner
	for i := range brokers {
		if brokers[i].NodeID == owner {
			brokers[i].State = Down
		}
	}
	brokers = append(brokers, live("n3", "", "s3"))
	out := mustCompute(t, Input{Brokers: brokers, Resources: res, Current: first.Next})
	a := out.Next.Assignments[0]
	if a.Unavailable != ReasonOwnerDown || !reflect.DeepEqual(a.Replicas, first.Next.Assignments[0].Replicas) {
		t.Errorf("with its owner down %+v, want it waiting with the followers it had", a)
	}
}

func TestCopiesBalanceOverTheCluster(t *testing.T) {
	var brokers []Broker
	for i := 1; i <= 5; i++ {
		brokers = append(brokers, live(fmt.Sprintf("n%d", i), "", fmt.Sprintf("s%d", i)))
	}
	var res []Resource
	for i := 0; i < 40; i++ {
		res = append(res, replicated(fmt.Sprintf("r%02d", i), uint32(1+i%4), 3))
	}
	out := mustCompute(t, Input{Brokers: brokers, Resources: res})
	copies := map[string]int{}
	for _, a := range out.Next.Assignments {
		copies[a.Owner]++
		for _, r := range a.Replicas {
			copies[r.NodeID]++
		}
	}
	lo, hi, total := 1<<30, 0, 0
	for _, b := range brokers {
		lo, hi, total = min(lo, copies[b.NodeID]), max(hi, copies[b.NodeID]), total+copies[b.NodeID]
	}
	// Owners are balanced first (per resource, then cluster-wide), then
	// followers by copies: the spread stays within two.
	if total != 3*len(out.Next.Assignments) || hi-lo > 2 {
		t.Errorf("copies per broker %v (total %d for %d shards), want within two of each other", copies, total, len(out.Next.Assignments))
	}
}
