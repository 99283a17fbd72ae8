package core

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/wire"
)

// Consumer groups on one durable shard (queue semantics).
//
// A group hands each record of the shard to one consumer at a time and
// takes it back unless it is acknowledged within its visibility. Per
// group:
//
//   - the cursor: every offset below it is finished (acknowledged,
//     dead-lettered, or not a record); it advances only over a contiguous
//     run of finished offsets, and is persisted (group_store.go);
//   - entries, the leader's memory of the offsets at or past the cursor
//     it handed out: claimed (with a deadline), owed (nacked, lapsed or
//     delayed, with the time it is owed from) or done (finished above an
//     unfinished one);
//   - next, the first offset this state never handed out; offsets in
//     [next, graceEnd) may still be finished by an ack for a claim made
//     before this state existed (a broker restart), graceEnd being the
//     shard's tail when the state was made;
//   - the dead letters (pointers, persisted) and the redriven offsets
//     (dead letters put back in play, persisted while below the cursor).
//
// Every method is synchronous and takes the table's one mutex; reading
// payloads from the log happens outside it (Poll claims first, reads
// after, and finishes or releases what it could not read).

// GroupConfig tunes consumer groups. Zero fields take the defaults.
type GroupConfig struct {
	// Visibility is how long a claim stands when a poll names none
	// (FELIX_GROUP_VISIBILITY_TIMEOUT_MS, default 30 s).
	Visibility time.Duration
	// MaxVisibility caps every visibility, extension and nack delay
	// (FELIX_GROUP_MAX_VISIBILITY_MS, default 12 h).
	MaxVisibility time.Duration
	// MaxInFlight caps the claims (and delayed nacks) one group holds
	// (FELIX_GROUP_MAX_IN_FLIGHT, default 1000).
	MaxInFlight int
	// MaxAttempts is how many deliveries a record gets before it is
	// dead-lettered (FELIX_GROUP_MAX_ATTEMPTS, default 5).
	MaxAttempts int
	// MaxGroups caps the groups one shard serves (default 1024); a poll
	// or seek that would create one more is refused overloaded.
	MaxGroups int
	// MaxDeadLetters caps one group's dead letters
	// (FELIX_GROUP_MAX_DEAD_LETTERS, default 10,000): one more discards
	// the lowest-offset dead letter, counted in
	// felix_group_dead_letters_dropped_total and logged.
	MaxDeadLetters int
	// IdleEvict is how long a group with no claim standing and nothing
	// owed stays in memory after its last request
	// (FELIX_GROUP_IDLE_EVICT_MS, default 10 minutes); its cursor and dead
	// letters stay in the state file and the next request reloads them.
	IdleEvict time.Duration
	// Now is the clock (tests inject one); nil is time.Now.
	Now func() time.Time
}

// Group defaults.
const (
	DefaultGroupVisibility     = 30 * time.Second
	DefaultGroupMaxVisibility  = 12 * time.Hour
	DefaultGroupMaxInFlight    = 1000
	DefaultGroupMaxAttempts    = 5
	DefaultGroupMaxGroups      = 1024
	DefaultGroupMaxDeadLetters = 10_000
	DefaultGroupIdleEvict      = 10 * time.Minute
	// groupEntriesPerInFlight bounds a group's remembered entries (claims,
	// owed and finished-above-the-cursor) at this many times MaxInFlight;
	// past it a poll hands out nothing new until the cursor moves.
	groupEntriesPerInFlight = 16
)

