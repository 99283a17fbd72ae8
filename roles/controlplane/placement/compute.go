package placement

import (
	"slices"
	"sort"
)

// Compute returns the placement that follows in.Current given the brokers
// and resources of in, and the decisions that lead there. It is a pure
// function: no clock, no I/O, no randomness, and the same input (in any
// order of its slices) gives the same output. It refuses a malformed
// input with an *InputError and never panics on one.
//
// Compute runs in three passes: the first keeps, drops or marks every
// current assignment and finds the shards that need an owner; the second
// chooses their owners, in shard order, against the counts the first pass
// left (see chooser); the third drops the followers shards cannot keep,
// replaces those down for in.RestoreAfterMs, and tops up short replica
// sets (see replicate, restoreReplicas and replicaChooser).
func Compute(in Input) (Output, error) {
	if err := validate(&in); err != nil {
		return Output{}, err
	}
	p := newPlanner(&in)
	for _, rp := range p.plans {
		p.review(rp)
	}
	p.dropOrphans()
	ch := newChooser(p)
	for _, rp := range p.plans {
		p.place(ch, rp)
	}
	p.replicate()
	return p.output(), nil
}

// planner holds one Compute call's working state. It is not shared.
type planner struct {
	brokers map[string]*Broker
	// current indexes in.Current.Assignments by shard.
	current map[ShardRef]*Assignment
	// plans is one per resource, sorted by key; byKey indexes them.
	plans []*resourcePlan
	byKey map[ResourceKey]*resourcePlan
	// last is the generation counter; it only grows.
	last      uint64
	decisions []Decision
	// reports indexes Input.Reports (see position).
	reports map[reportKey]*Report
	// nowMs and restoreAfterMs are Input.NowMs and Input.RestoreAfterMs.
	nowMs, restoreAfterMs int64
}

// resourcePlan is one resource's shards during a Compute call.
type resourcePlan struct {
	r *Resource
	// shards has one entry per shard of r, index = shard number.
	shards []Assignment
	// needy lists the shards (ascending) that need a new owner; their
	// entries in shards hold the previous assignment, if any.
	needy []uint32
}

func newPlanner(in *Input) *planner {
	p := &planner{
		brokers: make(map[string]*Broker, len(in.Brokers)),
		current: make(map[ShardRef]*Assignment, len(in.Current.Assignments)),
		plans:   make([]*resourcePlan, 0, len(in.Resources)),
		byKey:   make(map[ResourceKey]*resourcePlan, len(in.Resources)),
		last:    in.Current.LastGeneration,
		nowMs:   in.NowMs, restoreAfterMs: in.RestoreAfterMs,
		reports: indexReports(in),
	}
	for i := range in.Brokers {
		p.brokers[in.Brokers[i].NodeID] = &in.Brokers[i]
	}
	for i := range in.Current.Assignments {
		a := &in.Current.Assignments[i]
		p.current[a.Shard] = a
	}
	for i := range in.Resources {
		r := &in.Resources[i]
		rp := &resourcePlan{r: r, shards: make([]Assignment, r.shardCount())}
		p.plans = append(p.plans, rp)
		p.byKey[r.Key] = rp
	}
	sort.Slice(p.plans, func(i, j int) bool { return p.plans[i].r.Key.less(p.plans[j].r.Key) })
	return p
}

// review decides, for each shard of rp, whether its current assignment
// stays (with its availability brought up to date) or the shard needs an
// owner.
func (p *planner) review(rp *resourcePlan) {
	for i := range rp.shards {
		ref := ShardRef{Resource: rp.r.Key, Shard: uint32(i)}
		cur, ok := p.current[ref]
		switch {
		case ok && cur.Incarnation == rp.r.Incarnation:
			rp.shards[i] = cloneAssignment(cur)
			if p.keep(rp.r, &rp.shards[i]) {
				continue
			}
		case ok:
			p.decide(Decision{Kind: Dropped, Shard: ref, Incarnation: cur.Incarnation,
				From: cur.Owner, Generation: cur.Generation, Reason: DropRecreated})
			rp.shards[i] = Assignment{Shard: ref, Incarnation: rp.r.Incarnation}
		default:
			rp.shards[i] = Assignment{Shard: ref, Incarnation: rp.r.Incarnation}
		}
		rp.needy = append(rp.needy, uint32(i))
	}
}

