package placement

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"
)

// checkStep asserts every invariant Compute keeps between in and out, and
// that computing again from out changes nothing. It returns the first
// broken one, naming the shard and the numbers.
func checkStep(in Input, out Output) error {
	checks := []func(Input, Output) error{
		checkShape, checkOwners, checkGenerations, checkAgainstPrevious, checkReplicas, checkDecisions, checkIdempotent,
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
			if (p.Generation != a.Generation || p.StorageID != a.StorageID) && !reopenedIn(in, p, a) {
				return fmt.Errorf("%v kept owner %q but generation %d->%d, storage %q->%q",
					a.Shard, a.Owner, p.Generation, a.Generation, p.StorageID, a.StorageID)
			}
			continue
		}
		if a.Generation <= oldLast {
			return fmt.Errorf("%v moved %q->%q at generation %d, not above the last %d", a.Shard, p.Owner, a.Owner, a.Generation, oldLast)
		}
		if p.Owner != "" && durable[a.Shard.Resource] {
			// Only a promotion: a Quorum shard's live follower, placed
			// under its current storage, takes over from an owner that
			// does not serve, which stays in the set.
			promotedFrom := false
			for _, r := range p.Replicas {
				if r.NodeID == a.Owner && r.StorageID == a.StorageID {
					promotedFrom = true
				}
			}
			ownerServes := serving[p.Owner] && storageOf(in, p.Owner) == p.StorageID
			byRule := p.Consistency == "quorum" && (!ownerServes || suspectedIn(in, p)) ||
				p.Consistency != "quorum" && !ownerServes && heldTheLogIn(in, p, a.Owner)
			if !promotedFrom || !byRule {
				return fmt.Errorf("%v durable moved %q->%q without a promotion", a.Shard, p.Owner, a.Owner)
			}
			continue
		}
		if p.Owner != "" && serving[p.Owner] {
			return fmt.Errorf("%v moved %q->%q although its owner serves", a.Shard, p.Owner, a.Owner)
		}
	}
	return nil
}

// checkReplicas: followers only on served-or-waiting durable shards of a
// factor above 1, at most factor-1 of them, distinct, never the owner,
// each on a registered broker with the storage it was chosen on; new ones
// only on live brokers, and in a zone the shard had no copy in unless
// none was free; old ones kept unless gone or replaced by restore (see
// checkKeptAndNew); a served shard short of followers, or keeping a
// follower overdue for restore, only when no live broker is free.
func checkReplicas(in Input, out Output) error {
	brokers := map[string]Broker{}
	for _, b := range in.Brokers {
		brokers[b.NodeID] = b
	}
	res := map[ResourceKey]Resource{}
	for _, r := range in.Resources {
		res[r.Key] = r
	}
	prev := map[ShardRef]Assignment{}
	for _, a := range in.Current.Assignments {
		prev[a.Shard] = a
	}
	for _, a := range out.Next.Assignments {
		r := res[a.Shard.Resource]
		want := 0
		if r.Durable && r.ReplicationFactor > 1 && a.Owner != "" {
			want = int(r.ReplicationFactor) - 1
		}
		if len(a.Replicas) > want {
			return fmt.Errorf("%v has %d followers %v, at most %d wanted", a.Shard, len(a.Replicas), a.Replicas, want)
		}
		holds := map[string]bool{a.Owner: true}
		for _, rep := range a.Replicas {
			b, ok := brokers[rep.NodeID]
			switch {
			case holds[rep.NodeID]:
				return fmt.Errorf("%v names %q twice (owner %q, followers %v)", a.Shard, rep.NodeID, a.Owner, a.Replicas)
			case !ok || b.StorageID != rep.StorageID:
				return fmt.Errorf("%v keeps follower %+v whose broker is %+v", a.Shard, rep, b)
			}
			holds[rep.NodeID] = true
		}
		p, had := prev[a.Shard]
		sameOwner := had && p.Incarnation == a.Incarnation && p.Owner == a.Owner
		if err := checkKeptAndNew(in, a, p, sameOwner, brokers, want); err != nil {
			return err
		}
		overdue := ""
		for _, rep := range a.Replicas {
			if overdueIn(in, brokers[rep.NodeID]) {
				overdue = rep.NodeID
			}
		}
		if a.Owner != "" && a.Unavailable == "" && (len(a.Replicas) < want || overdue != "") {
			for _, b := range in.Brokers {
				if b.State == Live && !holds[b.NodeID] {
					return fmt.Errorf("%v has %d of %d followers (overdue %q) although live %q is free",
						a.Shard, len(a.Replicas), want, overdue, b.NodeID)
				}
			}
		}
	}
	return nil
}