func (c GroupConfig) withDefaults() GroupConfig {
	if c.Visibility <= 0 {
		c.Visibility = DefaultGroupVisibility
	}
	if c.MaxVisibility <= 0 {
		c.MaxVisibility = DefaultGroupMaxVisibility
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultGroupMaxInFlight
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultGroupMaxAttempts
	}
	if c.MaxGroups <= 0 {
		c.MaxGroups = DefaultGroupMaxGroups
	}
	if c.MaxDeadLetters <= 0 {
		c.MaxDeadLetters = DefaultGroupMaxDeadLetters
	}
	if c.IdleEvict <= 0 {
		c.IdleEvict = DefaultGroupIdleEvict
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

type entryState uint8

const (
	entryClaimed entryState = iota
	entryOwed
	entryDone
)

// groupEntry is what the leader remembers of one offset.
type groupEntry struct {
	state    entryState
	attempts uint32
	// at is the claim's deadline (claimed) or when the record is owed
	// from (owed).
	at time.Time
}

// groupState is one group's state. Guarded by Groups.mu.
type groupState struct {
	// Invariant: cursor <= next; every offset in [cursor, next) has an
	// entry; no entry below cursor except redriven ones.
	cursor   uint64
	next     uint64
	graceEnd uint64
	entries  map[uint64]*groupEntry
	dead     map[uint64]struct{}
	redriven map[uint64]struct{}
	// used is when a request last named the group (for IdleEvict).
	used time.Time
}

// Groups is a durable shard's consumer groups.
type Groups struct {
	sh  *Shard
	cfg GroupConfig

	// waitC is closed (and cleared) whenever something a waiting poll
	// could take may have appeared: the shard's tail advanced, a record
	// was handed back, a group moved. Lock-free so the publish path can
	// signal it.
	waitC atomic.Pointer[chan struct{}]

	mu sync.Mutex
	// file is the state file; nil once closed. Guarded by mu.
	file *groupFile
	// saved mirrors what the file holds, for its rewrites. Guarded by mu.
	saved map[string]*persisted
	// groups are the groups held in memory, loaded or made: a subset of
	// saved's (an idle group is dropped, and reloaded from saved by the
	// next request naming it). Guarded by mu.
	groups map[string]*groupState
	// nextSweep is when the next request may look for idle groups to
	// drop (evictIdle). Guarded by mu.
	nextSweep time.Time
	// ver is the version of saved: the shard's generation and a count of
	// the changes made at it (group_repl.go). Guarded by mu.
	ver GroupVersion
}

// GroupRecord is one record a poll hands out.
type GroupRecord struct {
	Offset     uint64
	Payload    []byte
	Attempts   uint32
	TimeMicros uint64
	Publisher  string
}

// GroupInfo describes a group on a shard.
type GroupInfo struct {
	Committed   *uint64 // nil for a group with no cursor
	Tail        uint64
	InFlight    int
	Owed        int
	DeadLetters int
}

// GroupStart is where a seek moves a group: Earliest, Latest, or Offset.
type GroupStart struct {
	Earliest, Latest bool
	Offset           uint64
}

func openGroups(sh *Shard, dir string, fsync bool) (*Groups, error) {
	f, saved, ver, err := openGroupFile(dir, fsync)
	if err != nil {
		return nil, err
	}
	if gen := sh.generation.Load(); gen > ver.Generation {
		// A state another leader made (a failover or a handoff): this
		// leader's changes count from its own generation.
		ver = GroupVersion{Generation: gen}
	}
	g := &Groups{sh: sh, cfg: sh.stream.cfg.Groups.withDefaults(), file: f, saved: saved, groups: map[string]*groupState{}, ver: ver}
	defer sh.metrics().groups.add(g)
	tail := sh.nextPub.Load()
	var clamp []groupOp
	for name, p := range saved {
		if p.cursor > tail {
			// A copy taken over may end before what an earlier leader's
			// cursor passed (records a Leader-consistency shard lost): a
			// cursor past the log would skip the records written there.
			c := tail
			clamp = append(clamp, groupOp{G: name, Cursor: &c})
			for o := range p.dead {
				if o >= tail {
					clamp = append(clamp, groupOp{G: name, Discard: &o})
				}
			}
		}
	}
	if len(clamp) > 0 {
		if err := g.persist(clamp...); err != nil {
			f.close()
			return nil, err
		}
	}
	now := g.cfg.Now()
	for name, p := range saved {
		g.groups[name] = stateFromSaved(p, tail, now)
	}
	return g, nil
}

// stateFromSaved makes a group's state from what the state file holds,
// tail being the shard's tail now: the new state takes an ack for a claim
// made before it below that tail (a restart, a takeover, or a reload after
// the group was dropped idle).
func stateFromSaved(p *persisted, tail uint64, now time.Time) *groupState {
	st := &groupState{cursor: p.cursor, next: p.cursor, graceEnd: max(tail, p.cursor),
		entries: map[uint64]*groupEntry{}, dead: copySet(p.dead), redriven: copySet(p.redriven), used: now}
	for o := range st.redriven {
		if o >= st.cursor {
			delete(st.redriven, o) // it comes round by itself
			continue
		}
		st.entries[o] = &groupEntry{state: entryOwed}
	}
	for o := range st.dead {
		if o >= st.cursor {
			st.entries[o] = &groupEntry{state: entryDone} // finished above the cursor
		}
	}
	return st
}

// loaded returns group's state, reloading it from the state file when it
// was dropped idle, and marks it used; nil for a group with no state. It
// first drops the groups idle for IdleEvict, at most every quarter of it.
// Caller holds mu.
func (g *Groups) loaded(group string) *groupState {
	now := g.cfg.Now()
	g.evictIdle(now)
	st := g.groups[group]
	if st == nil {
		p := g.saved[group]
		if p == nil {
			return nil
		}
		st = stateFromSaved(p, g.sh.nextPub.Load(), now)
		g.groups[group] = st
	}
	st.used = now
	return st
}

// evictIdle drops from memory the groups no request named for IdleEvict
// that hold no claim and owe nothing (every entry left is a dead letter
// above the cursor, which a reload makes again), at most once per quarter
// of IdleEvict: requests drive it, so there is no timer per group. Caller
// holds mu.
func (g *Groups) evictIdle(now time.Time) {
	if now.Before(g.nextSweep) {
		return
	}
	g.nextSweep = now.Add(g.cfg.IdleEvict / 4)
	for name, st := range g.groups {
		if now.Sub(st.used) >= g.cfg.IdleEvict && st.idle() {
			delete(g.groups, name)
		}
	}
}

// idle reports whether st holds nothing but what the state file holds:
// no claim, nothing owed, nothing finished above the cursor but dead
// letters.
func (st *groupState) idle() bool {
	for o, e := range st.entries {
		if e.state != entryDone {
			return false
		}
		if _, ok := st.dead[o]; !ok {
			return false
		}
	}
	return true
}

// inMemory counts the groups held in memory, dropping the idle ones
// first (so a scrape drives eviction on a shard no request reaches).
func (g *Groups) inMemory() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.evictIdle(g.cfg.Now())
	return len(g.groups)
}

func copySet(m map[uint64]struct{}) map[uint64]struct{} {
	out := make(map[uint64]struct{}, len(m))
	for k := range m {
		out[k] = struct{}{}
	}
	return out
}

// close closes the state file; later calls fail.
func (g *Groups) close() {
	g.sh.metrics().groups.remove(g)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.file != nil {
		g.file.close()
		g.file = nil
	}
	g.notify()
}

// WaitC returns a channel closed when a poll that found nothing may find
// something. Take it before polling, then wait on it.
func (g *Groups) WaitC() <-chan struct{} {
	for {
		if p := g.waitC.Load(); p != nil {
			return *p
		}
		c := make(chan struct{})
		if g.waitC.CompareAndSwap(nil, &c) {
			return c
		}
	}
}

// notify wakes every waiting poll.
func (g *Groups) notify() {
	if p := g.waitC.Swap(nil); p != nil {
		close(*p)
	}
}

// NextLapse returns when the group's next claim lapses or delay ends
// after now, or the zero time when none is pending. (A record already
// owed but held back by the in-flight cap needs no timer: the ack or nack
// that frees a place wakes WaitC.)
func (g *Groups) NextLapse(group string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.groups[group]
	if st == nil {
		return time.Time{}
	}
	now := g.cfg.Now()
	var next time.Time
	for _, e := range st.entries {
		if e.state != entryDone && e.at.After(now) && (next.IsZero() || e.at.Before(next)) {
			next = e.at
		}
	}
	return next
}

// persist writes ops to the state file and folds them into saved.
func (g *Groups) persist(ops ...groupOp) error {
	if g.file == nil {
		return g.sh.errClosed()
	}
	next := g.ver
	next.Seq++
	if err := g.file.write(append(ops, next.op())...); err != nil {
		return g.sh.errUnavailable(err)
	}
	g.ver = next
	for _, op := range ops {
		applyGroupOp(g.saved, op)
	}
	if r, ok := g.sh.repl.(GroupsReplication); ok {
		r.GroupsChanged()
	}
	if g.file.wantsCompaction() {
		if err := g.file.rewrite(g.saved, g.ver); err != nil {
			g.sh.stream.cfg.Storage.logger().Warn("rewriting a group state file", "path", g.file.path, "err", err)
		}
	}
	return nil
}

// state returns group's state; with create, a missing group is made at
// the shard's oldest record and persisted.
func (g *Groups) state(group string, create bool) (*groupState, error) {
	if st := g.loaded(group); st != nil {
		return st, nil
	}
	if !create {
		return nil, errNoGroup(group)
	}
	if len(g.saved) >= g.cfg.MaxGroups {
		return nil, wire.NewError(wire.CodeOverloaded, "shard %d serves %d consumer groups, its limit; delete one before making %q", g.sh.index, g.cfg.MaxGroups, group).
			WithDetail(wire.DetailReason, "group_limit")
	}
	start := g.sh.StartOffset()
	if err := g.persist(groupOp{G: group, Cursor: &start}); err != nil {
		return nil, err
	}
	st := newGroupState(start, g.cfg.Now())
	g.groups[group] = st
	return st, nil
}

func newGroupState(cursor uint64, now time.Time) *groupState {
	return &groupState{cursor: cursor, next: cursor, graceEnd: cursor, entries: map[uint64]*groupEntry{},
		dead: map[uint64]struct{}{}, redriven: map[uint64]struct{}{}, used: now}
}

func errNoGroup(group string) *wire.Error {
	return wire.NewError(wire.CodeNotFound, "consumer group %q has no state on this shard", group).WithDetail(wire.DetailReason, "no_group")
}

func errStaleClaim(group string, offset uint64, why string) *wire.Error {
	return wire.NewError(wire.CodeStaleClaim, "group %q: the claim on offset %d no longer stands (%s); nothing was applied and the record comes round again", group, offset, why).
		WithDetail("offset", offset)
}

func errFinished(group string, offset uint64) *wire.Error {
	return wire.NewError(wire.CodeInvalidRequest, "group %q: offset %d is already finished", group, offset).
		WithDetail(wire.DetailReason, "already_finished")
}

// advance moves the cursor over finished offsets and persists it.
func (g *Groups) advance(group string, st *groupState) error {
	old := st.cursor
	for st.cursor < st.next {
		e := st.entries[st.cursor]
		if e == nil || e.state != entryDone {
			break
		}
		delete(st.entries, st.cursor)
		st.cursor++
	}
	for st.cursor == st.next && st.cursor < st.graceEnd {
		// Finished by acks from before this state, not handed out since.
		e := st.entries[st.cursor]
		if e == nil || e.state != entryDone {
			break
		}
		delete(st.entries, st.cursor)
		st.cursor++
		st.next++
	}
	if st.cursor == old {
		return nil
	}
	c := st.cursor
	return g.persist(groupOp{G: group, Cursor: &c})
}

// inFlight counts claims standing at now and delays not yet over.
func (st *groupState) inFlight(now time.Time) (inFlight, owed int) {
	for _, e := range st.entries {
		switch {
		case e.state == entryClaimed && e.at.After(now):
			inFlight++
		case e.state == entryClaimed, e.state == entryOwed && !e.at.After(now):
			owed++
		case e.state == entryOwed:
			inFlight++ // a delayed nack holds its place
			owed++
		}
	}
	return inFlight, owed
}

// finished reports whether offset is finished for st.
func (st *groupState) finished(offset uint64) bool {
	if e := st.entries[offset]; e != nil {
		return e.state == entryDone
	}
	return offset < st.cursor
}

// cap bounds a duration by the maximum visibility.
func (g *Groups) cap(d time.Duration) time.Duration {
	return min(d, g.cfg.MaxVisibility)
}

// Visibility returns the visibility a poll asking for d gets (0: the
// default).
func (g *Groups) Visibility(d time.Duration) time.Duration {
	if d <= 0 {
		d = g.cfg.Visibility
	}
	return g.cap(d)
}

// claim is one offset a poll took, before its payload was read.
type claim struct {
	offset   uint64
	attempts uint32
}

// takeClaims claims up to maxRecords offsets for a poll: owed ones
// first, then new ones from the log. Caller holds mu.
func (g *Groups) takeClaims(group string, st *groupState, maxRecords int, vis time.Duration) ([]claim, error) {
	now := g.cfg.Now()
	m := g.sh.metrics()
	g.dropRetained(group, st)
	inFlight, _ := st.inFlight(now)
	n := min(maxRecords, g.cfg.MaxInFlight-inFlight)
	if n <= 0 {
		return nil, nil
	}
	deadline := now.Add(vis)
	var out []claim
	for _, o := range st.owedNow(now) {
		if len(out) == n {
			break
		}
		e := st.entries[o]
		if int(e.attempts) >= g.cfg.MaxAttempts {
			if err := g.deadLetter(group, st, o, e); err != nil {
				return out, err
			}
			continue
		}
		e.state, e.attempts, e.at = entryClaimed, e.attempts+1, deadline
		if e.attempts > 1 {
			m.groupRedeliveries.Inc()
		}
		out = append(out, claim{o, e.attempts})
	}
	tail := g.sh.nextPub.Load()
	room := g.cfg.MaxInFlight*groupEntriesPerInFlight - len(st.entries)
	for len(out) < n && st.next < tail && room > 0 {
		o := st.next
		st.next++
		if e := st.entries[o]; e != nil {
			continue // finished by an ack from before this state
		}
		st.entries[o] = &groupEntry{state: entryClaimed, attempts: 1, at: deadline}
		out = append(out, claim{o, 1})
		room--
	}
	return out, g.advance(group, st)
}

// owedNow returns the owed offsets due at now, lapsed claims included, in
// offset order.
func (st *groupState) owedNow(now time.Time) []uint64 {
	var out []uint64
	for o, e := range st.entries {
		if e.state != entryDone && !e.at.After(now) {
			e.state = entryOwed
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}

// dropRetained moves the cursor past what retention removed. Caller holds
// mu.
func (g *Groups) dropRetained(group string, st *groupState) {
	start := g.sh.StartOffset()
	if st.cursor >= start {
		return
	}
	for o := range st.entries {
		if o < start {
			delete(st.entries, o)
			delete(st.redriven, o)
		}
	}
	st.cursor, st.next, st.graceEnd = start, max(st.next, start), max(st.graceEnd, start)
	c := st.cursor
	if err := g.persist(groupOp{G: group, Cursor: &c}); err != nil {
		g.sh.stream.cfg.Storage.logger().Warn("persisting a group cursor past retention", "group", group, "err", err)
	}
}

// deadLetter lists offset as a dead letter and finishes it. Caller holds
// mu.
//
// Past MaxDeadLetters the lowest-offset dead letters are discarded to make
// room (as group_discard would: the record stays finished and in the log),
// counted and logged, so the queue keeps moving and memory stays bounded.
func (g *Groups) deadLetter(group string, st *groupState, offset uint64, e *groupEntry) error {
	var drop []uint64
	if n := len(st.dead) + 1 - g.cfg.MaxDeadLetters; n > 0 {
		drop = lowestOffsets(st.dead, n)
	}
	ops := make([]groupOp, 0, len(drop)+1)
	for _, d := range drop {
		ops = append(ops, groupOp{G: group, Discard: &d})
	}
	o := offset
	ops = append(ops, groupOp{G: group, Dead: &o})
	if err := g.persist(ops...); err != nil {
		return err
	}
	m := g.sh.metrics()
	m.groupDeadLetters.Inc()
	if len(drop) > 0 {
		for _, d := range drop {
			delete(st.dead, d)
			if d >= st.cursor {
				// Still finished above the cursor, now as a plain done entry.
				if de := st.entries[d]; de != nil {
					de.state = entryDone
				}
			}
		}
		m.groupDeadLettersDropped.Add(len(drop))
		g.sh.stream.cfg.Storage.logger().Warn("a consumer group reached its dead-letter limit: the oldest dead letters were discarded (their records stay in the log)",
			"stream", g.sh.stream.key.Stream, "shard", g.sh.index, "group", group, "limit", g.cfg.MaxDeadLetters,
			"discarded", len(drop), "first", drop[0], "dead_lettered", offset)
	}
	st.dead[offset] = struct{}{}
	g.finish(st, offset, e)
	return g.advance(group, st)
}

// lowestOffsets returns the n lowest offsets of set, in order.
func lowestOffsets(set map[uint64]struct{}, n int) []uint64 {
	if n == 1 {
		first := true
		var lo uint64
		for o := range set {
			if first || o < lo {
				lo, first = o, false
			}
		}
		if first {
			return nil
		}
		return []uint64{lo}
	}
	all := sortedOffsets(set)
	return all[:min(n, len(all))]
}

// finish marks offset done (dropping it when below the cursor). Caller
// holds mu.
func (g *Groups) finish(st *groupState, offset uint64, e *groupEntry) {
	if offset < st.cursor {
		delete(st.entries, offset)
		return
	}
	if e == nil {
		e = &groupEntry{}
		st.entries[offset] = e
	}
	e.state = entryDone
}

// inFlight sums the claims standing and delayed nacks of every group.
func (g *Groups) inFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	now, n := g.cfg.Now(), 0
	for _, st := range g.groups {
		k, _ := st.inFlight(now)
		n += k
	}
	return n
}

// groupsMetrics tracks the open Groups for felix_group_in_flight.
type groupsMetrics struct {
	mu   sync.Mutex
	open map[*Groups]struct{} // guarded by mu
}

func (m *groupsMetrics) register(s *metrics.Set) {
	m.open = map[*Groups]struct{}{}
	s.NewGauge("felix_groups_in_memory", func() float64 {
		total := 0
		for _, g := range m.snapshot() {
			total += g.inMemory()
		}
		return float64(total)
	})
	s.NewGauge("felix_group_in_flight", func() float64 {
		m.mu.Lock()
		open := make([]*Groups, 0, len(m.open))
		for g := range m.open {
			open = append(open, g)
		}
		m.mu.Unlock()
		total := 0
		for _, g := range open {
			total += g.inFlight()
		}
		return float64(total)
	})
}

// snapshot returns the open Groups.
func (m *groupsMetrics) snapshot() []*Groups {
	m.mu.Lock()
	defer m.mu.Unlock()
	open := make([]*Groups, 0, len(m.open))
	for g := range m.open {
		open = append(open, g)
	}
	return open
}

func (m *groupsMetrics) add(g *Groups) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.open[g] = struct{}{}
}

func (m *groupsMetrics) remove(g *Groups) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.open, g)
}
