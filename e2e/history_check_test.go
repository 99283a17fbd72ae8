// The history checker of issue #18 (clustering part 2): what clients of
// a replicated durable stream saw while faults were injected — every
// publish attempt and what it learnt, every event a subscriber was
// delivered — is checked against each shard's final log, read from its
// leader once the faults healed, and against every node's copy of it on
// disk. The checker is pure: history_check_unit_test.go feeds it bad
// histories and requires it to fail; history_test.go records real ones.
package e2e

import (
	"fmt"
	"sort"
	"time"

	flog "github.com/felixmq/felix/log"
)

// pubResult is what a publish attempt learnt from its answer.
type pubResult int

const (
	// pubAcked: acknowledged at an offset of its shard.
	pubAcked pubResult = iota
	// pubRefused: refused with a retry class that says nothing was
	// written (retry, retry_after, redirect, fatal).
	pubRefused
	// pubUnknown: the outcome is unknown (outcome_unknown, such as
	// quorum_timeout, the call's deadline, a lost connection): the record
	// may be in the log, at most once.
	pubUnknown
)

func (o pubResult) String() string {
	return [...]string{"acked", "refused", "unknown"}[o]
}

// pubAttempt is one publish of a unique payload to one shard.
type pubAttempt struct {
	client  string // who published: "c0", "c1", ... or "probe@node2"
	shard   uint32 // the shard its key routes to
	payload string
	outcome pubResult
	offset  uint64 // the acknowledged offset, when acked
	err     string // the error, when not acked
	start   time.Time
	end     time.Time
}

// delivery is one event a subscriber was delivered.
type delivery struct {
	sub     int // which subscriber (one per shard, or several)
	shard   uint32
	offset  uint64
	payload string
	skipped uint64 // the event's SkippedBefore
}

// logRecord is one record of a shard's final log as its leader serves
// it: data records only (generation starts are never delivered).
type logRecord struct {
	offset  uint64
	payload string
}

// shardCopyOf is one node's copy of one shard's log, read from its disk,
// every kind of record included.
type shardCopyOf struct {
	node    string
	shard   uint32
	leader  bool // the copy of the shard's final leader
	records []storedRecord
}

// history is everything the clients saw and what the cluster ended with.
type history struct {
	attempts   []pubAttempt
	deliveries []delivery
	// final is each shard's log read from its final leader after the
	// faults healed, in offset order.
	final map[uint32][]logRecord
	// copies are the nodes' copies of each shard, the leader's included;
	// none when they could not be read.
	copies []shardCopyOf
}

// slot is an offset of a shard.
type slot struct {
	shard  uint32
	offset uint64
}

func (s slot) String() string { return fmt.Sprintf("shard %d offset %d", s.shard, s.offset) }

// check returns every violation of the invariants the history breaks,
// each naming its invariant and the history excerpt that breaks it; none
// for a good history.
//
//  1. Every acknowledged record is in the final log exactly once, at its
//     acknowledged offset, on its shard.
//  2. No offset holds two different payloads across the whole history:
//     acknowledgements, deliveries and the final log agree (two leaders
//     never acknowledged, or delivered, different records at one offset).
//  3. No aborted read: every delivered record is in the final log at the
//     offset it was delivered at.
//  4. Each subscriber's deliveries of a shard are in offset order, with a
//     gap only where the event's skipped_before says, and the skipped
//     offsets hold no record of the final log.
//  5. A publish whose outcome is unknown is in the final log at most
//     once; a refused one not at all; the final log holds only published
//     payloads, with offsets that increase.
//  6. Every node's copy of a shard is a prefix of (or equal to) its
//     leader's copy, record for record at the same offsets; the leader's
//     copy holds exactly the final log's records, and a generation start
//     at each of its gaps.
func (h *history) check() []string {
	var v []string
	add := func(inv int, format string, args ...any) {
		v = append(v, fmt.Sprintf("invariant %d: ", inv)+fmt.Sprintf(format, args...))
	}
	where := h.finalIndex(add)
	h.checkAttempts(where, add)
	h.checkOneRecordPerOffset(add)
	h.checkDeliveries(add)
	h.checkCopies(add)
	return v
}

