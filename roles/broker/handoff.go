package broker

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/internal/metricdoc"
	"github.com/felixmq/felix/roles/broker/sched"
	"github.com/felixmq/felix/wire"
)

// Planned handoff at shutdown (docs/operations.md, "Stopping a broker").
// Before a broker in a cluster drains its connections it hands each
// durable stream shard it leads with at least one follower to a follower
// that holds everything it has, all shards at once, within
// Config.HandoffTimeout (FELIX_SHUTDOWN_HANDOFF_TIMEOUT_MS). For each
// shard:
//
//  1. It holds the shard's new publishes (handoff_gate.go: they wait,
//     they are not refused) and waits until every publish already
//     admitted has been answered, so the log no longer grows.
//  2. It waits until a live follower's durable position (its shipper's
//     acked) reaches the end of the leader's log.
//  3. It asks the control plane to hand the shard to that follower at
//     its generation (HandoffSource; refused unless the placement still
//     backs it), then fetches the view at once until it names the new
//     owner. Applying that view ends the shard's subscriptions with
//     shard_moved (they resume on the new owner from last+1) and makes
//     this broker a follower of the new generation.
//  4. It waits (within the budget) until the new owner has taken the
//     shard over: its takeover fences this broker's copy and ships to
//     it at the new generation. Then it releases the held publishes,
//     which are forwarded to the new owner in the order they came.
//  5. Until the drain, an acknowledged publish to the shard that finds
//     every earlier one answered is redirected (not_leader, naming the
//     new owner) rather than forwarded, so clients move before the
//     drain closes their connection (redirectHandedOff); the drain
//     starts once no publish to a handed-off shard has come for a moment
//     (awaitRedirected).
//
// A shard that cannot be handed off in time (no follower caught up, the
// control plane refused or did not answer) is left as it is, its held
// publishes claimed here after all; failover takes it once the broker is
// gone. One line is logged per shard handed off and one summary, and
// felix_shutdown_handoffs_total counts each shard's result.

// HandoffSource is the control plane's planned-handoff call as a
// stopping broker makes it: controlplane.Service in process, POST
// /v1/placement/handoff over REST (catalogsync).
type HandoffSource interface {
	// HandOffShard hands the shard req names to req.To; the answer is its
	// new assignment. A request the placement does not back is refused
	// (code conflict).
	HandOffShard(ctx context.Context, req wire.HandoffRequest) (wire.ShardAssignment, error)
}

// Results of one shard's handoff, in felix_shutdown_handoffs_total.
const (
	handoffDone    = "handed_off"
	handoffTimeout = "timeout"
	handoffRefused = "refused"
	handoffFailed  = "failed"
)

// handoffCallTimeout bounds the control plane's answer to one handoff
// (one without a quorum does not answer; the shard then fails over).
const handoffCallTimeout = 5 * time.Second

// handoffPoll is how often a handoff looks again at what it waits for.
const handoffPoll = 5 * time.Millisecond

var handoffHelp = map[string]string{
	"felix_shutdown_handoffs_total": "Durable shards this broker led with followers when it was stopped, by the result of handing each to a follower: handed_off, timeout (no follower caught up, or the view did not follow, within FELIX_SHUTDOWN_HANDOFF_TIMEOUT_MS), refused (by the control plane) or failed.",
}

// handoffState is a broker's planned-handoff state.
type handoffState struct {
	// src is where handoffs are asked for; nil: none (standalone, or a
	// control plane without the call).
	src  HandoffSource
	once sync.Once

	mu sync.Mutex
	// moved are the shards this broker handed off (guarded by mu).
	moved map[shardRef]bool
	// lastSeen is when (Unix ns) a publish to a moved shard last
	// arrived, or a shard was last marked moved.
	lastSeen atomic.Int64
}

// Once its shards are handed off, a broker waits (at most
// handoffSettleMax, within the handoff's budget) until no publish to them
// has arrived for handoffQuiet before it drains: its clients have been
// redirected to the new owners, so the drain finds no publish of theirs
// on the way. A publish sent the instant the drain stops reading would
// come back outcome unknown.
const (
	handoffQuiet     = 100 * time.Millisecond
	handoffSettleMax = 2 * time.Second
)

// initHandoff finds the broker's HandoffSource (the cluster view source,
// else the registry, else the catalog) and describes the metric.
func (s *Server) initHandoff(catalog any) {
	metricdoc.Describe(handoffHelp)
	if s.cluster == nil {
		return
	}
	for _, c := range []any{s.cluster, s.registry, catalog} {
		if h, ok := c.(HandoffSource); ok && h != nil {
			s.handoff.src = h
			return
		}
	}
}

// handsOff reports whether this broker hands its shards off when it
// stops, so its durable publishes pass the handoff gates.
func (s *Server) handsOff() bool { return s.handoff.src != nil && s.cfg.HandoffTimeout > 0 }

// HandOff hands each durable shard this broker leads with a follower to
// a caught-up follower, within Config.HandoffTimeout and ctx (see the
// list above); Shutdown starts with it. It runs once; later calls return
// at once.
func (s *Server) HandOff(ctx context.Context) {
	s.handoff.once.Do(func() { s.handOffAll(ctx) })
}

