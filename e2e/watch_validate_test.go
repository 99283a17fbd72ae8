package e2e

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	felix "github.com/felixmq/felix/sdk/felix"
)

// This file checks a cache watch's deliveries against what the writers
// did, in the manner of etcd's robustness validators (tests/robustness/
// validate/watch.go): every watch records what it received, the writers
// record what they wrote, and at the end a history is replayed from both
// and each of etcd's watch guarantees is checked on its own:
//
//   - ordered: a session's change offsets strictly increase, none below
//     where it started, and a resumed session starts where the last ended;
//   - unique: no change offset is delivered twice by one watch, across all
//     of its sessions (current values of a resnapshot are not changes);
//   - atomic: every change is whole (a put carries exactly a value a writer
//     wrote to that key; a delete or expiry none), a current-values start
//     ends with a state item counting exactly what it sent, and two watches
//     never disagree about what one offset was;
//   - reliable: a session that was not resnapshotted delivers every change
//     of the history matching its filter from its start to its end, and the
//     history holds every acknowledged write of each key in write order;
//   - resumable: a session resumed from offset N delivers exactly the
//     history's matching changes from N on, and one that had to resnapshot
//     delivers as current values exactly the history's state at its state
//     offset.

// watchEvent is one change as the history knows it.
type watchEvent struct {
	Offset uint64
	Op     string
	Key    string
	Value  string
}

func (e watchEvent) String() string {
	if e.Op == "put" {
		return fmt.Sprintf("%d put %s=%q", e.Offset, e.Key, e.Value)
	}
	return fmt.Sprintf("%d %s %s", e.Offset, e.Op, e.Key)
}

// watchSession is one cache_watch from its answer to its end.
type watchSession struct {
	Filter felix.CacheWatchFilter
	// From is the WatchFrom offset of a resume; nil for a fresh or
	// retained start.
	From     *uint64
	Retained bool
	// Start is ResumeOffset right after the watch was answered: the first
	// offset it may deliver (for a resnapshot, what the broker answered).
	Start      uint64
	Resnapshot bool
	Items      []felix.CacheWatchItem
	// End is ResumeOffset after the last item read.
	End uint64
}

// watchLog is what one logical watch received over all its sessions
// (each after the first a resume from the previous one's End).
type watchLog struct {
	Name     string
	Sessions []*watchSession
}

// writtenOp is one write a writer made to a key, in the writer's order.
// Acked is false when the write's answer was lost (the broker was killed
// with it in flight): it may or may not have happened.
type writtenOp struct {
	Op    string // "put" or "delete"; a put with a TTL may later expire
	Value string
	Acked bool
}

// writeHistory is what the writers did, per key. Each key has exactly
// one writer, so its order is the key's order.
type writeHistory struct {
	mu    sync.Mutex
	byKey map[string][]writtenOp
}

func newWriteHistory() *writeHistory { return &writeHistory{byKey: map[string][]writtenOp{}} }

func (h *writeHistory) add(key string, op writtenOp) {
	h.mu.Lock()
	h.byKey[key] = append(h.byKey[key], op)
	h.mu.Unlock()
}

func matchesFilter(f felix.CacheWatchFilter, key string) bool {
	if f.Prefix {
		return strings.HasPrefix(key, f.Key)
	}
	return key == f.Key
}

// validateWatches checks every guarantee; it returns one error per
// broken one (at most a few per kind, so a report stays readable). When
// complete is set, the records include a watch that saw every writer's
// key without a resnapshot from before the first write to after the last,
// so the history must hold every acknowledged write.
func validateWatches(records []*watchLog, writes *writeHistory, complete bool) []error {
	v := &watchValidator{counts: map[string]int{}}
	hist := v.buildHistory(records, writes)
	for _, r := range records {
		v.ordered(r)
		v.unique(r)
		v.atomic(r)
		v.reliable(r, hist)
	}
	if complete {
		v.acknowledged(hist, writes)
	}
	return v.errs
}

type watchValidator struct {
	errs   []error
	counts map[string]int
}

// fail records a broken guarantee, at most 5 of each kind.
func (v *watchValidator) fail(kind, format string, args ...any) {
	v.counts[kind]++
	if v.counts[kind] <= 5 {
		v.errs = append(v.errs, fmt.Errorf("broke %s: %s", kind, fmt.Sprintf(format, args...)))
	}
}