// finalIndex indexes the final log by payload (every place it is) and
// checks that its offsets increase.
func (h *history) finalIndex(add func(int, string, ...any)) map[string][]slot {
	where := map[string][]slot{}
	for _, shard := range sortedShards(h.final) {
		recs := h.final[shard]
		for i, r := range recs {
			if i > 0 && r.offset <= recs[i-1].offset {
				add(5, "shard %d's final log has offset %d (%q) after %d", shard, r.offset, r.payload, recs[i-1].offset)
			}
			where[r.payload] = append(where[r.payload], slot{shard, r.offset})
		}
	}
	return where
}

// checkAttempts checks invariants 1 and 5 for every attempt.
func (h *history) checkAttempts(where map[string][]slot, add func(int, string, ...any)) {
	published := map[string]bool{}
	for _, a := range h.attempts {
		published[a.payload] = true
		at := where[a.payload]
		switch a.outcome {
		case pubAcked:
			want := slot{a.shard, a.offset}
			switch {
			case len(at) == 0:
				add(1, "%s's publish %q acknowledged at %v is not in the final log", a.client, a.payload, want)
			case len(at) > 1:
				add(1, "%s's publish %q acknowledged at %v is in the final log %d times, at %v", a.client, a.payload, want, len(at), at)
			case at[0] != want:
				add(1, "%s's publish %q acknowledged at %v is in the final log at %v", a.client, a.payload, want, at[0])
			}
		case pubUnknown:
			if len(at) > 1 {
				add(5, "%s's publish %q (outcome unknown: %s) is in the final log %d times, at %v", a.client, a.payload, a.err, len(at), at)
			}
		case pubRefused:
			if len(at) > 0 {
				add(5, "%s's publish %q was refused (%s) but is in the final log at %v", a.client, a.payload, a.err, at)
			}
		}
	}
	for p, at := range where {
		if !published[p] {
			add(5, "the final log holds %q at %v, which no client published", p, at)
		}
	}
}

// checkOneRecordPerOffset checks invariant 2: acknowledgements,
// deliveries and the final log never name two payloads at one offset.
func (h *history) checkOneRecordPerOffset(add func(int, string, ...any)) {
	type claim struct{ payload, by string }
	claims := map[slot]claim{}
	note := func(s slot, payload, by string) {
		c, ok := claims[s]
		switch {
		case !ok:
			claims[s] = claim{payload, by}
		case c.payload != payload:
			add(2, "%v holds %q by %s and %q by %s", s, c.payload, c.by, payload, by)
		}
	}
	for _, shard := range sortedShards(h.final) {
		for _, r := range h.final[shard] {
			note(slot{shard, r.offset}, r.payload, "the final log")
		}
	}
	for _, a := range h.attempts {
		if a.outcome == pubAcked {
			note(slot{a.shard, a.offset}, a.payload, a.client+"'s acknowledgement")
		}
	}
	for _, d := range h.deliveries {
		note(slot{d.shard, d.offset}, d.payload, fmt.Sprintf("a delivery to subscriber %d", d.sub))
	}
}

