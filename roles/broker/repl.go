package broker

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/internal/metricdoc"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// Replication of durable stream shards (issue #18). The control plane
// names each durable shard's leader (the assignment's owner) and its
// followers (ShardAssignment.Replicas). The leader ships its log to each
// follower over the peer link (repl_ship.go): one shipper per follower
// reads what the log holds past the follower's position and sends it in
// repl_append calls, up to shipWindow of them in flight; the follower writes the records at the leader's
// offsets into its own copy of the shard's log under its own fsync policy
// (core.Replica, repl_follow.go) and answers with how far it holds them.
// One mechanism serves steady state and catch-up: a follower that was
// away is sent everything from its position on.
//
// On a shard of consistency "quorum" the leader's shard waits for a
// majority of the replica set, itself included, to hold a batch before it
// delivers or acknowledges it (shardRepl.WaitCommitted, through
// core.Replication); a publish that does not get there within
// Config.QuorumTimeout is answered quorum_timeout (outcome unknown) and
// delivered later if a majority comes back. Retention keeps everything a
// majority may still lack, on the leader and the followers.
//
// Every heartbeat reports how far this broker holds each replicated copy
// it leads or follows (repl_positions.go): the control plane promotes a
// leader-consistency shard's follower only if it held the leader's last
// reported log. A new leader takes the shard over first (repl_recover.go).
//
// Not yet: replicated caches.

// replication is the broker's replication state.
type replication struct {
	s *Server

	mu sync.Mutex
	// leading holds the replication of every durable shard this broker
	// leads, by shard, made when the shard opens or the view names it.
	leading map[shardRef]*shardRepl
	// following is the replicas this broker holds, by shard, so that a
	// view that no longer names it closes them.
	following map[shardRef]uint64 // → generation of the leader that last shipped
	// recov is the takeovers of shards under way (repl_recover.go).
	recov recoveries
	// heard is, per Quorum shard this broker follows, when its leader
	// was last heard from (repl_suspect.go); suspectAfter is
	// FELIX_LEADER_SUSPECT_AFTER_MS, and soonC asks the heartbeat task
	// for a heartbeat now.
	heard        map[shardRef]heard
	suspectAfter time.Duration
	soonC        chan struct{}

	shippedRecords   *metrics.Counter
	shippedBytes     *metrics.Counter
	shipFailures     *metrics.Counter
	appliedRecords   *metrics.Counter
	quorumTimeouts   *metrics.Counter
	suspectsReported *metrics.Counter
	followersHalted  atomic.Int64
	followersTotal   atomic.Int64
	// shipHook, when set (tests), runs before each repl_append a shipper
	// of this broker makes, with the follower, the first offset and the
	// number of records; an error it returns is the call's outcome
	// (nothing is sent).
	shipHook atomic.Pointer[func(ctx context.Context, node string, from uint64, records int) error]
	// shipRecords, when positive (tests), is what one repl_append of
	// this broker's shippers carries at most instead of shipMaxRecords, so
	// that a short log is shipped in several calls.
	shipRecords   atomic.Int64
	maxLagRecords atomic.Int64
	lagMu         sync.Mutex
}

var replicationHelp = map[string]string{
	"felix_replication_shipped_records_total":   "Records this broker shipped to the followers of the shards it leads.",
	"felix_replication_shipped_bytes_total":     "Payload bytes this broker shipped to the followers of the shards it leads.",
	"felix_replication_ship_failures_total":     "repl_append calls to followers that failed (unreachable, refused or unanswered); the shipper tries again.",
	"felix_replication_applied_records_total":   "Records this broker wrote into the replicas it holds for other brokers' shards.",
	"felix_publish_quorum_timeouts_total":       "Publishes to Quorum shards answered quorum_timeout: no majority held them within FELIX_PUBLISH_QUORUM_TIMEOUT_MS.",
	"felix_replication_leaders_suspected_total": "Times this broker, as a follower, began reporting a Quorum shard's leader silent for FELIX_LEADER_SUSPECT_AFTER_MS (the fast path to a promotion).",
	"felix_replication_followers":               "Followers this broker ships to, one per follower of each shard it leads.",
	"felix_shard_replicas_halted":               "Followers of the shards this broker leads that it cannot ship to: their copy diverged, or needs records retention removed (GET /replication/halted on the metrics listener says which and why).",
	"felix_replication_replicas":                "Replicas this broker holds of shards other brokers lead.",
	"felix_replication_lag_records_max":         "The most records any follower of a shard this broker leads is behind the leader's log.",
}

