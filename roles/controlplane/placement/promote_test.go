package placement

import (
	"slices"
	"strings"
	"testing"
)

// quorumShard is shard 0 of a durable quorum stream "q" (factor 3) led by
// owner at generation 5 and followed by the brokers in replicas.
func quorumShard(consistency, owner string, replicas ...string) (Resource, Assignment) {
	r := replicated("q", 1, 3)
	r.Consistency = consistency
	a := Assignment{Shard: ShardRef{Resource: r.Key}, Incarnation: r.Incarnation, Owner: owner, StorageID: "s" + owner,
		Generation: 5, Consistency: consistency}
	for _, n := range replicas {
		a.Replicas = append(a.Replicas, Replica{NodeID: n, StorageID: "s" + n})
	}
	return r, a
}

func TestAQuorumShardWhoseLeaderIsDownIsLedByALiveFollower(t *testing.T) {
	r, a := quorumShard("quorum", "a", "b", "c")
	brokers := []Broker{{NodeID: "a", State: Down, StorageID: "sa"}, live("b", "", "sb"), live("c", "", "sc")}
	out := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 9}})
	got := out.Next.Assignments[0]
	if got.Owner != "b" || got.StorageID != "sb" || got.Generation != 10 || got.Unavailable != "" {
		t.Fatalf("after the promotion: %+v", got)
	}
	if !slices.Equal(followers(got), []string{"c", "a"}) || got.Replicas[1].StorageID != "sa" {
		t.Fatalf("followers %+v, want c then the old leader a under its storage", got.Replicas)
	}
	if k := kinds(out); k[Promoted] != 1 || len(out.Decisions) != 1 {
		t.Fatalf("decisions %+v", out.Decisions)
	}
	// The next pass keeps it.
	again := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: out.Next})
	if len(again.Decisions) != 0 {
		t.Fatalf("a second pass decided %+v", again.Decisions)
	}
}

func TestOnlyAFollowerStillHoldingItsCopyIsPromoted(t *testing.T) {
	r, a := quorumShard("quorum", "a", "b", "c")
	// b came back with a new data directory: its copy is gone. c is live.
	brokers := []Broker{{NodeID: "a", State: Down, StorageID: "sa"}, live("b", "", "sb2"), live("c", "", "sc")}
	out := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 5}})
	if got := out.Next.Assignments[0]; got.Owner != "c" {
		t.Fatalf("owner %q, want c (b lost its copy)", got.Owner)
	}
	// Nobody eligible: the shard waits for its owner.
	brokers = []Broker{{NodeID: "a", State: Down, StorageID: "sa"}, {NodeID: "b", State: Down, StorageID: "sb"}, live("c", "", "sc2")}
	out = mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 5}})
	if got := out.Next.Assignments[0]; got.Owner != "a" || got.Unavailable != ReasonOwnerDown || got.Generation != 5 {
		t.Fatalf("with no eligible follower: %+v", got)
	}
}

func TestALeaderConsistencyShardWaitsForItsOwner(t *testing.T) {
	r, a := quorumShard("leader", "a", "b", "c")
	brokers := []Broker{{NodeID: "a", State: Down, StorageID: "sa"}, live("b", "", "sb"), live("c", "", "sc")}
	out := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 5}})
	if got := out.Next.Assignments[0]; got.Owner != "a" || got.Unavailable != ReasonOwnerDown {
		t.Fatalf("a leader-consistency shard moved: %+v", got)
	}
}

func TestAnOwnerBackWithoutItsStorageIsReplacedAndReplacedAsAFollower(t *testing.T) {
	r, a := quorumShard("quorum", "a", "b", "c")
	brokers := []Broker{live("a", "", "sa2"), live("b", "", "sb"), live("c", "", "sc"), live("d", "", "sd")}
	out := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 5}})
	got := out.Next.Assignments[0]
	if got.Owner != "b" || got.Generation != 6 {
		t.Fatalf("owner %q generation %d", got.Owner, got.Generation)
	}
	// a's old copy is gone (new storage): it leaves the set, and a live
	// broker takes its place.
	for _, rep := range got.Replicas {
		if rep.NodeID == "a" && rep.StorageID == "sa" {
			t.Fatalf("the lost copy stayed in the set: %+v", got.Replicas)
		}
	}
	if len(got.Replicas) != 2 {
		t.Fatalf("followers %+v", got.Replicas)
	}
}

