package broker

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/roles/broker/peer"
	"github.com/felixmq/felix/wire"
)

// Group state follows its shard (docs/protocol.md, "Replication", group
// state; core/group_repl.go). Beside each shipper of a shard's log runs a
// groups shipper: whenever the shard's group state is newer than what
// the follower last answered holding, it sends the whole state in one
// repl_groups call (header: the shard, the leader's generation and the
// state's version; body: the state as a state file). The follower keeps
// it if it is newer than its own and answers the version it holds.
//
// On a Quorum shard a group change (an ack, nack, dead letter, discard,
// redrive, seek or delete that changed what groups.state holds) is
// answered only once a majority of the replica set, the leader included,
// holds a state at least that new (shardRepl.WaitGroups): the takeover
// fences a majority and takes the newest state among them, so a cursor an
// answered ack moved is never behind on the new leader. A follower that
// refuses the call because a newer leader fenced it deposes this one: the
// change is answered not_leader (a_deposed_coordinator_refuses_a_group_ack).

// Peer calls of group state.
const (
	TypeReplGroups     = "repl_groups"
	TypeReplGroupsRead = "repl_groups_read"
)

// groupsIdle is how often a groups shipper looks at the state without
// being woken.
const groupsIdle = time.Second

// replGroups is repl_groups's header.
type replGroups struct {
	replFence
	Version core.GroupVersion `json:"version"`
}

// replGroupsHeld answers repl_groups and repl_groups_read: the version
// the copy holds.
type replGroupsHeld struct {
	Version core.GroupVersion `json:"version"`
}

// groupsShipper ships one shard's group state to one follower.
type groupsShipper struct {
	sp    *shipper
	wakeC chan struct{}
	// acked is the newest version the follower answered holding.
	mu    sync.Mutex
	acked core.GroupVersion
	// deposed is set once the follower refused a call because a newer
	// leader fenced it.
	deposed atomic.Bool
	// started counts the calls begun; confirmed is the count at the
	// start of the latest call the follower answered (it still took this
	// broker as the leader then). probe asks for a call even when the
	// follower holds the state: a request waiting for a round.
	started   atomic.Uint64
	confirmed atomic.Uint64
	probe     atomic.Bool
}

func (sp *shipper) startGroups() {
	gs := &groupsShipper{sp: sp, wakeC: make(chan struct{}, 1)}
	sp.groups = gs
	sp.done.Add(1)
	go gs.run()
}

func (gs *groupsShipper) wake() {
	select {
	case gs.wakeC <- struct{}{}:
	default:
	}
}

func (gs *groupsShipper) held() core.GroupVersion {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.acked
}

func (gs *groupsShipper) run() {
	sp := gs.sp
	defer sp.done.Done()
	backoff := shipMinBackoff
	t := time.NewTimer(0)
	defer t.Stop()
	var warned, looked bool
	for {
		select {
		case <-gs.wakeC:
		case <-t.C:
		case <-sp.ctx.Done():
			return
		}
		wait := groupsIdle
		if sh := sp.sr.leaderShard(); sh != nil {
			g := sh.OpenedGroups()
			if g == nil && !looked {
				// A state taken over (or left by a restart): open it so
				// that the followers get it before any group changes.
				// Once is enough: a group made later opens them.
				looked = true
				if sh.HasGroupState() {
					g, _ = sh.Groups()
				}
			}
			if g != nil && (gs.held().Less(g.Version()) || gs.probe.Load()) {
				err := gs.ship(g)
				switch {
				case err == nil:
					backoff = shipMinBackoff
					warned = false
					wait = 0 // look again at once: it may have changed meanwhile
				case errors.Is(err, errGroupsTooLarge):
					if !warned {
						sp.sr.r.s.log.Warn("group state not replicated", "stream", sp.sr.ref.name, "shard", sp.sr.ref.shard, "err", err)
						warned = true
					}
				default:
					wait = backoff
					backoff = min(2*backoff, shipMaxBackoff)
				}
			}
		}
		t.Reset(wait)
	}
}

var errGroupsTooLarge = errors.New("group state too large to replicate")

// ship sends the state once.
func (gs *groupsShipper) ship(g *core.Groups) error {
	sp := gs.sp
	gs.probe.Store(false)
	seq := gs.started.Add(1)
	snap, ver, err := g.Snapshot()
	if err != nil {
		if ver != (core.GroupVersion{}) {
			return errors.Join(errGroupsTooLarge, err)
		}
		return err
	}
	if !gs.held().Less(ver) {
		snap = nil // a round only: the follower holds the state
	}
	h := replGroups{replFence: replFence{TenantID: sp.sr.ref.tenant, Namespace: sp.sr.ref.ns, Stream: sp.sr.ref.name,
		Incarnation: sp.incarnation, Shard: sp.sr.ref.shard, Generation: sp.generation}, Version: ver}
	var ans replGroupsHeld
	err = sp.sr.r.s.replCall(sp.ctx, sp.node, TypeReplGroups, h, snap, &ans, nil)
	if err != nil {
		var we *wire.Error
		if errors.As(err, &we) && we.Detail[wire.DetailReason] == replReasonStale {
			gs.deposed.Store(true)
			sp.sr.groupsAcked()
		}
		return err
	}
	if !ans.Version.Less(ver) {
		ans.Version = ver
	}
	gs.mu.Lock()
	if gs.acked.Less(ans.Version) {
		gs.acked = ans.Version
	}
	gs.mu.Unlock()
	if gs.confirmed.Load() < seq {
		gs.confirmed.Store(seq)
	}
	sp.sr.groupsAcked()
	return nil
}

