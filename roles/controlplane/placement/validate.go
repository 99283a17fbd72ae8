package placement

import (
	"fmt"
	"strings"
)

// InputError is Compute's refusal of an input it cannot place from: a
// registry or catalog the caller built wrong, or a state whose invariants
// are broken. It lists every problem found (up to maxProblems).
type InputError struct {
	Problems []string
}

// maxProblems bounds InputError.Problems; further problems are counted.
const maxProblems = 20

func (e *InputError) Error() string {
	return "placement: bad input: " + strings.Join(e.Problems, "; ")
}

// problems collects an InputError's entries, keeping at most maxProblems.
type problems struct {
	list    []string
	dropped int
}

func (p *problems) add(format string, args ...any) {
	if len(p.list) == maxProblems {
		p.dropped++
		return
	}
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	if p.dropped > 0 {
		p.list = append(p.list, fmt.Sprintf("and %d more", p.dropped))
	}
	return &InputError{Problems: p.list}
}

// validate checks in and reports every problem at once.
func validate(in *Input) error {
	var p problems
	validateBrokers(&p, in.Brokers)
	validateResources(&p, in.Resources)
	validateState(&p, &in.Current)
	validateReports(&p, in.Reports)
	if in.NowMs < 0 || in.RestoreAfterMs < 0 {
		p.add("clock reading %d ms or restore delay %d ms is negative", in.NowMs, in.RestoreAfterMs)
	}
	return p.err()
}

func validateBrokers(p *problems, brokers []Broker) {
	seen := make(map[string]bool, len(brokers))
	for i, b := range brokers {
		switch {
		case b.NodeID == "":
			p.add("broker %d has an empty node id", i)
		case seen[b.NodeID]:
			p.add("broker %q is listed twice", b.NodeID)
		}
		seen[b.NodeID] = true
		if b.State != Live && b.State != Draining && b.State != Down {
			p.add("broker %q has state %q (want live, draining or down)", b.NodeID, b.State)
		}
		if b.DownSinceMs < 0 {
			p.add("broker %q is down since %d ms (negative)", b.NodeID, b.DownSinceMs)
		}
	}
}

func validateResources(p *problems, resources []Resource) {
	seen := make(map[ResourceKey]bool, len(resources))
	for _, r := range resources {
		k := r.Key
		if k.Kind != KindStream && k.Kind != KindCache {
			p.add("resource %s has kind %q (want stream or cache)", k, k.Kind)
		}
		if k.Name == "" {
			p.add("resource %s has an empty name", k)
		}
		if seen[k] {
			p.add("resource %s is listed twice", k)
		}
		seen[k] = true
		if r.Shards > MaxShards {
			p.add("resource %s has %d shards (at most %d)", k, r.Shards, MaxShards)
		}
	}
}

func validateState(p *problems, st *State) {
	seen := make(map[ShardRef]bool, len(st.Assignments))
	for _, a := range st.Assignments {
		if seen[a.Shard] {
			p.add("shard %s/%d has two assignments", a.Shard.Resource, a.Shard.Shard)
		}
		seen[a.Shard] = true
		if a.Generation > st.LastGeneration {
			p.add("shard %s/%d has generation %d above the last generation %d",
				a.Shard.Resource, a.Shard.Shard, a.Generation, st.LastGeneration)
		}
		if a.Owner != "" && a.Generation == 0 {
			p.add("shard %s/%d is owned by %q at generation 0", a.Shard.Resource, a.Shard.Shard, a.Owner)
		}
	}
}

func validateReports(p *problems, reports []Report) {
	seen := make(map[reportKey]bool, len(reports))
	for _, r := range reports {
		k := reportKey{r.NodeID, r.StorageID}
		if r.NodeID == "" || r.StorageID == "" {
			p.add("a position report has node id %q and storage id %q (both are required)", r.NodeID, r.StorageID)
		}
		if seen[k] {
			p.add("broker %q has two position reports under storage id %q", r.NodeID, r.StorageID)
		}
		seen[k] = true
	}
}
