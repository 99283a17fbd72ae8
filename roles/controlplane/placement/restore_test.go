package placement

import (
	"reflect"
	"testing"
)

// restoreAfter is the restore delay these tests give Compute.
const restoreAfter = 300_000

// oneShard is a single-shard stream "s" of factor rf owned by owner at
// generation 1 with followers reps, as a current state.
func oneShard(rf uint32, owner string, reps ...string) ([]Resource, State) {
	a := Assignment{Shard: ShardRef{streamKey("s"), 0}, Incarnation: "i1", Owner: owner, StorageID: "s-" + owner,
		Generation: 1, Consistency: "leader"}
	for _, id := range reps {
		a.Replicas = append(a.Replicas, Replica{NodeID: id, StorageID: "s-" + id})
	}
	return []Resource{replicated("s", 1, rf)}, State{Assignments: []Assignment{a}, LastGeneration: 1}
}

// brokersOf makes a live broker per id, with storage "s-"+id and the
// zone zones[id] (none when absent).
func brokersOf(zones map[string]string, ids ...string) []Broker {
	var bs []Broker
	for _, id := range ids {
		bs = append(bs, live(id, zones[id], "s-"+id))
	}
	return bs
}

// downAt marks id down since atMs in bs.
func downAt(bs []Broker, id string, atMs int64) {
	for i := range bs {
		if bs[i].NodeID == id {
			bs[i].State, bs[i].DownSinceMs = Down, atMs
		}
	}
}

// restoreInput is an input at nowMs with the tests' restore delay.
func restoreInput(bs []Broker, res []Resource, cur State, nowMs int64) Input {
	return Input{Brokers: bs, Resources: res, Current: cur, NowMs: nowMs, RestoreAfterMs: restoreAfter}
}

func TestADownFollowerIsReplacedOnlyAfterTheDelay(t *testing.T) {
	bs := brokersOf(nil, "n1", "n2", "n3", "n4")
	res, cur := oneShard(3, "n1", "n2", "n3")
	downAt(bs, "n2", 10_000)

	before := mustCompute(t, restoreInput(bs, res, cur, 10_000+restoreAfter-1))
	if len(before.Decisions) != 0 {
		t.Fatalf("1 ms before the delay: decisions %+v, want none", before.Decisions)
	}
	after := mustCompute(t, restoreInput(bs, res, cur, 10_000+restoreAfter))
	a := after.Next.Assignments[0]
	if got := followers(a); !reflect.DeepEqual(got, []string{"n3", "n4"}) || a.Generation != 1 || a.Owner != "n1" {
		t.Fatalf("after the delay %+v, want owner n1 at generation 1 with followers [n3 n4]", a)
	}
	want := []Decision{
		{Kind: ReplicaDropped, Shard: a.Shard, Incarnation: "i1", From: "n1", To: "n1", Replica: "n2", Generation: 1, Reason: ReplicaRestore},
		{Kind: ReplicaAdded, Shard: a.Shard, Incarnation: "i1", From: "n1", To: "n1", Replica: "n4", Generation: 1},
	}
	if !reflect.DeepEqual(after.Decisions, want) {
		t.Errorf("decisions %+v, want %+v", after.Decisions, want)
	}
	// n2 comes back: it is not a follower any more, and nothing moves.
	bs[1].State, bs[1].DownSinceMs = Live, 0
	back := mustCompute(t, restoreInput(bs, res, after.Next, 20*restoreAfter))
	if len(back.Decisions) != 0 {
		t.Errorf("n2 back: decisions %+v, want none", back.Decisions)
	}
}

func TestOnlyAFollowerDownForKnownTimeIsReplaced(t *testing.T) {
	bs := brokersOf(nil, "n1", "n2", "n3", "n4", "n5")
	res, cur := oneShard(4, "n1", "n2", "n3")
	bs[1].State, bs[1].DownSinceMs = Draining, 1 // draining: takes nothing new, keeps its copies
	downAt(bs, "n3", 0)                          // down since an unknown time
	out := mustCompute(t, restoreInput(bs, res, cur, 100*restoreAfter))
	if got := followers(out.Next.Assignments[0]); !reflect.DeepEqual(got, []string{"n2", "n3", "n4"}) {
		t.Errorf("followers %v, want n2 and n3 kept and n4 topping up", got)
	}
	// No delay given (RestoreAfterMs 0): a follower down since long stays.
	downAt(bs, "n3", 1)
	in := restoreInput(bs, res, cur, 100*restoreAfter)
	in.RestoreAfterMs = 0
	if got := followers(mustCompute(t, in).Next.Assignments[0]); !reflect.DeepEqual(got, []string{"n2", "n3", "n4"}) {
		t.Errorf("without a delay: followers %v, want n3 kept", got)
	}
}