func TestAMajoritySuspectingALiveLeaderPromotesAFollower(t *testing.T) {
	r, a := quorumShard("quorum", "a", "b", "c")
	sus := func(gen uint64, leader string) []Suspicion {
		return []Suspicion{{Shard: a.Shard, Generation: gen, Leader: leader}}
	}
	b, c := live("b", "", "sb"), live("c", "", "sc")
	cur := State{Assignments: []Assignment{a}, LastGeneration: 5}
	// One follower of two suspecting is no majority of three.
	b.Suspects = sus(5, "a")
	out := mustCompute(t, Input{Brokers: []Broker{live("a", "", "sa"), b, c}, Resources: []Resource{r}, Current: cur})
	if got := out.Next.Assignments[0]; got.Owner != "a" {
		t.Fatalf("promoted on one suspicion: %+v", got)
	}
	// A suspicion of an earlier generation or another leader counts for nothing.
	c.Suspects = sus(4, "a")
	out = mustCompute(t, Input{Brokers: []Broker{live("a", "", "sa"), b, c}, Resources: []Resource{r}, Current: cur})
	if got := out.Next.Assignments[0]; got.Owner != "a" {
		t.Fatalf("promoted on a stale suspicion: %+v", got)
	}
	c.Suspects = sus(5, "a")
	out = mustCompute(t, Input{Brokers: []Broker{live("a", "", "sa"), b, c}, Resources: []Resource{r}, Current: cur})
	got := out.Next.Assignments[0]
	if got.Owner != "b" || got.Generation != 6 || !slices.Equal(followers(got), []string{"c", "a"}) {
		t.Fatalf("after a majority suspected a: %+v", got)
	}
	// A leader-consistency shard is never promoted on suspicions.
	r2, a2 := quorumShard("leader", "a", "b", "c")
	b.Suspects, c.Suspects = sus(5, "a"), sus(5, "a")
	out = mustCompute(t, Input{Brokers: []Broker{live("a", "", "sa"), b, c}, Resources: []Resource{r2},
		Current: State{Assignments: []Assignment{a2}, LastGeneration: 5}})
	if got := out.Next.Assignments[0]; got.Owner != "a" {
		t.Fatalf("a leader-consistency shard promoted: %+v", got)
	}
}

// reported is a report of node under storage, holding shard at
// generation gen up to durable (as its leader when leader is set).
func reported(node, storage string, shard ShardRef, gen uint64, leader bool, durable uint64) Report {
	return Report{NodeID: node, StorageID: storage, Positions: map[ShardRef]Position{
		shard: {Generation: gen, Leader: leader, Durable: durable}}}
}

func TestALeaderShardIsPromotedToTheFurthestFollowerThatHeldTheLog(t *testing.T) {
	r, a := quorumShard("leader", "a", "b", "c")
	brokers := []Broker{{NodeID: "a", State: Down, StorageID: "sa"}, live("b", "", "sb"), live("c", "", "sc")}
	in := func(reports ...Report) Input {
		return Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 9}, Reports: reports}
	}
	lead := reported("a", "sa", a.Shard, 5, true, 10)
	out := mustCompute(t, in(lead, reported("b", "sb", a.Shard, 5, false, 12), reported("c", "sc", a.Shard, 5, false, 15)))
	got := out.Next.Assignments[0]
	if got.Owner != "c" || got.StorageID != "sc" || got.Generation != 10 || got.Unavailable != "" {
		t.Fatalf("after the promotion: %+v", got)
	}
	if !slices.Equal(followers(got), []string{"b", "a"}) || got.Replicas[1].StorageID != "sa" {
		t.Fatalf("followers %+v, want b then the old leader a under its storage", got.Replicas)
	}
	if k := kinds(out); k[Promoted] != 1 || len(out.Decisions) != 1 {
		t.Fatalf("decisions %+v", out.Decisions)
	}
	// Equals: the first in the set.
	out = mustCompute(t, in(lead, reported("b", "sb", a.Shard, 5, false, 10), reported("c", "sc", a.Shard, 5, false, 10)))
	if got := out.Next.Assignments[0]; got.Owner != "b" {
		t.Fatalf("owner %q among equals, want b (first in the set)", got.Owner)
	}
	// The promoted one's next pass changes nothing.
	again := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: out.Next,
		Reports: []Report{lead, reported("b", "sb", a.Shard, 5, false, 10)}})
	if len(again.Decisions) != 0 {
		t.Fatalf("a second pass decided %+v", again.Decisions)
	}
}

