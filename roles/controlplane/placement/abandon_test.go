package placement

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// The spec's case: a leader-consistency shard whose leader is gone for
// good and whose follower came back under a new storage identity (a
// crash under periodic fsync) waits; abandon places it on the live
// members of its set, keeping their copies, and drops the dead one.
func TestAbandonPlacesAWaitingShardOnItsLiveCopies(t *testing.T) {
	r, a := quorumShard("leader", "a", "b", "c")
	brokers := []Broker{{NodeID: "a", State: Down, StorageID: "sa"}, live("b", "", "sb2"), live("c", "", "sc"), live("d", "", "sd")}
	in := Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 9}}
	res, err := Abandon(in, a.Shard)
	if err != nil {
		t.Fatal(err)
	}
	got := res.After
	// c kept the identity its copy was placed on: it leads; b follows
	// under the identity it has now.
	if got.Owner != "c" || got.StorageID != "sc" || got.Generation != 10 || res.Next.LastGeneration != 10 || got.Unavailable != "" {
		t.Fatalf("after: %+v", got)
	}
	if len(got.Replicas) != 1 || got.Replicas[0] != (Replica{NodeID: "b", StorageID: "sb2"}) {
		t.Fatalf("followers %+v, want b under sb2", got.Replicas)
	}
	if !slices.Equal(res.Lost, []string{"a"}) || !slices.Equal(res.Kept, []string{"c", "b"}) {
		t.Fatalf("lost %v kept %v", res.Lost, res.Kept)
	}
	if d := res.Decision; d.Kind != Abandoned || d.From != "a" || d.To != "c" || d.Generation != 10 || !strings.Contains(d.Reason, "a") {
		t.Fatalf("decision %+v", d)
	}
	// The next pass keeps the new owner and tops the set up to 3 from d.
	out := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: res.Next})
	next := out.Next.Assignments[0]
	if next.Owner != "c" || next.Generation != 10 || !slices.Equal(followers(next), []string{"b", "d"}) {
		t.Fatalf("the pass after: %+v (decisions %+v)", next, out.Decisions)
	}
}

func TestAbandonRefusals(t *testing.T) {
	r, a := quorumShard("quorum", "a", "b", "c")
	refused := func(in Input, ref ShardRef, want string) {
		t.Helper()
		_, err := Abandon(in, ref)
		var ae *AbandonError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), want) {
			t.Fatalf("abandon: %v, want a refusal saying %q", err, want)
		}
	}
	allLive := []Broker{live("a", "", "sa"), live("b", "", "sb"), live("c", "", "sc")}
	state := State{Assignments: []Assignment{a}, LastGeneration: 5}
	refused(Input{Brokers: allLive, Resources: []Resource{r}, Current: state}, a.Shard, "served by a")

	allDown := []Broker{{NodeID: "a", State: Down, StorageID: "sa"}, {NodeID: "b", State: Down, StorageID: "sb"},
		{NodeID: "c", State: Down, StorageID: "sc"}, live("d", "", "sd")}
	refused(Input{Brokers: allDown, Resources: []Resource{r}, Current: state}, a.Shard, "no live broker of its replica set")

	other := a.Shard
	other.Shard = 3
	refused(Input{Brokers: allLive, Resources: []Resource{r}, Current: state}, other, "there is no shard 3")

	unplaced := Input{Brokers: allLive, Resources: []Resource{r}}
	refused(unplaced, a.Shard, "has not been placed")

	mem := r
	mem.Durable, mem.ReplicationFactor = false, 1
	refused(Input{Brokers: allLive, Resources: []Resource{mem}}, a.Shard, "not durable")

	missing := a.Shard
	missing.Resource.Name = "nope"
	refused(Input{Brokers: allLive, Resources: []Resource{r}, Current: state}, missing, "no such resource")
}

// A follower that came back under a new storage identity has left the
// set; the operator names it to keep its copy.
func TestAbandonKeepsTheNamedBrokers(t *testing.T) {
	r, a := quorumShard("leader", "a", "b")
	a.Replicas = nil // b was dropped when it came back as sb2
	brokers := []Broker{{NodeID: "a", State: Down, StorageID: "sa"}, live("b", "", "sb2"), live("c", "", "sc"),
		{NodeID: "d", State: Down, StorageID: "sd"}}
	in := Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 5}}
	if _, err := Abandon(in, a.Shard); err == nil || !strings.Contains(err.Error(), "name the live brokers") {
		t.Fatalf("without names: %v", err)
	}
	res, err := Abandon(in, a.Shard, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got := res.After; got.Owner != "b" || got.StorageID != "sb2" || got.Generation != 6 || len(got.Replicas) != 0 {
		t.Fatalf("after: %+v", got)
	}
	if !slices.Equal(res.Lost, []string{"a"}) || !slices.Equal(res.Kept, []string{"b"}) {
		t.Fatalf("lost %v kept %v", res.Lost, res.Kept)
	}
	for _, bad := range [][]string{{"d"}, {"zz"}, {"b", "c", "b", "d"}} {
		if _, err := Abandon(in, a.Shard, bad...); err == nil || !strings.Contains(err.Error(), "not live") {
			t.Fatalf("keep %v: %v, want a refusal", bad, err)
		}
	}
	if _, err := Abandon(in, a.Shard, "b", "c", "a"); err == nil {
		t.Fatal("a down broker named was accepted")
	}
}
