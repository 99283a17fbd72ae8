package placement

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
)

// checkStep asserts every invariant Compute keeps between in and out, and
// that computing again from out changes nothing. It returns the first
// broken one, naming the shard and the numbers.
func checkStep(in Input, out Output) error {
	checks := []func(Input, Output) error{
		checkShape, checkOwners, checkGenerations, checkAgainstPrevious, checkDecisions, checkIdempotent,
	}
	for _, c := range checks {
		if err := c(in, out); err != nil {
			return err
		}
	}
	return nil
}

// checkShape: one assignment per shard of every resource, of its
// incarnation, sorted, and nothing else.
func checkShape(in Input, out Output) error {
	want := map[ShardRef]string{}
	for _, r := range in.Resources {
		for i := uint32(0); i < max(r.Shards, 1); i++ {
			want[ShardRef{r.Key, i}] = r.Incarnation
		}
	}
	next := out.Next.Assignments
	if len(next) != len(want) {
		return fmt.Errorf("%d assignments for %d shards", len(next), len(want))
	}
	for i, a := range next {
		inc, ok := want[a.Shard]
		if !ok || inc != a.Incarnation {
			return fmt.Errorf("assignment %v (incarnation %q) matches no shard (want incarnation %q)", a.Shard, a.Incarnation, inc)
		}
		delete(want, a.Shard)
		if i > 0 && !next[i-1].Shard.less(a.Shard) {
			return fmt.Errorf("assignments out of order at %v after %v", a.Shard, next[i-1].Shard)
		}
	}
	return nil
}

// checkOwners: owners are serving brokers, except durable shards waiting
// for theirs and in-memory shards while no broker is live; Unavailable
// says exactly that.
func checkOwners(in Input, out Output) error {
	brokers, anyLive := map[string]Broker{}, false
	for _, b := range in.Brokers {
		brokers[b.NodeID] = b
		anyLive = anyLive || b.State == Live
	}
	durable := map[ResourceKey]bool{}
	for _, r := range in.Resources {
		durable[r.Key] = r.Durable
	}
	for _, a := range out.Next.Assignments {
		b, registered := brokers[a.Owner]
		var want string
		switch {
		case a.Owner == "":
			if anyLive {
				return fmt.Errorf("%v has no owner although a broker is live", a.Shard)
			}
			want = ReasonNotAssigned
		case durable[a.Shard.Resource] && registered && b.StorageID != a.StorageID:
			want = ReasonStorageLost
		case !registered || b.State == Down:
			if !durable[a.Shard.Resource] && anyLive {
				return fmt.Errorf("in-memory %v stays on %q which is not serving, although a broker is live", a.Shard, a.Owner)
			}
			want = ReasonOwnerDown
		}
		if a.Unavailable != want {
			return fmt.Errorf("%v owned by %q (%+v) is unavailable %q, want %q", a.Shard, a.Owner, b, a.Unavailable, want)
		}
		if !durable[a.Shard.Resource] && a.StorageID != "" {
			return fmt.Errorf("in-memory %v carries storage id %q", a.Shard, a.StorageID)
		}
	}
	return nil
}

// checkGenerations: owned shards have unique generations in
// (0, LastGeneration]; unowned ones generation 0; the counter never
// decreases.
func checkGenerations(in Input, out Output) error {
	last := out.Next.LastGeneration
	if last < in.Current.LastGeneration {
		return fmt.Errorf("last generation went from %d down to %d", in.Current.LastGeneration, last)
	}
	seen := map[uint64]ShardRef{}
	for _, a := range out.Next.Assignments {
		if a.Owner == "" {
			if a.Generation != 0 {
				return fmt.Errorf("unowned %v has generation %d", a.Shard, a.Generation)
			}
			continue
		}
		if a.Generation == 0 || a.Generation > last {
			return fmt.Errorf("%v has generation %d outside (0, %d]", a.Shard, a.Generation, last)
		}
		if prev, dup := seen[a.Generation]; dup {
			return fmt.Errorf("%v and %v share generation %d", prev, a.Shard, a.Generation)
		}
		seen[a.Generation] = a.Shard
	}
	return nil
}

