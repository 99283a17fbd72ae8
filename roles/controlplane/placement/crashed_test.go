package placement

import (
	"strings"
	"testing"
)

// crashed is broker id live under storage identity "s<id>2", back after a
// crash of "s<id>", registered at atMs.
func crashed(id string, atMs int64) Broker {
	b := live(id, "", "s"+id+"2")
	b.CrashedStorageID, b.RegisteredAtMs = "s"+id, atMs
	return b
}

// reportedAt is reported, arriving at atMs.
func reportedAt(atMs int64, node, storage string, shard ShardRef, gen uint64, leader bool, durable uint64) Report {
	r := reported(node, storage, shard, gen, leader, durable)
	r.AtMs = atMs
	return r
}

func TestAShardWhoseOnlyCopyIsOnACrashedOwnerIsReopenedThere(t *testing.T) {
	r := stream("solo", 1, true)
	a := Assignment{Shard: ShardRef{Resource: r.Key}, Incarnation: r.Incarnation, Owner: "a", StorageID: "sa", Generation: 3,
		Consistency: "leader"}
	cur := State{Assignments: []Assignment{a}, LastGeneration: 7}
	brokers := []Broker{crashed("a", 100)}
	out := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: cur})
	got := out.Next.Assignments[0]
	if got.Owner != "a" || got.StorageID != "sa2" || got.Generation != 8 || got.Unavailable != "" {
		t.Fatalf("after the crash: %+v", got)
	}
	if k := kinds(out); k[Reopened] != 1 || len(out.Decisions) != 1 {
		t.Fatalf("decisions %+v", out.Decisions)
	}
	if again := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: out.Next}); len(again.Decisions) != 0 {
		t.Fatalf("a second pass decided %+v", again.Decisions)
	}
	// A wiped directory (no crash named), or a crash of another identity,
	// leaves the shard storage_lost.
	for _, b := range []Broker{live("a", "", "sa2"), {NodeID: "a", State: Live, StorageID: "sa3", CrashedStorageID: "sa2"}} {
		out := mustCompute(t, Input{Brokers: []Broker{b}, Resources: []Resource{r}, Current: cur})
		if got := out.Next.Assignments[0]; got.StorageID != "sa" || got.Generation != 3 || got.Unavailable != ReasonStorageLost {
			t.Fatalf("owner %+v: %+v", b, got)
		}
	}
	// An owner back after a crash but down again waits.
	b := crashed("a", 100)
	b.State, b.DownSinceMs = Down, 200
	out = mustCompute(t, Input{Brokers: []Broker{b}, Resources: []Resource{r}, Current: cur})
	if got := out.Next.Assignments[0]; got.StorageID != "sa" || got.Unavailable != ReasonStorageLost {
		t.Fatalf("a crashed owner that is down: %+v", got)
	}
}

func TestAQuorumShardWhoseLeaderCameBackCrashedIsLedByAFollower(t *testing.T) {
	r, a := quorumShard("quorum", "a", "b", "c")
	in := func(brokers ...Broker) Input {
		return Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 9}}
	}
	// The leader is live (its lease holds) under its new identity: a
	// follower is promoted at once.
	out := mustCompute(t, in(crashed("a", 100), live("b", "", "sb"), live("c", "", "sc")))
	if got := out.Next.Assignments[0]; got.Owner != "b" || got.Generation != 10 || got.Unavailable != "" {
		t.Fatalf("after the leader's crash: %+v", got)
	}
	// Followers down with their copies: the shard waits, not reopened on
	// the short copy.
	down := func(id string) Broker { return Broker{NodeID: id, State: Down, StorageID: "s" + id, DownSinceMs: 50} }
	out = mustCompute(t, in(crashed("a", 100), down("b"), down("c")))
	got := out.Next.Assignments[0]
	if got.Owner != "a" || got.StorageID != "sa" || got.Unavailable != ReasonStorageLost {
		t.Fatalf("with the followers down: %+v", got)
	}
	if d := out.Decisions[0]; d.Kind != Waiting || !strings.Contains(d.Detail, "b holds a copy and is not live") {
		t.Fatalf("decision %+v", d)
	}
	// Followers whose copies are gone too: the crashed leader's is all
	// there is, and it is reopened.
	out = mustCompute(t, in(crashed("a", 100), live("b", "", "sb2"), Broker{NodeID: "c", State: Down, StorageID: "sc2"}))
	if got := out.Next.Assignments[0]; got.Owner != "a" || got.StorageID != "sa2" || got.Generation != 10 || got.Unavailable != "" {
		t.Fatalf("with no other copy: %+v", got)
	}
}