// GroupsChanged implements core.GroupsReplication: it wakes the groups
// shippers. It never blocks.
func (sr *shardRepl) GroupsChanged() {
	for _, sp := range *sr.shippers.Load() {
		if sp.groups != nil {
			sp.groups.wake()
		}
	}
}

// groupsAcked is a groups shipper's report that its follower answered.
func (sr *shardRepl) groupsAcked() {
	sr.mu.Lock()
	if sr.groupsChanged != nil {
		close(sr.groupsChanged)
		sr.groupsChanged = nil
	}
	sr.mu.Unlock()
}

// WaitGroups waits, on a Quorum shard, until a majority of the replica
// set (the leader included) holds group state at version ver or newer
// and has answered a repl_groups call begun after WaitGroups was called:
// a round that confirms no newer leader had reached them. It is refused
// not_leader once a follower answered that a newer leader fenced it, or
// the replication stopped (the shard is no longer led here).
func (sr *shardRepl) WaitGroups(ctx context.Context, ver core.GroupVersion) error {
	// The calls that count are those begun from now: ask every groups
	// shipper for one.
	after := map[*groupsShipper]uint64{}
	for _, sp := range *sr.shippers.Load() {
		if gs := sp.groups; gs != nil {
			after[gs] = gs.started.Load()
			gs.probe.Store(true)
			gs.wake()
		}
	}
	for {
		sr.mu.Lock()
		if !sr.quorum {
			sr.mu.Unlock()
			return nil
		}
		if sr.stopped {
			sr.mu.Unlock()
			return sr.errDeposed("it no longer leads it")
		}
		held, deposed := 1, false
		for _, sp := range *sr.shippers.Load() {
			if sp.groups == nil {
				continue
			}
			if sp.groups.deposed.Load() {
				deposed = true
			}
			if !sp.groups.held().Less(ver) && sp.groups.confirmed.Load() > after[sp.groups] {
				held++
			}
		}
		if deposed {
			sr.mu.Unlock()
			return sr.errDeposed("a follower was fenced by a newer leader")
		}
		if held >= sr.setSize/2+1 {
			sr.mu.Unlock()
			return nil
		}
		if sr.groupsChanged == nil {
			sr.groupsChanged = make(chan struct{})
		}
		ch := sr.groupsChanged
		sr.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (sr *shardRepl) errDeposed(why string) *wire.Error {
	return wire.NewError(wire.CodeNotLeader, "shard %d of %s: this broker may no longer lead it (%s); nothing of the group change was acknowledged", sr.ref.shard, sr.ref.name, why).
		WithDetail(wire.DetailReason, "deposed")
}

// awaitGroups answers whether a group change made on sh, whose state is
// now at ver, may be acknowledged: nil once a majority holds it (at once
// off a Quorum shard); not_leader when this broker was deposed;
// quorum_timeout (outcome unknown) when no majority held it within
// Config.QuorumTimeout.
func (s *Server) awaitGroups(sh *core.Shard, ver core.GroupVersion) *wire.Error {
	sr, ok := sh.Replication().(*shardRepl)
	if !ok || !sr.isQuorum() {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.workCtx, s.cfg.QuorumTimeout)
	defer cancel()
	err := sr.WaitGroups(ctx, ver)
	if err == nil {
		return nil
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return we
	}
	e := wire.NewError(wire.CodeQuorumTimeout, "no majority of the replicas of shard %d of %s held the group change within %v; it may still take effect",
		sr.ref.shard, sr.ref.name, s.cfg.QuorumTimeout).WithDetail("shard", sr.ref.shard)
	e.Retry = wire.RetryOutcomeUnknown
	return e
}

// serveReplGroups is a follower's side of repl_groups.
func (s *Server) serveReplGroups(from peer.Peer, req peer.Request) peer.Reply {
	var h replGroups
	if err := json.Unmarshal(req.Header, &h); err != nil {
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "%s header: %v", TypeReplGroups, err))
	}
	r, e := s.backedReplica(from.NodeID, h.replFence)
	if e != nil {
		return peer.ErrorReply(e)
	}
	held, err := r.StoreGroups(h.Generation, h.Version, req.Body)
	if err != nil {
		return peer.ErrorReply(asWireError(err))
	}
	out, _ := json.Marshal(replGroupsHeld{Version: held})
	return peer.Reply{Header: out}
}

// serveReplGroupsRead is a copy's side of repl_groups_read: its group
// state, for a leader taking the shard over.
func (s *Server) serveReplGroupsRead(from peer.Peer, req peer.Request) peer.Reply {
	r, _, e := s.copyToRead(from, req, TypeReplGroupsRead)
	if e != nil {
		return peer.ErrorReply(e)
	}
	snap, ver, err := r.GroupsSnapshot()
	if err != nil {
		return peer.ErrorReply(asWireError(err))
	}
	out, _ := json.Marshal(replGroupsHeld{Version: ver})
	return peer.Reply{Header: out, Body: snap}
}

// takeNewestGroups, in a takeover, replaces own's group state with the
// newest among the fenced copies' when another copy's is newer.
func (s *Server) takeNewestGroups(ctx context.Context, own *core.Replica, answers []fenceAnswer, h replFence) error {
	best := answers[0]
	for _, an := range answers[1:] {
		if best.Groups.Less(an.Groups) {
			best = an
		}
	}
	if best.node == s.routes.self || !answers[0].Groups.Less(best.Groups) {
		return nil
	}
	var ans replGroupsHeld
	var body []byte
	if err := s.replCall(ctx, best.node, TypeReplGroupsRead, h, nil, &ans, &body); err != nil {
		return err
	}
	if !answers[0].Groups.Less(ans.Version) {
		return nil
	}
	_, err := own.StoreGroups(h.Generation, ans.Version, body)
	return err
}