// buildHistory merges every change every watch saw, by offset; two
// watches disagreeing about one offset break atomicity (one of them got a
// partial or wrong event).
func (v *watchValidator) buildHistory(records []*watchLog, writes *writeHistory) []watchEvent {
	byOffset := map[uint64]watchEvent{}
	for _, r := range records {
		for _, s := range r.Sessions {
			for _, it := range s.Items {
				if it.Retained || it.StateComplete {
					continue
				}
				e := watchEvent{Offset: it.Offset, Op: it.Op, Key: it.Key, Value: string(it.Value)}
				if old, ok := byOffset[e.Offset]; ok && old != e {
					v.fail("atomic", "offset %d was %v to one watch and %v to %s", e.Offset, old, e, r.Name)
					continue
				}
				byOffset[e.Offset] = e
			}
		}
	}
	hist := make([]watchEvent, 0, len(byOffset))
	for _, e := range byOffset {
		hist = append(hist, e)
	}
	slices.SortFunc(hist, func(a, b watchEvent) int { return cmp.Compare(a.Offset, b.Offset) })
	return hist
}

func (v *watchValidator) ordered(r *watchLog) {
	for i, s := range r.Sessions {
		if i > 0 && s.From != nil && *s.From != r.Sessions[i-1].End {
			v.fail("resumable", "%s session %d resumed from %d, but the one before ended at %d", r.Name, i, *s.From, r.Sessions[i-1].End)
		}
		low, last, state := s.Start, uint64(0), false
		for _, it := range s.Items {
			switch {
			case it.Retained:
				if state {
					v.fail("ordered", "%s session %d: current value %v after the state item", r.Name, i, it)
				}
			case it.StateComplete:
				state, low = true, it.Offset
			default:
				if it.Offset < low || (last != 0 && it.Offset <= last) {
					v.fail("ordered", "%s session %d: change at %d after %d (start %d)", r.Name, i, it.Offset, last, low)
				}
				last = it.Offset
			}
		}
	}
}

func (v *watchValidator) unique(r *watchLog) {
	seen := map[uint64]int{}
	for i, s := range r.Sessions {
		for _, it := range s.Items {
			if it.Retained || it.StateComplete {
				continue
			}
			if j, ok := seen[it.Offset]; ok {
				v.fail("unique", "%s: change at %d delivered in session %d and again in session %d", r.Name, it.Offset, j, i)
			}
			seen[it.Offset] = i
		}
	}
}

func (v *watchValidator) atomic(r *watchLog) {
	for i, s := range r.Sessions {
		sent := uint64(0)
		for _, it := range s.Items {
			switch {
			case it.StateComplete:
				if it.Count != sent {
					v.fail("atomic", "%s session %d: state item counts %d values, %d were sent", r.Name, i, it.Count, sent)
				}
				sent = 0
				continue
			case it.Retained:
				sent++
			}
			if !matchesFilter(s.Filter, it.Key) {
				v.fail("atomic", "%s session %d: %v does not match the filter %+v", r.Name, i, it, s.Filter)
			}
			switch it.Op {
			case "put":
				if it.Value == nil {
					v.fail("atomic", "%s session %d: put without a value at %d", r.Name, i, it.Offset)
				}
			case "delete", "expire":
				if it.Value != nil {
					v.fail("atomic", "%s session %d: %s with a value at %d", r.Name, i, it.Op, it.Offset)
				}
			default:
				v.fail("atomic", "%s session %d: unknown op %q at %d", r.Name, i, it.Op, it.Offset)
			}
		}
		if (s.Retained || s.Resnapshot) && !hasState(s.Items) && len(s.Items) > 0 {
			v.fail("atomic", "%s session %d: current values without the state item that ends them", r.Name, i)
		}
	}
}

func hasState(items []felix.CacheWatchItem) bool {
	return slices.ContainsFunc(items, func(it felix.CacheWatchItem) bool { return it.StateComplete })
}

