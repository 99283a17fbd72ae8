package placement

import (
	"reflect"
	"testing"
)

func TestReplicationCountsLiveCopiesAgainstTheFactor(t *testing.T) {
	brokers := []Broker{live("n1", "", "s1"), live("n2", "", "s2"), live("n3", "", "s3")}
	res := []Resource{replicated("r", 1, 3), stream("one", 1, true), stream("mem", 1, false)}
	out := mustCompute(t, Input{Brokers: brokers, Resources: res})
	in := Input{Brokers: brokers, Resources: res, Current: out.Next}
	rep := Replication(in)
	if len(rep) != 1 || rep[0].Shard.Resource != streamKey("r") || rep[0].Current != 3 || rep[0].Desired != 3 || rep[0].UnderReplicated() {
		t.Fatalf("healthy cluster: %+v, want the factor-3 shard alone, with 3 of 3 copies", rep)
	}
	if n := UnderReplicated(in); n != 0 {
		t.Errorf("%d under-replicated, want 0", n)
	}

	// n2 drains (still counts), n3 comes back with new storage (gone),
	// and the owner of "one" goes down: two shards under-replicated.
	r := rep[0]
	owners := map[string]bool{r.Leader.NodeID: true}
	states := map[string]string{}
	for i := range brokers {
		b := &brokers[i]
		switch {
		case b.NodeID == find(t, out.Next, ShardRef{streamKey("one"), 0}).Owner:
			b.State, states[b.NodeID] = Down, CopyDown
		case !owners[b.NodeID] && b.State == Live && states["draining"] == "":
			b.State, states[b.NodeID], states["draining"] = Draining, CopyDraining, b.NodeID
		default:
			b.StorageID, states[b.NodeID] = "fresh", CopyGone
		}
	}
	in.Brokers = brokers
	rep = Replication(in)
	if len(rep) != 2 || UnderReplicated(in) != 2 {
		t.Fatalf("after the changes %+v, want two shards, both under-replicated", rep)
	}
	one, r := rep[0], rep[1] // in shard order: "one" before "r"
	got := map[string]string{}
	live := 0
	for _, c := range append([]CopyStatus{r.Leader}, r.Replicas...) {
		got[c.NodeID] = c.State
		if c.State == CopyLive || c.State == CopyDraining {
			live++
		}
	}
	delete(states, "draining")
	if !reflect.DeepEqual(got, states) || r.Current != live || live != 1 {
		t.Errorf("copy states %v (current %d), want %v (current %d, one draining)", got, r.Current, states, live)
	}
	if one.Shard.Resource != streamKey("one") || one.Desired != 1 || one.Current != 0 || one.Leader.State != CopyDown {
		t.Errorf("factor-1 shard with its owner down: %+v", one)
	}
}