func TestALeaderShardPromotesOnlyAFollowerThatHeldTheLog(t *testing.T) {
	r, a := quorumShard("leader", "a", "b", "c")
	lead := reported("a", "sa", a.Shard, 5, true, 10)
	cases := []struct {
		name    string
		brokers []Broker
		reports []Report
		want    string // the new owner, "a" when the shard waits
		detail  string // in the Waiting decision
	}{
		{"eligible", []Broker{live("b", "", "sb")}, []Report{lead, reported("b", "sb", a.Shard, 5, false, 10)}, "b", ""},
		{"the leader never reported", []Broker{live("b", "", "sb")}, []Report{reported("b", "sb", a.Shard, 5, false, 10)}, "a",
			"leader a never reported"},
		{"the leader reported an earlier generation", []Broker{live("b", "", "sb")},
			[]Report{reported("a", "sa", a.Shard, 4, true, 10), reported("b", "sb", a.Shard, 5, false, 10)}, "a", "never reported"},
		{"behind the leader's report", []Broker{live("b", "", "sb")}, []Report{lead, reported("b", "sb", a.Shard, 5, false, 9)}, "a",
			"b holds 9 < the leader's 10"},
		{"a report of an earlier generation", []Broker{live("b", "", "sb")}, []Report{lead, reported("b", "sb", a.Shard, 4, false, 20)}, "a",
			"b did not report"},
		{"a report under another identity", []Broker{live("b", "", "sb")}, []Report{lead, reported("b", "sb-old", a.Shard, 5, false, 20)}, "a",
			"b did not report"},
		{"registered with a new identity", []Broker{live("b", "", "sb2")},
			[]Report{lead, reported("b", "sb", a.Shard, 5, false, 20), reported("b", "sb2", a.Shard, 5, false, 20)}, "a", "b lost its copy"},
		{"down", []Broker{{NodeID: "b", State: Down, StorageID: "sb"}}, []Report{lead, reported("b", "sb", a.Shard, 5, false, 20)}, "a",
			"b not live"},
		{"draining", []Broker{{NodeID: "b", State: Draining, StorageID: "sb"}}, []Report{lead, reported("b", "sb", a.Shard, 5, false, 20)}, "a",
			"b not live"},
		{"its own report as a leader", []Broker{live("b", "", "sb")}, []Report{lead, reported("b", "sb", a.Shard, 5, true, 20)}, "a",
			"b did not report"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			brokers := append([]Broker{{NodeID: "a", State: Down, StorageID: "sa"}, {NodeID: "c", State: Down, StorageID: "sc"}}, tc.brokers...)
			out := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 5},
				Reports: tc.reports})
			got := out.Next.Assignments[0]
			if got.Owner != tc.want {
				t.Fatalf("owner %q, want %q: %+v", got.Owner, tc.want, got)
			}
			if tc.want != "a" {
				return
			}
			if got.Unavailable != ReasonOwnerDown || got.Generation != 5 || len(out.Decisions) == 0 || out.Decisions[0].Kind != Waiting {
				t.Fatalf("waiting shard %+v, decisions %+v", got, out.Decisions)
			}
			if d := out.Decisions[0].Detail; !strings.Contains(d, tc.detail) {
				t.Fatalf("detail %q, want it to say %q", d, tc.detail)
			}
		})
	}
}