// checkDeliveries checks invariants 3 and 4.
func (h *history) checkDeliveries(add func(int, string, ...any)) {
	final := map[slot]string{}
	for shard, recs := range h.final {
		for _, r := range recs {
			final[slot{shard, r.offset}] = r.payload
		}
	}
	type stream struct {
		sub   int
		shard uint32
	}
	next := map[stream]uint64{} // the offset expected after the last delivery
	for _, d := range h.deliveries {
		s := slot{d.shard, d.offset}
		if p, ok := final[s]; !ok || p != d.payload {
			add(3, "subscriber %d was delivered %q at %v; the final log holds %q there (present %v)", d.sub, d.payload, s, p, ok)
		}
		k := stream{d.sub, d.shard}
		want, seen := next[k]
		switch {
		case d.skipped > d.offset:
			add(4, "subscriber %d: %q at %v skipped %d offsets before it", d.sub, d.payload, s, d.skipped)
		case seen && d.offset < want:
			add(4, "subscriber %d was delivered %q at %v after offset %d: out of order", d.sub, d.payload, s, want-1)
		case d.offset-d.skipped != want:
			add(4, "subscriber %d was delivered %q at %v skipping %d offsets, after offset %d: a gap skipped_before does not explain",
				d.sub, d.payload, s, d.skipped, int64(want)-1)
		default:
			for o := want; o < d.offset; o++ {
				if p, ok := final[slot{d.shard, o}]; ok {
					add(4, "subscriber %d skipped %v before %q, which holds %q in the final log", d.sub, slot{d.shard, o}, d.payload, p)
				}
			}
		}
		if !seen || d.offset >= want {
			next[k] = d.offset + 1
		}
	}
}

// checkCopies checks invariant 6 for every shard with copies.
func (h *history) checkCopies(add func(int, string, ...any)) {
	byShard := map[uint32][]shardCopyOf{}
	for _, c := range h.copies {
		byShard[c.shard] = append(byShard[c.shard], c)
	}
	for shard, copies := range byShard {
		var leader *shardCopyOf
		for i := range copies {
			if copies[i].leader {
				leader = &copies[i]
			}
		}
		if leader == nil {
			add(6, "shard %d: no copy of its leader to compare with", shard)
			continue
		}
		h.checkLeaderCopy(shard, leader, add)
		for _, c := range copies {
			if !c.leader {
				if why := notPrefix(c.records, leader.records); why != "" {
					add(6, "shard %d: %s's copy is not a prefix of leader %s's: %s", shard, c.node, leader.node, why)
				}
			}
		}
	}
}

// checkLeaderCopy checks that the leader's copy holds the final log's
// records, and only them, with generation starts in its gaps.
func (h *history) checkLeaderCopy(shard uint32, leader *shardCopyOf, add func(int, string, ...any)) {
	served := map[uint64]string{}
	for _, r := range h.final[shard] {
		served[r.offset] = r.payload
	}
	held := map[uint64]bool{}
	for _, r := range leader.records {
		held[r.Offset] = true
		p, ok := served[r.Offset]
		switch {
		case r.Kind == flog.KindData && !ok:
			add(6, "shard %d: leader %s's copy holds %q at offset %d, which it does not serve", shard, leader.node, r.Payload, r.Offset)
		case r.Kind == flog.KindData && p != r.Payload:
			add(6, "shard %d: leader %s's copy holds %q at offset %d, it serves %q", shard, leader.node, r.Payload, r.Offset, p)
		case r.Kind != flog.KindData && ok:
			add(6, "shard %d: leader %s's copy holds a record of kind %v at offset %d, it serves %q there", shard, leader.node, r.Kind, r.Offset, p)
		case r.Kind != flog.KindData && r.Kind != flog.KindGenerationStart:
			add(6, "shard %d: leader %s's copy holds a record of kind %v at offset %d", shard, leader.node, r.Kind, r.Offset)
		}
	}
	for _, r := range h.final[shard] {
		if !held[r.offset] {
			add(6, "shard %d: leader %s serves %q at offset %d, its copy has no record there", shard, leader.node, r.payload, r.offset)
		}
	}
}

// notPrefix says how c fails to be a prefix of leader, record for record
// at the same offsets, or "".
func notPrefix(c, leader []storedRecord) string {
	if len(c) > len(leader) {
		return fmt.Sprintf("it holds %d records, the leader %d (the first extra: %+v)", len(c), len(leader), c[len(leader)])
	}
	for i := range c {
		if c[i] != leader[i] {
			return fmt.Sprintf("record %d is %+v, the leader's %+v", i, c[i], leader[i])
		}
	}
	return ""
}

func sortedShards(m map[uint32][]logRecord) []uint32 {
	var out []uint32
	for s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