func newReplication(set *metrics.Set) *replication {
	metricdoc.Describe(replicationHelp)
	r := &replication{
		leading:          map[shardRef]*shardRepl{},
		following:        map[shardRef]uint64{},
		shippedRecords:   set.NewCounter("felix_replication_shipped_records_total"),
		shippedBytes:     set.NewCounter("felix_replication_shipped_bytes_total"),
		shipFailures:     set.NewCounter("felix_replication_ship_failures_total"),
		appliedRecords:   set.NewCounter("felix_replication_applied_records_total"),
		quorumTimeouts:   set.NewCounter("felix_publish_quorum_timeouts_total"),
		suspectsReported: set.NewCounter("felix_replication_leaders_suspected_total"),
		heard:            map[shardRef]heard{},
		suspectAfter:     DefaultLeaderSuspectAfter,
		soonC:            make(chan struct{}, 1),
	}
	set.NewGauge("felix_replication_followers", func() float64 { return float64(r.followersTotal.Load()) })
	set.NewGauge("felix_shard_replicas_halted", func() float64 { return float64(r.followersHalted.Load()) })
	set.NewGauge("felix_replication_replicas", func() float64 {
		r.mu.Lock()
		defer r.mu.Unlock()
		return float64(len(r.following))
	})
	set.NewGauge("felix_replication_lag_records_max", func() float64 { return float64(r.lagMax()) })
	return r
}

// lagMax is the largest lag of any follower this broker ships to.
func (r *replication) lagMax() int64 {
	r.mu.Lock()
	reps := make([]*shardRepl, 0, len(r.leading))
	for _, sr := range r.leading {
		reps = append(reps, sr)
	}
	r.mu.Unlock()
	var worst int64
	for _, sr := range reps {
		worst = max(worst, sr.lag())
	}
	return worst
}

// forShard is core.Config.ReplicationFor: the replication of a durable
// shard this broker opens as its leader. Standalone brokers replicate
// nothing.
func (r *replication) forShard(k core.StreamKey, shard uint32) core.Replication {
	if r.s == nil || r.s.cluster == nil {
		return nil
	}
	ref := shardRef{kind: wire.ShardKindStream, tenant: k.Tenant, ns: k.Namespace, name: k.Stream, shard: shard}
	r.mu.Lock()
	defer r.mu.Unlock()
	sr := r.leading[ref]
	if sr == nil {
		sr = newShardRepl(r, ref)
		r.leading[ref] = sr
		if v := r.s.routes.view.Load(); v != nil {
			if a, ok := v.assignments[ref]; ok {
				sr.configure(a)
			}
		}
	}
	return sr
}