// reliable checks each session against the history: from its start (or
// its state offset) to its end, exactly the matching changes; and the
// current values of a retained start or resnapshot are the history's state
// at the state offset.
func (v *watchValidator) reliable(r *watchLog, hist []watchEvent) {
	for i, s := range r.Sessions {
		from, changes, values, stateAt := s.Start, []watchEvent{}, map[string]watchEvent{}, uint64(0)
		haveState := false
		for _, it := range s.Items {
			switch {
			case it.Retained:
				values[it.Key] = watchEvent{Offset: it.Offset, Op: "put", Key: it.Key, Value: string(it.Value)}
			case it.StateComplete:
				haveState, stateAt, from = true, it.Offset, it.Offset
			default:
				changes = append(changes, watchEvent{Offset: it.Offset, Op: it.Op, Key: it.Key, Value: string(it.Value)})
			}
		}
		if (s.Retained || s.Resnapshot) && !haveState {
			continue // ended before its values did: nothing to compare
		}
		if haveState {
			v.stateMatches(r.Name, i, s.Filter, stateAt, values, hist)
		}
		kind := "reliable"
		if s.From != nil && !s.Resnapshot {
			kind = "resumable"
		}
		var want []watchEvent
		for _, e := range hist {
			if e.Offset >= from && e.Offset < s.End && matchesFilter(s.Filter, e.Key) {
				want = append(want, e)
			}
		}
		if !slices.Equal(changes, want) {
			v.fail(kind, "%s session %d [%d, %d): got %d changes, the history has %d: %s", r.Name, i, from, s.End, len(changes), len(want), firstDifference(changes, want))
		}
	}
}

// stateMatches checks current values against the history's state just
// before offset at: each matching key's last put (by its offset, the
// value's version) unless a delete or expiry followed it.
func (v *watchValidator) stateMatches(name string, session int, f felix.CacheWatchFilter, at uint64, values map[string]watchEvent, hist []watchEvent) {
	want := map[string]watchEvent{}
	for _, e := range hist {
		if e.Offset >= at || !matchesFilter(f, e.Key) {
			continue
		}
		if e.Op == "put" {
			want[e.Key] = e
		} else {
			delete(want, e.Key)
		}
	}
	for k, e := range want {
		if got, ok := values[k]; !ok || got != e {
			v.fail("resumable", "%s session %d: state at %d should hold %v, got %v (present %v)", name, session, at, e, got, ok)
		}
	}
	for k, got := range values {
		if _, ok := want[k]; !ok {
			v.fail("resumable", "%s session %d: state at %d holds %v, which the history had removed or never wrote", name, session, at, got)
		}
	}
}

// acknowledged checks the history against the writers: per key, its puts
// and deletes are the writer's writes in order, every acknowledged one
// present and each one whose answer was lost present or not; expiries
// may fall anywhere after a put. A put's value is one the writer wrote to
// that key.
func (v *watchValidator) acknowledged(hist []watchEvent, writes *writeHistory) {
	writes.mu.Lock()
	defer writes.mu.Unlock()
	byKey := map[string][]watchEvent{}
	for _, e := range hist {
		if e.Op != "expire" {
			byKey[e.Key] = append(byKey[e.Key], e)
		}
	}
	for key, ops := range writes.byKey {
		got := byKey[key]
		j, missing := 0, false
		for _, w := range ops {
			if j < len(got) && got[j].Op == w.Op && (w.Op != "put" || got[j].Value == w.Value) {
				j++
				continue
			}
			if w.Acked {
				next := "nothing"
				if j < len(got) {
					next = got[j].String()
				}
				v.fail("reliable", "key %s: acknowledged %s %q is not in the history (next there: %s)", key, w.Op, w.Value, next)
				missing = true
				break
			}
		}
		if j < len(got) && !missing {
			v.fail("atomic", "key %s: the history has %v, which its writer never wrote (or not in that order)", key, got[j])
		}
		delete(byKey, key)
	}
	for key, got := range byKey {
		v.fail("atomic", "key %s: the history has %v but no writer wrote the key", key, got[0])
	}
}

// firstDifference describes where two event lists part.
func firstDifference(got, want []watchEvent) string {
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			return fmt.Sprintf("missing %v", want[i])
		case i >= len(want):
			return fmt.Sprintf("extra %v", got[i])
		case got[i] != want[i]:
			return fmt.Sprintf("at %d got %v, the history has %v", i, got[i], want[i])
		}
	}
	return "equal"
}