// checkKeptAndNew: p's followers that a could keep are still there,
// unless replaced by restore (overdue, on a served shard, and only when
// the set ends full: a restore never costs the shard a follower it could
// have kept beside a top-up), and a's new followers are
// live and spread over zones as far as they can.
func checkKeptAndNew(in Input, a, p Assignment, sameOwner bool, brokers map[string]Broker, want int) error {
	was := map[string]bool{}
	if !sameOwner && p.Owner != "" && p.Incarnation == a.Incarnation {
		// A promotion: the old leader and the old followers are not new.
		was[p.Owner] = true
		for _, rep := range p.Replicas {
			was[rep.NodeID] = true
		}
	}
	if sameOwner {
		restored := false
		for i, rep := range p.Replicas {
			b, ok := brokers[rep.NodeID]
			was[rep.NodeID] = true
			if i >= want || !ok || b.StorageID != rep.StorageID || rep.NodeID == a.Owner {
				continue
			}
			if slices.Contains(a.Replicas, rep) {
				continue
			}
			if a.Unavailable != "" || !overdueIn(in, b) {
				return fmt.Errorf("%v lost follower %+v (broker %+v); followers %v -> %v", a.Shard, rep, b, p.Replicas, a.Replicas)
			}
			restored = true
		}
		if restored && len(a.Replicas) != want {
			return fmt.Errorf("%v replaced a follower but has %d of %d: followers %v -> %v", a.Shard, len(a.Replicas), want, p.Replicas, a.Replicas)
		}
	}
	zones := map[string]int{zoneOfNode(brokers, a.Owner): 1}
	for _, rep := range a.Replicas {
		zones[zoneOfNode(brokers, rep.NodeID)]++
	}
	for _, rep := range a.Replicas {
		if was[rep.NodeID] {
			continue
		}
		b := brokers[rep.NodeID]
		if b.State != Live {
			return fmt.Errorf("%v took follower %q in state %s", a.Shard, rep.NodeID, b.State)
		}
		if zones[zoneKey(&b)] < 2 {
			continue
		}
		for _, o := range brokers {
			if o.State == Live && zones[zoneKey(&o)] == 0 {
				return fmt.Errorf("%v took %q in a zone it had a copy in (%v), although %q's zone has none", a.Shard, rep.NodeID, zones, o.NodeID)
			}
		}
	}
	return nil
}

// overdueIn reports whether b is down for in.RestoreAfterMs: a follower
// on it may be replaced.
func overdueIn(in Input, b Broker) bool {
	return b.State == Down && in.RestoreAfterMs > 0 && b.DownSinceMs > 0 && in.NowMs-b.DownSinceMs >= in.RestoreAfterMs
}

