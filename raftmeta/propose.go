package raftmeta

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/felixmq/felix/wire"
)

// Propose replicates cmd and returns the state machine's result (or its
// deterministic error) once this member has applied it. A follower hands
// the command to the leader over the transport and still waits for its own
// apply, so a caller reads its own write on the member it wrote through.
//
// Errors: ErrClosed; ctx's error when nothing was handed to raft yet; a
// *wire.Error with code shard_unavailable (retry) when no leader took the
// command; quorum_timeout (outcome unknown) when ctx ended after the
// command was handed over, or the hand-over itself failed mid-way.
func (n *Node) Propose(ctx context.Context, cmd []byte) ([]byte, error) {
	n.met.proposals.Inc()
	r, err := n.propose(ctx, cmd)
	if err != nil {
		n.met.proposalFailures.Inc()
		return nil, err
	}
	return r.result, r.err
}

func (n *Node) propose(ctx context.Context, cmd []byte) (proposalResult, error) {
	if err := n.waitStarted(ctx); err != nil {
		return proposalResult{}, err
	}
	id, ch, err := n.register()
	if err != nil {
		return proposalResult{}, err
	}
	defer n.unregister(id)
	lead, err := n.submit(ctx, encodeEnvelope(id, cmd))
	if err != nil {
		return proposalResult{}, err
	}
	// A leader change can lose the command: the old leader had not yet
	// appended it, or its entry is overwritten. One election timeout after
	// the change, an entry that survived has reached this member's log and
	// is usually applied; the caller is told the outcome is unknown then,
	// rather than at its own deadline.
	changed := n.leaderChanged()
	if n.leader() != lead {
		changed = closedC
	}
	var lost <-chan time.Time
	for {
		select {
		case r := <-ch:
			return r, nil
		case <-changed:
			t := time.NewTimer(n.electionTimeout())
			defer t.Stop()
			changed, lost = nil, t.C
		case <-lost:
			return proposalResult{}, outcomeUnknown(errLeaderChanged)
		case <-ctx.Done():
			return proposalResult{}, outcomeUnknown(ctx.Err())
		case <-n.ctx.Done():
			return proposalResult{}, ErrClosed
		}
	}
}

// closedC is a closed channel: a change that already happened.
var closedC = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

var errLeaderChanged = errors.New("the raft leader changed before the command was applied")

// register reserves a proposal id and its result slot.
func (n *Node) register() (uint64, chan proposalResult, error) {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	id := binary.BigEndian.Uint64(b[:])
	ch := make(chan proposalResult, 1)
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.pending) >= maxPending {
		return 0, nil, wire.NewError(wire.CodeOverloaded, "too many proposals in flight on member %d", n.cfg.ID)
	}
	n.pending[id] = ch
	return id, ch, nil
}

func (n *Node) unregister(id uint64) {
	n.mu.Lock()
	delete(n.pending, id)
	n.mu.Unlock()
}

// submit hands an envelope to the leader and returns which member that
// was: raft takes it when this member leads; a leader that takes forwarded
// proposals gets it on the message stream, others from the forwarder (see
// forward.go). It retries while the command certainly was not accepted (no
// leader, leader changed, proposal dropped).
func (n *Node) submit(ctx context.Context, env []byte) (uint64, error) {
	for {
		lead := n.leader()
		var err error
		switch {
		case lead == 0:
			err = errNoLeader
		case lead == n.cfg.ID:
			err = n.rn.Propose(ctx, env)
			if errors.Is(err, raft.ErrProposalDropped) {
				err = errNoLeader
			}
		case n.tr.proposeOnStream(lead, env):
		default:
			err = n.tr.forwardPropose(ctx, lead, env)
		}
		if err == nil || !errors.Is(err, errNoLeader) {
			return lead, err
		}
		if werr := n.waitForChange(ctx); werr != nil {
			if errors.Is(werr, ErrClosed) {
				return 0, werr
			}
			return 0, wire.NewError(wire.CodeShardUnavailable, "no raft leader accepted the proposal: %v", werr)
		}
	}
}

// errNoLeader is an internal marker: the command was certainly not taken.
var errNoLeader = errors.New("raftmeta: no leader")

// waitForChange waits for the next state change or a tick, whichever is
// first, so callers re-check leadership without spinning.
func (n *Node) waitForChange(ctx context.Context) error {
	t := time.NewTimer(n.cfg.TickInterval)
	defer t.Stop()
	select {
	case <-n.changed():
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.ctx.Done():
		return ErrClosed
	}
}

func outcomeUnknown(cause error) error {
	e := wire.NewError(wire.CodeQuorumTimeout, "proposal not confirmed: %v", cause)
	e.Retry = wire.RetryOutcomeUnknown
	return e
}

// ReadIndex is a linearizable read barrier: it returns once this member
// has applied everything the leader had committed when the call began, so
// a read of the local state machine afterwards sees every write
// acknowledged before the call.
func (n *Node) ReadIndex(ctx context.Context) error {
	if err := n.waitStarted(ctx); err != nil {
		return err
	}
	for {
		var idx uint64
		var err error
		switch lead := n.leader(); lead {
		case 0:
			err = errNoLeader
		case n.cfg.ID:
			idx, err = n.localReadIndex(ctx)
		default:
			idx, err = n.tr.readIndex(ctx, lead)
		}
		if err == nil {
			return n.waitApplied(ctx, idx)
		}
		if !errors.Is(err, errNoLeader) {
			return err
		}
		if werr := n.waitForChange(ctx); werr != nil {
			if errors.Is(werr, ErrClosed) {
				return werr
			}
			return wire.NewError(wire.CodeShardUnavailable, "no raft leader answered the read barrier: %v", werr)
		}
	}
}

// localReadIndex runs raft's ReadIndex on the leader and returns the commit
// index it confirmed with a quorum. raft may drop the request (leadership
// changing), so it is re-sent every election timeout.
func (n *Node) localReadIndex(ctx context.Context) (uint64, error) {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	key := string(b[:])
	ch := make(chan uint64, 1)
	n.mu.Lock()
	if len(n.reads) >= maxPending {
		n.mu.Unlock()
		return 0, wire.NewError(wire.CodeOverloaded, "too many reads in flight on member %d", n.cfg.ID)
	}
	n.reads[key] = ch
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.reads, key)
		n.mu.Unlock()
	}()
	for {
		if n.leader() != n.cfg.ID {
			return 0, errNoLeader
		}
		if err := n.rn.ReadIndex(ctx, b[:]); err != nil {
			return 0, err
		}
		t := time.NewTimer(n.electionTimeout())
		select {
		case idx := <-ch:
			t.Stop()
			return idx, nil
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-n.ctx.Done():
			t.Stop()
			return 0, ErrClosed
		}
	}
}