func TestADownFollowerStaysWhileNoBrokerCanTakeItsPlace(t *testing.T) {
	// Every live broker holds a copy: nothing can replace n3.
	bs := brokersOf(nil, "n1", "n2", "n3")
	res, cur := oneShard(3, "n1", "n2", "n3")
	downAt(bs, "n3", 1)
	now := int64(1 + restoreAfter)
	if out := mustCompute(t, restoreInput(bs, res, cur, now)); len(out.Decisions) != 0 {
		t.Fatalf("no free broker: decisions %+v, want none", out.Decisions)
	}

	// A factor of 4 leaves one slot short: the first broker to join fills
	// it, and n3 stays; the next one replaces n3.
	res, cur = oneShard(4, "n1", "n2", "n3")
	bs = append(bs, live("n4", "", "s-n4"))
	one := mustCompute(t, restoreInput(bs, res, cur, now))
	if got := followers(one.Next.Assignments[0]); !reflect.DeepEqual(got, []string{"n2", "n3", "n4"}) {
		t.Fatalf("one broker joined: followers %v, want [n2 n3 n4] (n3 kept, the short slot filled)", got)
	}
	bs = append(bs, live("n5", "", "s-n5"))
	two := mustCompute(t, restoreInput(bs, res, one.Next, now))
	if got := followers(two.Next.Assignments[0]); !reflect.DeepEqual(got, []string{"n2", "n4", "n5"}) {
		t.Errorf("another joined: followers %v, want [n2 n4 n5] (n3 replaced)", got)
	}
}

func TestTwoDownFollowersAndOneFreeBrokerReplaceOne(t *testing.T) {
	bs := brokersOf(nil, "n1", "n2", "n3", "n4")
	res, cur := oneShard(3, "n1", "n2", "n3")
	downAt(bs, "n2", 5)
	downAt(bs, "n3", 1)
	out := mustCompute(t, restoreInput(bs, res, cur, 5+restoreAfter))
	if got := followers(out.Next.Assignments[0]); !reflect.DeepEqual(got, []string{"n3", "n4"}) {
		t.Errorf("followers %v, want [n3 n4]: the first overdue in list order goes, the other stays", got)
	}
	if k := kinds(out); k[ReplicaDropped] != 1 || k[ReplicaAdded] != 1 {
		t.Errorf("decisions %+v, want one drop and one add", out.Decisions)
	}
}

func TestAShardWhoseLeaderDoesNotServeKeepsItsDownFollowers(t *testing.T) {
	bs := brokersOf(nil, "n1", "n2", "n3", "n4")
	res, cur := oneShard(3, "n1", "n2", "n3")
	downAt(bs, "n1", 1)
	downAt(bs, "n2", 1)
	out := mustCompute(t, restoreInput(bs, res, cur, 1+restoreAfter))
	a := out.Next.Assignments[0]
	if a.Unavailable != ReasonOwnerDown || !reflect.DeepEqual(a.Replicas, cur.Assignments[0].Replicas) {
		t.Errorf("leader down: %+v, want it waiting with followers [n2 n3]", a)
	}
	if len(out.Decisions) != 1 || out.Decisions[0].Kind != Waiting {
		t.Errorf("decisions %+v, want the waiting one only", out.Decisions)
	}

	// The leader back under a new storage identity: the shard waits for an
	// operator, and its followers stay too.
	bs[0].State, bs[0].DownSinceMs, bs[0].StorageID = Live, 0, "fresh"
	lost := mustCompute(t, restoreInput(bs, res, out.Next, 1+restoreAfter))
	if a := lost.Next.Assignments[0]; a.Unavailable != ReasonStorageLost || len(a.Replicas) != 2 {
		t.Errorf("leader's storage lost: %+v, want it waiting with two followers", a)
	}
}

func TestAReplacementGoesToTheZoneThatLostItsCopy(t *testing.T) {
	zones := map[string]string{"a1": "a", "a2": "a", "b1": "b", "b2": "b", "c1": "c"}
	bs := brokersOf(zones, "a1", "a2", "b1", "b2", "c1")
	res, cur := oneShard(3, "a1", "b1", "c1")
	downAt(bs, "b1", 1)
	out := mustCompute(t, restoreInput(bs, res, cur, 1+restoreAfter))
	// a2 ranks first by node id at equal copies; zone b has no copy left.
	if got := followers(out.Next.Assignments[0]); !reflect.DeepEqual(got, []string{"c1", "b2"}) {
		t.Errorf("followers %v, want [c1 b2]: the replacement in zone b", got)
	}
}

func TestNegativeTimesAreRefused(t *testing.T) {
	bs := brokersOf(nil, "n1", "n2")
	downAt(bs, "n2", -5)
	res, cur := oneShard(2, "n1", "n2")
	_, err := Compute(Input{Brokers: bs, Resources: res, Current: cur, NowMs: -1, RestoreAfterMs: -1})
	if got := inputError(t, err); len(got) != 2 {
		t.Errorf("problems %q, want the broker's down time and the clock", got)
	}
}