// keep updates a's availability and reports whether a keeps its owner.
// A shard without an owner, and an in-memory shard whose owner does not
// serve, need an owner; every other shard keeps the one it has.
func (p *planner) keep(r *Resource, a *Assignment) bool {
	if a.Owner == "" {
		return false
	}
	b := p.brokers[a.Owner]
	reason := availability(r, a, b)
	if reason == ReasonOwnerDown && !r.Durable {
		return false
	}
	why := ""
	if reason != "" || p.suspected(a) {
		var promoted bool
		if promoted, why = p.promote(r, a); promoted {
			return true
		}
		if reason == ReasonStorageLost && crashedOwner(r, a, b) {
			var reopened bool
			if reopened, why = p.reopenCrashed(a, b, why); reopened {
				return true
			}
		}
	}
	p.setAvailabilityWhy(a, reason, why)
	return true
}

// suspected reports whether a majority of a's replica set suspects its
// leader: that many of its followers, live under the storage identity
// their copies were placed on, reported it silent at its generation (the
// Quorum fast path). The leader itself is never counted.
func (p *planner) suspected(a *Assignment) bool {
	if a.Consistency != "quorum" || len(a.Replicas) == 0 {
		return false
	}
	n := 0
	for _, rep := range a.Replicas {
		b := p.brokers[rep.NodeID]
		if b == nil || b.State != Live || b.StorageID != rep.StorageID {
			continue
		}
		for _, s := range b.Suspects {
			if s.Shard == a.Shard && s.Generation == a.Generation && s.Leader == a.Owner {
				n++
				break
			}
		}
	}
	return n >= (1+len(a.Replicas))/2+1
}

// promote makes a follower the leader of a durable shard whose owner does
// not serve it (down, back without its storage, or, on a Quorum shard,
// suspected by a majority of its set: see suspected); it reports whether
// it did, and if not why (for the Waiting decision).
//
// On a Quorum shard the first follower in the list that is live under the
// storage identity its copy was placed on is taken: any one will do,
// since the new leader fences a majority of the set and takes the
// furthest of their copies before it serves (the broker's takeover). On
// a shard of consistency leader, whose acknowledged records may be on its
// leader alone, only a follower that held the log when it last reported
// is (see furthestReported). The old owner stays in the replica set, so
// a majority is still counted over every copy that may hold acknowledged
// records.
func (p *planner) promote(r *Resource, a *Assignment) (bool, string) {
	if !r.Durable || len(a.Replicas) == 0 {
		return false, ""
	}
	var i int
	var why string
	if a.Consistency == "quorum" {
		i = p.firstLiveFollower(a)
	} else {
		i, why = p.furthestReported(a)
	}
	if i < 0 {
		return false, why
	}
	rep := a.Replicas[i]
	from := a.Owner
	old := Replica{NodeID: a.Owner, StorageID: a.StorageID}
	rest := make([]Replica, 0, len(a.Replicas))
	rest = append(rest, a.Replicas[:i]...)
	rest = append(rest, a.Replicas[i+1:]...)
	rest = append(rest, old)
	p.last++
	a.Owner, a.StorageID, a.Generation, a.Unavailable, a.Replicas = rep.NodeID, rep.StorageID, p.last, "", rest
	p.decide(Decision{Kind: Promoted, Shard: a.Shard, Incarnation: a.Incarnation,
		From: from, To: a.Owner, Generation: a.Generation})
	return true, ""
}

// firstLiveFollower is the index of a's first follower whose broker is
// live under the storage identity its copy was placed on, or -1.
func (p *planner) firstLiveFollower(a *Assignment) int {
	for i, rep := range a.Replicas {
		if b := p.brokers[rep.NodeID]; b != nil && b.State == Live && b.StorageID == rep.StorageID {
			return i
		}
	}
	return -1
}