func TestALeaderShardWhoseLeaderLostItsStorageOrLeftIsPromotedOnItsLastReport(t *testing.T) {
	r, a := quorumShard("leader", "a", "b", "c")
	// a came back with a new data directory: its report under sa is its
	// last word on the shard (the catalog keeps it as the previous one).
	reports := []Report{reported("a", "sa", a.Shard, 5, true, 10), {NodeID: "a", StorageID: "sa2"},
		reported("b", "sb", a.Shard, 5, false, 10)}
	brokers := []Broker{live("a", "", "sa2"), live("b", "", "sb"), {NodeID: "c", State: Down, StorageID: "sc"}}
	out := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 5},
		Reports: reports})
	if got := out.Next.Assignments[0]; got.Owner != "b" || got.Generation != 6 {
		t.Fatalf("after the leader lost its storage: %+v", got)
	}
	// a deregistered: its report still counts.
	brokers = []Broker{live("b", "", "sb"), {NodeID: "c", State: Down, StorageID: "sc"}}
	out = mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 5},
		Reports: reports})
	if got := out.Next.Assignments[0]; got.Owner != "b" {
		t.Fatalf("after the leader left the registry: %+v", got)
	}
}

func TestAServingLeaderShardIsNeverPromoted(t *testing.T) {
	r, a := quorumShard("leader", "a", "b", "c")
	reports := []Report{reported("a", "sa", a.Shard, 5, true, 10), reported("b", "sb", a.Shard, 5, false, 30)}
	for _, st := range []BrokerState{Live, Draining} {
		brokers := []Broker{{NodeID: "a", State: st, StorageID: "sa"}, live("b", "", "sb"), live("c", "", "sc")}
		out := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 5},
			Reports: reports})
		if got := out.Next.Assignments[0]; got.Owner != "a" || got.Generation != 5 {
			t.Fatalf("owner %s: %+v", st, got)
		}
	}
}

func TestPositionReportsAreValidated(t *testing.T) {
	r, a := quorumShard("leader", "a", "b")
	_, err := Compute(Input{Brokers: []Broker{live("a", "", "sa")}, Resources: []Resource{r},
		Current: State{Assignments: []Assignment{a}, LastGeneration: 5},
		Reports: []Report{{NodeID: "a", StorageID: "sa"}, {NodeID: "a", StorageID: "sa"}, {NodeID: "", StorageID: "x"}}})
	if got := inputError(t, err); len(got) != 2 {
		t.Fatalf("problems %q", got)
	}
}

func TestALeaderShardPromotesOnlyAFollowerThatReportedSinceItsLeaderWentDown(t *testing.T) {
	r, a := quorumShard("leader", "a", "b", "c")
	brokers := []Broker{{NodeID: "a", State: Down, StorageID: "sa", DownSinceMs: 1000}, live("b", "", "sb"),
		{NodeID: "c", State: Down, StorageID: "sc", DownSinceMs: 900}}
	in := Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 5}, NowMs: 1200}
	lead := reported("a", "sa", a.Shard, 5, true, 10)
	// b's last report is older than a's mark-down: b may have died with
	// a and not be marked down yet.
	b := reported("b", "sb", a.Shard, 5, false, 10)
	b.AtMs = 999
	in.Reports = []Report{lead, b}
	out := mustCompute(t, in)
	if got := out.Next.Assignments[0]; got.Owner != "a" || !strings.Contains(out.Decisions[0].Detail, "b has not reported since") {
		t.Fatalf("promoted on a report from before the leader went down: %+v %+v", got, out.Decisions)
	}
	in.Current = out.Next
	in.Reports[1].AtMs = 1000
	if got := mustCompute(t, in).Next.Assignments[0]; got.Owner != "b" {
		t.Fatalf("not promoted on a report since: %+v", got)
	}
}