func (s *Server) handOffAll(ctx context.Context) {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if !started || !s.handsOff() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.HandoffTimeout)
	defer cancel()
	shards := s.repl.ledWithFollowers()
	if len(shards) == 0 {
		return
	}
	began := time.Now()
	results := make([]string, len(shards))
	var wg sync.WaitGroup
	for i, sr := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.handOffShard(ctx, sr)
		}()
	}
	wg.Wait()
	s.awaitRedirected(ctx)
	counts := map[string]int{}
	for _, r := range results {
		counts[r]++
		s.metrics.set.GetOrCreateCounter("felix_shutdown_handoffs_total{result=" + strconv.Quote(r) + "}").Inc()
	}
	s.log.Info("shutdown handoff finished", "shards", len(shards), handoffDone, counts[handoffDone],
		handoffTimeout, counts[handoffTimeout], handoffRefused, counts[handoffRefused], handoffFailed, counts[handoffFailed],
		"took", time.Since(began).Round(time.Millisecond))
}

// handOffShard hands one shard off and returns the result.
func (s *Server) handOffShard(ctx context.Context, sr *shardRepl) string {
	ref := sr.ref
	a, ok := s.assignment(ref)
	log := s.log.With("stream", ref.name, "tenant", ref.tenant, "namespace", ref.ns, "shard", ref.shard, "generation", a.Generation)
	if !ok || a.NodeID != s.routes.self || a.Unavailable != "" {
		log.Warn("shutdown handoff: the view no longer has this broker serve the shard; left as it is")
		return handoffFailed
	}
	idle := s.handoffs.hold(ref)
	var refuse *wire.Error // set when the shard may have moved but the view did not say so
	handed := false
	defer func() {
		n := s.handoffs.release(ref, refuse)
		if handed {
			log.Debug("shutdown handoff: held publishes released", "publishes", n)
		}
	}()
	if !waitUntil(ctx, idle) {
		log.Warn("shutdown handoff: publishes in flight did not finish in time; the shard is left to fail over")
		return handoffTimeout
	}
	sh := sr.leaderShard()
	if sh == nil {
		log.Warn("shutdown handoff: the shard is not open here; left as it is")
		return handoffFailed
	}
	end := sh.LogNextOffset()
	to, ok := s.caughtUpFollower(ctx, sr, a, end)
	if !ok && ctx.Err() == nil {
		log.Warn("shutdown handoff: no follower answers; the shard is left to fail over", "end", end)
		return handoffFailed
	}
	if !ok {
		log.Warn("shutdown handoff: no live follower caught up in time; the shard is left to fail over", "end", end)
		return handoffTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, handoffCallTimeout)
	na, err := s.handoff.src.HandOffShard(cctx, wire.HandoffRequest{Kind: wire.PlacementStream, TenantID: ref.tenant,
		Namespace: ref.ns, Name: ref.name, Shard: ref.shard, Generation: a.Generation, From: s.routes.self, To: to})
	cancel()
	if err != nil {
		var we *wire.Error
		if errors.As(err, &we) && we.Retry == wire.RetryFatal {
			log.Warn("shutdown handoff: the control plane refused it; the shard is left to fail over", "to", to, "err", err)
			return handoffRefused
		}
		// The call may have been applied: the view says.
		s.refreshView(ctx)
		cur, ok := s.assignment(ref)
		if !ok || cur.Generation == a.Generation {
			// Perhaps applied all the same: the held publishes are not
			// written here at the old generation, but refused (retry).
			refuse = wire.NewError(wire.CodeShardUnavailable, "shard %d of %s is being handed off; the control plane did not answer whether it was",
				ref.shard, ref.name).WithDetail(wire.DetailReason, "handoff_unknown")
			log.Warn("shutdown handoff: the control plane did not answer; the shard is left to fail over", "to", to, "err", err)
			return handoffFailed
		}
		na = cur
	}
	if !s.awaitView(ctx, ref, na.Generation) {
		refuse = wire.NewError(wire.CodeShardUnavailable, "shard %d of %s was handed to %s at generation %d; this broker's view has not caught up",
			ref.shard, ref.name, na.NodeID, na.Generation).WithDetail(wire.DetailReason, "handed_off")
		log.Warn("shutdown handoff: handed off, but the view did not follow in time; the held publishes are refused (retry)", "to", na.NodeID)
		return handoffTimeout
	}
	s.handoff.mu.Lock()
	if s.handoff.moved == nil {
		s.handoff.moved = map[shardRef]bool{}
	}
	s.handoff.moved[ref] = true
	s.handoff.mu.Unlock()
	s.handoff.lastSeen.Store(time.Now().UnixNano())
	if !s.awaitTakeover(ctx, ref, na.Generation) {
		log.Warn("shutdown handoff: the new owner had not taken the shard over in time; releasing the held publishes to it anyway", "to", na.NodeID)
	}
	handed = true
	log.Info("shard handed off", "to", na.NodeID, "new_generation", na.Generation, "end", end)
	return handoffDone
}