func TestALeaderShardWhoseLeaderCameBackCrashedFailsOverOrIsReopened(t *testing.T) {
	r, a := quorumShard("leader", "a", "b", "c")
	brokers := []Broker{crashed("a", 100), live("b", "", "sb"), live("c", "", "sc")}
	in := func(brokers []Broker, reports ...Report) Input {
		return Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 9}, Reports: reports}
	}
	// The leader's last report before its crash: 10 durable.
	lead := reportedAt(90, "a", "sa", a.Shard, 5, true, 10)
	// A follower holding as much is promoted, without waiting for a lease.
	out := mustCompute(t, in(brokers, lead, reportedAt(95, "b", "sb", a.Shard, 5, false, 12), reportedAt(95, "c", "sc", a.Shard, 5, false, 4)))
	if got := out.Next.Assignments[0]; got.Owner != "b" || got.Generation != 10 {
		t.Fatalf("with b holding more: %+v", got)
	}
	// None holds as much, but c has not reported since a came back: wait.
	out = mustCompute(t, in(brokers, lead, reportedAt(120, "b", "sb", a.Shard, 5, false, 8), reportedAt(95, "c", "sc", a.Shard, 5, false, 4)))
	got := out.Next.Assignments[0]
	if got.Owner != "a" || got.StorageID != "sa" || got.Unavailable != ReasonStorageLost {
		t.Fatalf("with c's report older than a's return: %+v", got)
	}
	if d := out.Decisions[0]; !strings.Contains(d.Detail, "c has not reported since a came back") {
		t.Fatalf("decision %+v", d)
	}
	// Every follower has reported since, none holds as much: a is named
	// again under its new identity (its takeover takes the furthest copy).
	out = mustCompute(t, in(brokers, lead, reportedAt(120, "b", "sb", a.Shard, 5, false, 8), reportedAt(130, "c", "sc", a.Shard, 5, false, 4)))
	got = out.Next.Assignments[0]
	if got.Owner != "a" || got.StorageID != "sa2" || got.Generation != 10 || got.Unavailable != "" || len(got.Replicas) != 2 {
		t.Fatalf("after every follower reported: %+v", got)
	}
	if k := kinds(out); k[Reopened] != 1 {
		t.Fatalf("decisions %+v", out.Decisions)
	}
	// A follower down with its copy: wait, whatever the others hold.
	down := []Broker{crashed("a", 100), live("b", "", "sb"), {NodeID: "c", State: Down, StorageID: "sc", DownSinceMs: 110}}
	out = mustCompute(t, in(down, lead, reportedAt(120, "b", "sb", a.Shard, 5, false, 8), reportedAt(105, "c", "sc", a.Shard, 5, false, 4)))
	if got := out.Next.Assignments[0]; got.StorageID != "sa" || got.Unavailable != ReasonStorageLost {
		t.Fatalf("with c down: %+v", got)
	}
	// The same with a wiped directory instead of a crash: storage_lost,
	// and it stays so.
	wiped := []Broker{live("a", "", "sa2"), live("b", "", "sb"), live("c", "", "sc")}
	out = mustCompute(t, in(wiped, lead, reportedAt(120, "b", "sb", a.Shard, 5, false, 8), reportedAt(130, "c", "sc", a.Shard, 5, false, 4)))
	if got := out.Next.Assignments[0]; got.StorageID != "sa" || got.Unavailable != ReasonStorageLost {
		t.Fatalf("with a wiped directory: %+v", got)
	}
}

func TestAFollowerBackAfterACrashIsNotCountedUnderItsOldIdentity(t *testing.T) {
	r, a := quorumShard("quorum", "a", "b", "c")
	brokers := []Broker{live("a", "", "sa"), crashed("b", 100), live("c", "", "sc")}
	out := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 9}})
	got := out.Next.Assignments[0]
	if got.Owner != "a" || got.Generation != 5 {
		t.Fatalf("the leader changed: %+v", got)
	}
	for _, rep := range got.Replicas {
		if rep.NodeID == "b" && rep.StorageID == "sb" {
			t.Fatalf("b's copy under its old identity still counts: %+v", got.Replicas)
		}
	}
	if len(got.Replicas) != 2 {
		t.Fatalf("followers %+v: b should be re-added as a new copy", got.Replicas)
	}
}