// availability is why a, owned by b (nil when not registered), is not
// served, or "" when it is.
func availability(r *Resource, a *Assignment, b *Broker) string {
	switch {
	case r.Durable && b != nil && b.StorageID != a.StorageID:
		return ReasonStorageLost
	case b == nil || !b.State.serving():
		return ReasonOwnerDown
	}
	return ""
}

// setAvailability records reason on a, with a decision if it changed.
func (p *planner) setAvailability(a *Assignment, reason string) { p.setAvailabilityWhy(a, reason, "") }

// setAvailabilityWhy is setAvailability with why no follower took over
// in the decision's Detail.
func (p *planner) setAvailabilityWhy(a *Assignment, reason, why string) {
	if a.Unavailable == reason {
		return
	}
	kind := Waiting
	if reason == "" {
		kind = Restored
	}
	a.Unavailable = reason
	p.decide(Decision{Kind: kind, Shard: a.Shard, Incarnation: a.Incarnation,
		From: a.Owner, To: a.Owner, Generation: a.Generation, Reason: reason, Detail: why})
}

// dropOrphans drops the current assignments no resource claimed (review
// dropped those of an earlier incarnation within the shard count): their
// resource was deleted, or the shard is beyond its shard count.
func (p *planner) dropOrphans() {
	for ref, a := range p.current {
		reason := DropDeleted
		if rp, ok := p.byKey[ref.Resource]; ok {
			if int(ref.Shard) < len(rp.shards) {
				continue
			}
			reason = DropBeyondShards
			if rp.r.Incarnation != a.Incarnation {
				reason = DropRecreated
			}
		}
		p.decide(Decision{Kind: Dropped, Shard: ref, Incarnation: a.Incarnation,
			From: a.Owner, Generation: a.Generation, Reason: reason})
	}
}

// place gives each needy shard of rp an owner, or records why it has none.
func (p *planner) place(ch *chooser, rp *resourcePlan) {
	if len(rp.needy) == 0 {
		return
	}
	ch.startResource(rp)
	for _, i := range rp.needy {
		a := &rp.shards[i]
		to, ok := ch.choose(i)
		if !ok {
			p.unplaceable(a)
			continue
		}
		from := a.Owner
		p.last++
		*a = Assignment{Shard: a.Shard, Incarnation: a.Incarnation, Owner: to.NodeID,
			Generation: p.last, Consistency: rp.r.Consistency}
		if rp.r.Durable {
			a.StorageID = to.StorageID
		}
		kind := Placed
		if from != "" {
			kind = Reassigned
		}
		p.decide(Decision{Kind: kind, Shard: a.Shard, Incarnation: a.Incarnation,
			From: from, To: to.NodeID, Generation: a.Generation})
	}
}

// unplaceable records that no live broker could take a: a new shard stays
// without an owner, an in-memory shard keeps its down owner.
func (p *planner) unplaceable(a *Assignment) {
	if a.Owner == "" {
		p.setAvailability(a, ReasonNotAssigned)
		return
	}
	p.setAvailability(a, ReasonOwnerDown)
}

func (p *planner) decide(d Decision) { p.decisions = append(p.decisions, d) }

// output assembles the next state, in shard order.
func (p *planner) output() Output {
	n := 0
	for _, rp := range p.plans {
		n += len(rp.shards)
	}
	next := make([]Assignment, 0, n)
	for _, rp := range p.plans {
		next = append(next, rp.shards...)
	}
	sort.SliceStable(p.decisions, func(i, j int) bool {
		return p.decisions[i].Shard.less(p.decisions[j].Shard)
	})
	return Output{Next: State{Assignments: next, LastGeneration: p.last}, Decisions: p.decisions}
}

// cloneAssignment copies a so the output shares no slice with the input.
func cloneAssignment(a *Assignment) Assignment {
	c := *a
	c.Replicas = slices.Clone(a.Replicas)
	return c
}