// redirectHandedOff reports whether an acknowledged publish to shard idx
// of stream k, which this broker handed off, should be redirected to the
// new owner rather than forwarded: when every publish this broker took
// for the shard has been answered, so the client's next one cannot
// overtake an earlier one. The client then publishes to the new owner
// from then on, and nothing of it is in flight here when the drain
// closes its connection (a fire-and-forget publish, which nobody would
// send again, is always forwarded).
func (s *Server) redirectHandedOff(k core.StreamKey, idx uint32, acked bool) bool {
	ref := shardRef{kind: wire.ShardKindStream, tenant: k.Tenant, ns: k.Namespace, name: k.Stream, shard: idx}
	s.handoff.mu.Lock()
	moved := s.handoff.moved[ref]
	s.handoff.mu.Unlock()
	if !moved {
		return false
	}
	s.handoff.lastSeen.Store(time.Now().UnixNano())
	return acked && !s.lanes.busy(sched.LaneKey{Stream: k, Shard: idx}) &&
		!s.lanes.busy(sched.LaneKey{Stream: k, Shard: idx, Forwarded: true})
}

// awaitRedirected waits, when a shard was handed off, until no publish
// to one has arrived for handoffQuiet, at most handoffSettleMax.
func (s *Server) awaitRedirected(ctx context.Context) {
	if s.handoff.lastSeen.Load() == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, handoffSettleMax)
	defer cancel()
	for {
		quiet := time.Since(time.Unix(0, s.handoff.lastSeen.Load()))
		if quiet >= handoffQuiet || !sleepCtx(ctx, handoffQuiet-quiet) {
			return
		}
	}
}

// assignment is ref's assignment in the view this broker routes by.
func (s *Server) assignment(ref shardRef) (wire.ShardAssignment, bool) {
	v := s.routes.view.Load()
	if v == nil {
		return wire.ShardAssignment{}, false
	}
	a, ok := v.assignments[ref]
	return a, ok
}

// caughtUpFollower waits until a follower of a that is live in the view
// answers, after the call began, that it holds the leader's log up to end
// durably, and names it. A fresh answer is asked for: a follower that
// stopped a moment ago still looks live in the registry, and its last
// answer may have been complete.
func (s *Server) caughtUpFollower(ctx context.Context, sr *shardRepl, a wire.ShardAssignment, end uint64) (string, bool) {
	t := time.NewTicker(handoffPoll)
	defer t.Stop()
	sps := *sr.shippers.Load()
	seen := make([]uint64, len(sps))
	failed := make([]uint64, len(sps))
	for i, sp := range sps {
		seen[i], failed[i] = sp.answered.Load(), sp.failed.Load()
	}
	for {
		if followersUnreachable(sps, seen, failed) {
			return "", false
		}
		for i, sp := range sps {
			b, ok := s.routes.Broker(sp.node)
			if sp.answered.Load() > seen[i] && sp.generation == a.Generation && sp.acked.Load() >= end &&
				sp.halted.Load() == nil && ok && b.State == wire.BrokerLive {
				return sp.node, true
			}
			if !sp.probe.Load() {
				sp.probe.Store(true)
				sp.wake()
			}
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-t.C:
		}
	}
}

// handoffGiveUpFailures is how many calls to every follower must fail,
// with none answered, since a handoff began before it gives up waiting
// for one to catch up: when brokers stop together (felix dev, a
// cluster's shutdown) the followers are gone, and waiting out the budget
// would only hold the stop up.
const handoffGiveUpFailures = 3

// followersUnreachable reports whether, since the counts seen and failed were
// taken, no follower answered and each failed handoffGiveUpFailures
// calls.
func followersUnreachable(sps []*shipper, seen, failed []uint64) bool {
	for i, sp := range sps {
		if sp.answered.Load() > seen[i] || sp.failed.Load() < failed[i]+handoffGiveUpFailures {
			return false
		}
	}
	return true
}

// awaitView fetches the view until ref's assignment there is at
// generation gen or later.
func (s *Server) awaitView(ctx context.Context, ref shardRef, gen uint64) bool {
	for {
		s.refreshView(ctx)
		if a, ok := s.assignment(ref); ok && a.Generation >= gen {
			return true
		}
		if !sleepCtx(ctx, handoffPoll) {
			return false
		}
	}
}

// awaitTakeover waits until the new owner of ref has taken it over at
// gen: it fenced this broker's copy and shipped to it.
func (s *Server) awaitTakeover(ctx context.Context, ref shardRef, gen uint64) bool {
	for s.repl.followingGeneration(ref) < gen {
		if !sleepCtx(ctx, handoffPoll) {
			return false
		}
	}
	return true
}

// ledWithFollowers lists the shards this broker leads that have at least
// one follower.
func (r *replication) ledWithFollowers() []*shardRepl {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*shardRepl
	for _, sr := range r.leading {
		if len(*sr.shippers.Load()) > 0 {
			out = append(out, sr)
		}
	}
	return out
}

// followingGeneration is the generation of the leader that last shipped
// to this broker's replica of ref (0 when it holds none).
func (r *replication) followingGeneration(ref shardRef) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.following[ref]
}