// reconcile brings replication in line with the view v (under s.own.mu,
// after the shards gained and lost were opened and closed): shippers for
// the followers of every durable shard this broker leads, and the
// replicas held for shards it no longer follows closed.
func (r *replication) reconcile(v *routeView) {
	self := r.s.routes.self
	r.mu.Lock()
	var stop []*shardRepl
	for ref, sr := range r.leading {
		a, ok := v.assignments[ref]
		if !ok || !r.s.routes.mine(a) {
			stop = append(stop, sr)
			delete(r.leading, ref)
		}
	}
	for ref, a := range v.assignments {
		if ref.kind != wire.ShardKindStream || !r.s.routes.mine(a) || a.StorageID == "" {
			continue
		}
		sr := r.leading[ref]
		if sr == nil {
			sr = newShardRepl(r, ref)
			r.leading[ref] = sr
		}
		sr.configure(a)
	}
	r.trackHeardLocked(v, self)
	var drop []shardRef
	for ref := range r.following {
		a, ok := v.assignments[ref]
		switch {
		case ok && replicaOf(a, self):
		case ok && r.s.routes.mine(a):
			// Promoted: the takeover uses the copy, and opening the shard
			// over it closes the replica.
			delete(r.following, ref)
		default:
			drop = append(drop, ref)
			delete(r.following, ref)
		}
	}
	r.mu.Unlock()
	for _, sr := range stop {
		sr.stop()
	}
	for _, ref := range drop {
		k := core.StreamKey{Tenant: ref.tenant, Namespace: ref.ns, Stream: ref.name}
		r.s.core.CloseStreamReplica(k, ref.shard)
		r.s.core.ForgetPromise(k, ref.shard)
	}
}

// stopAll stops every shipper (shutdown).
func (r *replication) stopAll() {
	r.mu.Lock()
	reps := make([]*shardRepl, 0, len(r.leading))
	for ref, sr := range r.leading {
		reps = append(reps, sr)
		delete(r.leading, ref)
	}
	r.mu.Unlock()
	for _, sr := range reps {
		sr.stop()
	}
}

// replicaOf reports whether node is a follower in a.
func replicaOf(a wire.ShardAssignment, node string) bool {
	return slices.ContainsFunc(a.Replicas, func(r wire.ShardReplica) bool { return r.NodeID == node })
}

// shardRepl is the replication of one shard this broker leads: its
// shippers and the committed mark they move. It is the shard's
// core.Replication.
type shardRepl struct {
	r   *replication
	ref shardRef

	// shippers is read without mu by Appended (under the shard's claim
	// lock), so it is replaced, never changed in place.
	shippers atomic.Pointer[[]*shipper]

	mu         sync.Mutex
	generation uint64
	quorum     bool
	// setSize is the replica set's size, the leader included, as the
	// view names it: a majority is setSize/2 + 1.
	setSize int
	// committed is the highest mark a majority has held; it never
	// decreases. changed is closed and replaced when it grows or the
	// replication stops.
	committed uint64
	changed   chan struct{}
	stopped   bool
	// groupsChanged, when set, is closed when a follower answers a
	// repl_groups call or the replication stops (WaitGroups).
	groupsChanged chan struct{}
}

func newShardRepl(r *replication, ref shardRef) *shardRepl {
	sr := &shardRepl{r: r, ref: ref, setSize: 1, changed: make(chan struct{})}
	sr.shippers.Store(&[]*shipper{})
	return sr
}

// configure applies the shard's assignment: its generation, consistency
// and followers. Shippers start for new followers and stop for those
// gone; a new generation restarts them all.
func (sr *shardRepl) configure(a wire.ShardAssignment) {
	sr.mu.Lock()
	if sr.stopped {
		sr.mu.Unlock()
		return
	}
	cur := *sr.shippers.Load()
	var keep, stop []*shipper
	for _, sp := range cur {
		if sp.generation == a.Generation && replicaOf(a, sp.node) {
			keep = append(keep, sp)
		} else {
			stop = append(stop, sp)
		}
	}
	for _, rep := range a.Replicas {
		if rep.NodeID == sr.r.s.routes.self || slices.ContainsFunc(keep, func(sp *shipper) bool { return sp.node == rep.NodeID }) {
			continue
		}
		sp := newShipper(sr, rep.NodeID, a.Generation, a.Incarnation)
		keep = append(keep, sp)
		sp.start()
	}
	sr.generation = a.Generation
	sr.quorum = a.Consistency == "quorum"
	sr.setSize = 1 + len(a.Replicas)
	sr.shippers.Store(&keep)
	sr.recomputeLocked()
	sr.mu.Unlock()
	sr.r.followersTotal.Add(int64(len(keep) - len(cur)))
	for _, sp := range stop {
		sp.stop()
	}
}

