package placement

import (
	"errors"
	"slices"
	"testing"
)

func TestAHandoffMakesTheFollowerTheLeaderAndTheNextPassKeepsIt(t *testing.T) {
	for _, consistency := range []string{"quorum", "leader"} {
		r, a := quorumShard(consistency, "a", "b", "c")
		brokers := []Broker{live("a", "", "sa"), live("b", "", "sb"), live("c", "", "sc")}
		in := Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 9}}
		out, err := Handoff(in, HandoffRequest{Shard: a.Shard, Generation: 5, From: "a", To: "c"})
		if err != nil {
			t.Fatal(err)
		}
		got := out.Next.Assignments[0]
		if got.Owner != "c" || got.StorageID != "sc" || got.Generation != 10 || out.Next.LastGeneration != 10 {
			t.Fatalf("%s: after the handoff: %+v", consistency, got)
		}
		if !slices.Equal(followers(got), []string{"b", "a"}) || got.Replicas[1].StorageID != "sa" {
			t.Fatalf("%s: followers %+v, want b and the old leader a under its storage", consistency, got.Replicas)
		}
		if len(out.Decisions) != 1 || out.Decisions[0].Kind != HandedOff || out.Decisions[0].From != "a" || out.Decisions[0].To != "c" {
			t.Fatalf("%s: decisions %+v", consistency, out.Decisions)
		}
		if in.Current.Assignments[0].Owner != "a" {
			t.Fatal("the input was changed")
		}
		again := mustCompute(t, Input{Brokers: brokers, Resources: []Resource{r}, Current: out.Next})
		if len(again.Decisions) != 0 {
			t.Fatalf("%s: the next pass decided %+v", consistency, again.Decisions)
		}
	}
}

func TestAHandoffIsRefusedUnlessThePlacementBacksIt(t *testing.T) {
	r, a := quorumShard("quorum", "a", "b", "c")
	brokers := []Broker{live("a", "", "sa"), live("b", "", "sb2"), {NodeID: "c", State: Down, StorageID: "sc"}, live("d", "", "sd")}
	in := Input{Brokers: brokers, Resources: []Resource{r}, Current: State{Assignments: []Assignment{a}, LastGeneration: 9}}
	for _, tc := range []struct {
		req    HandoffRequest
		reason string
	}{
		{HandoffRequest{Shard: a.Shard, Generation: 4, From: "a", To: "b"}, HandoffStale},
		{HandoffRequest{Shard: a.Shard, Generation: 5, From: "b", To: "c"}, HandoffNotOwner},
		{HandoffRequest{Shard: a.Shard, Generation: 5, From: "a", To: "d"}, HandoffNotReplica},
		{HandoffRequest{Shard: a.Shard, Generation: 5, From: "a", To: "c"}, HandoffTargetNotLive},
		{HandoffRequest{Shard: a.Shard, Generation: 5, From: "a", To: "b"}, HandoffStorage},
		{HandoffRequest{Shard: ShardRef{Resource: a.Shard.Resource, Shard: 7}, Generation: 5, From: "a", To: "b"}, HandoffNoShard},
	} {
		_, err := Handoff(in, tc.req)
		var hr *HandoffRefused
		if !errors.As(err, &hr) || hr.Reason != tc.reason {
			t.Errorf("%+v: %v, want %s", tc.req, err, tc.reason)
		}
	}
}