// zoneOfNode is node's zone key, or a key of its own when unregistered.
func zoneOfNode(brokers map[string]Broker, node string) string {
	if b, ok := brokers[node]; ok {
		return zoneKey(&b)
	}
	return "\x00" + node
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
	again, err := Compute(Input{Brokers: in.Brokers, Resources: in.Resources, Current: out.Next,
		NowMs: in.NowMs, RestoreAfterMs: in.RestoreAfterMs, Reports: in.Reports})
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

// storageOf is the storage identity node is registered with in in.
func storageOf(in Input, node string) string {
	for _, b := range in.Brokers {
		if b.NodeID == node {
			return b.StorageID
		}
	}
	return ""
}

// suspectedIn reports whether a majority of a's set suspects its leader
// in in (the fast path's rule, restated).
func suspectedIn(in Input, a Assignment) bool {
	n := 0
	for _, rep := range a.Replicas {
		for _, b := range in.Brokers {
			if b.NodeID != rep.NodeID || b.State != Live || b.StorageID != rep.StorageID {
				continue
			}
			for _, s := range b.Suspects {
				if s.Shard == a.Shard && s.Generation == a.Generation && s.Leader == a.Owner {
					n++
					break
				}
			}
		}
	}
	return n >= (1+len(a.Replicas))/2+1
}

// heldTheLogIn reports whether node, a follower of the leader-consistency
// shard a, held the log when it last reported (the promotion rule,
// restated with linear scans): live under the identity of its copy, a
// report stamped with it at a's generation, durable at least the
// leader's own last report at that generation under a's storage, and no
// other such follower further.
func heldTheLogIn(in Input, a Assignment, node string) bool {
	find := func(n, storage string) (Position, int64, bool) {
		for _, r := range in.Reports {
			if r.NodeID == n && r.StorageID == storage {
				pos, ok := r.Positions[a.Shard]
				return pos, r.AtMs, ok
			}
		}
		return Position{}, 0, false
	}
	lead, _, ok := find(a.Owner, a.StorageID)
	if !ok || !lead.Leader || lead.Generation != a.Generation {
		return false
	}
	var downSince int64
	for _, b := range in.Brokers {
		if b.NodeID == a.Owner && b.State == Down {
			downSince = b.DownSinceMs
		}
	}
	held := func(rep Replica) (uint64, bool) {
		b := Broker{}
		for _, x := range in.Brokers {
			if x.NodeID == rep.NodeID {
				b = x
			}
		}
		pos, at, ok := find(rep.NodeID, rep.StorageID)
		if b.State != Live || b.StorageID != rep.StorageID || !ok || pos.Leader || pos.Generation != a.Generation || pos.Durable < lead.Durable ||
			at < downSince {
			return 0, false
		}
		return pos.Durable, true
	}
	var mine uint64
	found := false
	for _, rep := range a.Replicas {
		if rep.NodeID == node {
			mine, found = held(rep)
		}
	}
	if !found {
		return false
	}
	for _, rep := range a.Replicas {
		if d, ok := held(rep); ok && d > mine {
			return false
		}
	}
	return true
}

// reopenedIn reports whether durable shard p, whose next assignment a
// keeps its owner under another storage identity at a new generation,
// was reopened by the crash rule (restated): its owner is serving, back
// under a.StorageID after a crash of p.StorageID; every follower still
// holding its copy is live and has reported since the owner registered;
// and none could be promoted (on a Quorum shard, none holds a copy; on a
// leader one, none held the log).
func reopenedIn(in Input, p, a Assignment) bool {
	var b Broker
	for _, x := range in.Brokers {
		if x.NodeID == p.Owner {
			b = x
		}
	}
	if !b.State.serving() || b.CrashedStorageID == "" || b.CrashedStorageID != p.StorageID || a.StorageID != b.StorageID ||
		a.Generation <= in.Current.LastGeneration || a.Unavailable != "" {
		return false
	}
	for _, rep := range p.Replicas {
		var f Broker
		for _, x := range in.Brokers {
			if x.NodeID == rep.NodeID {
				f = x
			}
		}
		if f.NodeID == "" || f.StorageID != rep.StorageID {
			continue
		}
		if f.State != Live || p.Consistency == "quorum" || heldTheLogIn(in, p, rep.NodeID) {
			return false
		}
		since := false
		for _, r := range in.Reports {
			if r.NodeID == rep.NodeID && r.StorageID == rep.StorageID && r.AtMs >= b.RegisteredAtMs {
				since = true
			}
		}
		if !since {
			return false
		}
	}
	return true
}