// stop ends the shard's replication: its shippers stop and its waiters
// are refused (the shard is no longer led here).
func (sr *shardRepl) stop() {
	sr.mu.Lock()
	if sr.stopped {
		sr.mu.Unlock()
		return
	}
	sr.stopped = true
	close(sr.changed)
	if sr.groupsChanged != nil {
		close(sr.groupsChanged)
		sr.groupsChanged = nil
	}
	sps := *sr.shippers.Load()
	sr.shippers.Store(&[]*shipper{})
	sr.mu.Unlock()
	sr.r.followersTotal.Add(-int64(len(sps)))
	for _, sp := range sps {
		sp.stop()
	}
}

// Appended implements core.Replication: it wakes the shippers.
func (sr *shardRepl) Appended(uint64) {
	for _, sp := range *sr.shippers.Load() {
		sp.wake()
	}
}

// WaitCommitted implements core.Replication.
func (sr *shardRepl) WaitCommitted(ctx context.Context, end uint64) error {
	for {
		sr.mu.Lock()
		if !sr.quorum {
			sr.mu.Unlock()
			return nil
		}
		if sr.stopped {
			sr.mu.Unlock()
			return wire.NewError(wire.CodeShardUnavailable, "shard %d of %s is no longer led by this broker", sr.ref.shard, sr.ref.name).
				WithDetail(wire.DetailReason, "not_leader")
		}
		// The leader's own write may have become durable since the last
		// follower answer: count it now.
		sr.recomputeLocked()
		if sr.committed >= end {
			sr.mu.Unlock()
			return nil
		}
		ch := sr.changed
		sr.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Committed implements core.Replication.
func (sr *shardRepl) Committed() uint64 {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if !sr.quorum {
		return flog.NoRetentionFloor
	}
	if !sr.stopped {
		// The leader's own fsync moves the mark too, and tells nobody.
		sr.recomputeLocked()
	}
	return sr.committed
}

// isQuorum reports whether the shard acknowledges on a majority.
func (sr *shardRepl) isQuorum() bool {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return sr.quorum
}

// recomputeLocked moves the committed mark to what a majority of the set
// holds: the leader's durable offset and each follower's acknowledged
// one, the majority-th highest. Followers named but not shipped to yet
// count as holding nothing.
func (sr *shardRepl) recomputeLocked() {
	// On the stack for any replication factor the catalog allows (≤ 7):
	// the mark is read on every claim of a Quorum shard.
	var buf [8]uint64
	pos := buf[:0]
	if sh := sr.leaderShard(); sh != nil {
		pos = append(pos, sh.LogDurableOffset())
	} else {
		pos = append(pos, 0)
	}
	for _, sp := range *sr.shippers.Load() {
		pos = append(pos, sp.acked.Load())
	}
	for len(pos) < sr.setSize {
		pos = append(pos, 0)
	}
	slices.Sort(pos)
	slices.Reverse(pos)
	majority := sr.setSize/2 + 1
	if m := pos[majority-1]; m > sr.committed {
		sr.committed = m
		close(sr.changed)
		sr.changed = make(chan struct{})
	}
}

// followerAcked is a shipper's report that its follower holds more.
func (sr *shardRepl) followerAcked() {
	sr.mu.Lock()
	if !sr.stopped {
		sr.recomputeLocked()
	}
	sr.mu.Unlock()
}

// leaderShard is the shard this broker leads, when it is open.
func (sr *shardRepl) leaderShard() *core.Shard {
	st, ok := sr.r.s.core.Stream(core.StreamKey{Tenant: sr.ref.tenant, Namespace: sr.ref.ns, Stream: sr.ref.name})
	if !ok {
		return nil
	}
	sh, err := st.Shard(sr.ref.shard)
	if err != nil {
		return nil
	}
	return sh
}

// lag is how many records the furthest-behind follower lacks.
func (sr *shardRepl) lag() int64 {
	sh := sr.leaderShard()
	if sh == nil {
		return 0
	}
	tail := sh.LogNextOffset()
	var worst int64
	for _, sp := range *sr.shippers.Load() {
		if a := sp.acked.Load(); a < tail {
			worst = max(worst, int64(tail-a))
		}
	}
	return worst
}

// noteFollowing records that this broker holds a replica of ref.
func (r *replication) noteFollowing(ref shardRef, generation uint64) {
	r.mu.Lock()
	r.following[ref] = generation
	r.mu.Unlock()
}

// awaitQuorum waits, for a claim on a Quorum shard, until a majority of
// the replica set holds it or Config.QuorumTimeout passes. It reports
// false after answering the publish quorum_timeout (retry class
// outcome_unknown: the records are in the leader's log and may still be
// committed); true when the caller should finish and answer as usual.
func (s *Server) awaitQuorum(sh *core.Shard, c *core.Claimed, settle func(error, *uint64)) bool {
	sr, ok := sh.Replication().(*shardRepl)
	if !ok || !sr.isQuorum() || c.CommitEnd() == 0 {
		// A duplicate of a batch this leadership wrote waits in Finish
		// for its first copy; one rebuilt from the log waits here.
		return true
	}
	ctx, cancel := context.WithTimeout(s.workCtx, s.cfg.QuorumTimeout)
	// The leader's own write first: the committed mark counts it when
	// WaitCommitted starts, and nothing wakes a waiter when it lands.
	err := c.WaitDurable(ctx)
	if err == nil {
		err = sr.WaitCommitted(ctx, c.CommitEnd())
	}
	cancel()
	if err == nil || s.workCtx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	s.repl.quorumTimeouts.Inc()
	e := wire.NewError(wire.CodeQuorumTimeout, "no majority of the replicas of shard %d of %s held offsets [%d, %d) within %v; they are in the leader's log and may still be committed",
		sr.ref.shard, sr.ref.name, c.BaseOffset(), max(c.CommitEnd(), c.BaseOffset()), s.cfg.QuorumTimeout).WithDetail("shard", sr.ref.shard)
	e.Retry = wire.RetryOutcomeUnknown
	settle(e, nil)
	return false
}

// ReplicationReport is the body of GET /replication and
// /replication/halted on the broker's metrics listener: the followers of
// every shard this broker leads, with how far each holds the log.
type ReplicationReport struct {
	NodeID    string             `json:"node_id"`
	Followers []FollowerPosition `json:"followers"`
	Replicas  []ReplicaPosition  `json:"replicas,omitempty"`
}

// FollowerPosition is one follower of a shard this broker leads.
type FollowerPosition struct {
	TenantID   string `json:"tenant_id"`
	Namespace  string `json:"namespace"`
	Stream     string `json:"stream"`
	Shard      uint32 `json:"shard"`
	Generation uint64 `json:"generation"`
	Follower   string `json:"follower"`
	// LeaderNext is one past the leader's last record; Committed its
	// committed mark (absent on a Leader-consistency shard).
	LeaderNext uint64  `json:"leader_next"`
	Committed  *uint64 `json:"committed,omitempty"`
	// Next is where the follower's copy ends as the leader last heard;
	// Durable how far it holds it under its fsync policy; Lag the records
	// it lacks.
	Next    uint64 `json:"next"`
	Durable uint64 `json:"durable"`
	Lag     uint64 `json:"lag"`
	// Halted says why nothing is shipped to the follower; HaltedAtMs
	// since when (Unix ms).
	Halted     string `json:"halted,omitempty"`
	HaltedAtMs int64  `json:"halted_at_ms,omitempty"`
}

// ReplicaPosition is one replica this broker holds of a shard another
// broker leads.
type ReplicaPosition struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
	Shard     uint32 `json:"shard"`
	// Generation is that of the leader that last shipped to it.
	Generation uint64 `json:"generation"`
	Next       uint64 `json:"next"`
	Durable    uint64 `json:"durable"`
	Committed  uint64 `json:"committed"`
	// Damaged says the copy lost records it promised while the broker
	// was down and its leader has not refilled it yet.
	Damaged bool `json:"damaged,omitempty"`
}

// held returns, copied under r.mu, the shards this broker leads with
// replication and the replicas it holds with the generation of each.
func (r *replication) held() ([]*shardRepl, map[shardRef]uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	leading := make([]*shardRepl, 0, len(r.leading))
	for _, sr := range r.leading {
		leading = append(leading, sr)
	}
	following := make(map[shardRef]uint64, len(r.following))
	for ref, g := range r.following {
		following[ref] = g
	}
	return leading, following
}

// report lists the followers (only the halted ones when halted) and, in
// full, the replicas held.
func (r *replication) report(halted bool) ReplicationReport {
	out := ReplicationReport{NodeID: r.s.nodeID(), Followers: []FollowerPosition{}}
	reps, following := r.held()
	for _, sr := range reps {
		var tail uint64
		if sh := sr.leaderShard(); sh != nil {
			tail = sh.LogNextOffset()
		}
		var committed *uint64
		if c := sr.Committed(); c != flog.NoRetentionFloor {
			committed = &c
		}
		sr.mu.Lock()
		gen := sr.generation
		sr.mu.Unlock()
		for _, sp := range *sr.shippers.Load() {
			fp := FollowerPosition{TenantID: sr.ref.tenant, Namespace: sr.ref.ns, Stream: sr.ref.name, Shard: sr.ref.shard,
				Generation: gen, Follower: sp.node, LeaderNext: tail, Committed: committed,
				Next: sp.next.Load(), Durable: sp.acked.Load()}
			if fp.Durable < tail {
				fp.Lag = tail - fp.Durable
			}
			if h := sp.halted.Load(); h != nil {
				fp.Halted, fp.HaltedAtMs = *h, sp.haltedAt.Load()
			} else if halted {
				continue
			}
			out.Followers = append(out.Followers, fp)
		}
	}
	if !halted {
		for ref, g := range following {
			rp, ok := r.s.core.StreamReplica(core.StreamKey{Tenant: ref.tenant, Namespace: ref.ns, Stream: ref.name}, ref.shard)
			if !ok {
				continue
			}
			out.Replicas = append(out.Replicas, ReplicaPosition{TenantID: ref.tenant, Namespace: ref.ns, Stream: ref.name,
				Shard: ref.shard, Generation: g, Next: rp.NextOffset(), Durable: rp.DurableOffset(), Committed: rp.Committed(), Damaged: rp.Damaged()})
		}
	}
	sortPositions(out)
	return out
}

// sortPositions orders a report by stream, shard and follower, so that
// it reads the same each time.
func sortPositions(rep ReplicationReport) {
	slices.SortFunc(rep.Followers, func(a, b FollowerPosition) int {
		return cmpKeys(a.TenantID+"\x00"+a.Namespace+"\x00"+a.Stream, a.Shard, a.Follower,
			b.TenantID+"\x00"+b.Namespace+"\x00"+b.Stream, b.Shard, b.Follower)
	})
	slices.SortFunc(rep.Replicas, func(a, b ReplicaPosition) int {
		return cmpKeys(a.TenantID+"\x00"+a.Namespace+"\x00"+a.Stream, a.Shard, "",
			b.TenantID+"\x00"+b.Namespace+"\x00"+b.Stream, b.Shard, "")
	})
}

func cmpKeys(an string, as uint32, af string, bn string, bs uint32, bf string) int {
	if c := strings.Compare(an, bn); c != 0 {
		return c
	}
	if c := cmp.Compare(as, bs); c != 0 {
		return c
	}
	return strings.Compare(af, bf)
}