// checkAgainstPrevious: a shard of the same incarnation keeps its
// generation while it keeps its owner, gets a generation above every
// earlier one when its owner changes, and changes owner only if it had
// none or was in memory on a broker that no longer serves. Durable
// shards never change owner once they have one.
func checkAgainstPrevious(in Input, out Output) error {
	prev := map[ShardRef]Assignment{}
	for _, a := range in.Current.Assignments {
		prev[a.Shard] = a
	}
	serving, durable := map[string]bool{}, map[ResourceKey]bool{}
	for _, b := range in.Brokers {
		serving[b.NodeID] = b.State.serving()
	}
	for _, r := range in.Resources {
		durable[r.Key] = r.Durable
	}
	oldLast := in.Current.LastGeneration
	for _, a := range out.Next.Assignments {
		p, ok := prev[a.Shard]
		if !ok || p.Incarnation != a.Incarnation {
			if a.Owner != "" && a.Generation <= oldLast {
				return fmt.Errorf("new %v got generation %d, not above the last %d", a.Shard, a.Generation, oldLast)
			}
			continue
		}
		if p.Owner == a.Owner {
			if p.Generation != a.Generation || p.StorageID != a.StorageID {
				return fmt.Errorf("%v kept owner %q but generation %d->%d, storage %q->%q",
					a.Shard, a.Owner, p.Generation, a.Generation, p.StorageID, a.StorageID)
			}
			continue
		}
		if a.Generation <= oldLast {
			return fmt.Errorf("%v moved %q->%q at generation %d, not above the last %d", a.Shard, p.Owner, a.Owner, a.Generation, oldLast)
		}
		if p.Owner != "" && (durable[a.Shard.Resource] || serving[p.Owner]) {
			return fmt.Errorf("%v moved %q->%q although durable or its owner serves", a.Shard, p.Owner, a.Owner)
		}
	}
	return nil
}

// checkDecisions: exactly the shards whose assignment changed have a
// decision, and the decisions are in shard order.
func checkDecisions(in Input, out Output) error {
	prev := map[ShardRef]Assignment{}
	for _, a := range in.Current.Assignments {
		prev[a.Shard] = a
	}
	changed := map[ShardRef]bool{}
	for _, a := range out.Next.Assignments {
		p, ok := prev[a.Shard]
		if !ok || !reflect.DeepEqual(normal(p), normal(a)) {
			changed[a.Shard] = true
		}
		delete(prev, a.Shard)
	}
	for ref := range prev {
		changed[ref] = true
	}
	decided := map[ShardRef]bool{}
	for i, d := range out.Decisions {
		if i > 0 && d.Shard.less(out.Decisions[i-1].Shard) {
			return fmt.Errorf("decisions out of order at %v", d.Shard)
		}
		if !changed[d.Shard] {
			return fmt.Errorf("decision %+v for a shard that did not change", d)
		}
		decided[d.Shard] = true
	}
	for ref := range changed {
		if !decided[ref] {
			return fmt.Errorf("%v changed without a decision", ref)
		}
	}
	return nil
}

// normal makes an empty replica list compare equal to a nil one.
func normal(a Assignment) Assignment {
	if len(a.Replicas) == 0 {
		a.Replicas = nil
	}
	return a
}

// checkIdempotent: computing again from the output changes nothing.
func checkIdempotent(in Input, out Output) error {
	again, err := Compute(Input{Brokers: in.Brokers, Resources: in.Resources, Current: out.Next})
	if err != nil {
		return fmt.Errorf("second run refused its own output: %w", err)
	}
	if len(again.Decisions) != 0 || !reflect.DeepEqual(again.Next, out.Next) {
		return fmt.Errorf("second run changed the placement: decisions %+v", again.Decisions)
	}
	return nil
}

// mustCompute runs Compute and checkStep, failing t on either.
func mustCompute(t testing.TB, in Input) Output {
	t.Helper()
	out, err := Compute(in)
	if err != nil {
		t.Fatalf("Compute: %v", err)
	}
	if err := checkStep(in, out); err != nil {
		t.Fatalf("invariant: %v", err)
	}
	return out
}

// inputError returns err's problems, failing t if err is not an *InputError.
func inputError(t *testing.T, err error) []string {
	t.Helper()
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("error %v is not an *InputError", err)
	}
	return ie.Problems
}

// ownerCounts counts key's shards per owner in st.
func ownerCounts(st State, key ResourceKey) map[string]int {
	n := map[string]int{}
	for _, a := range st.Assignments {
		if a.Shard.Resource == key {
			n[a.Owner]++
		}
	}
	return n
}

// find returns the assignment of ref in st.
func find(t testing.TB, st State, ref ShardRef) Assignment {
	t.Helper()
	i := sort.Search(len(st.Assignments), func(i int) bool { return !st.Assignments[i].Shard.less(ref) })
	if i == len(st.Assignments) || st.Assignments[i].Shard != ref {
		t.Fatalf("no assignment for %v", ref)
	}
	return st.Assignments[i]
}

func live(id, zone, storage string) Broker {
	return Broker{NodeID: id, Zone: zone, State: Live, StorageID: storage}
}

func streamKey(name string) ResourceKey {
	return ResourceKey{Kind: KindStream, TenantID: "t", Namespace: "ns", Name: name}
}

func stream(name string, shards uint32, durable bool) Resource {
	return Resource{Key: streamKey(name), Incarnation: "i1", Shards: shards, Durable: durable,
		ReplicationFactor: 1, Consistency: "leader"}
}
