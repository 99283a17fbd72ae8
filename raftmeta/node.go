package raftmeta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// ErrClosed is returned by calls on a closed Node.
var ErrClosed = errors.New("raftmeta: node closed")

// maxPending bounds the proposals and reads a member waits on at once;
// beyond it a call is refused with wire code overloaded.
const maxPending = 8192

// Node is one member of a Raft group driving a StateMachine. Its methods
// are safe for concurrent use.
type Node struct {
	cfg     Config
	log     *slog.Logger
	storage *Storage
	fsm     StateMachine
	tr      *transport
	met     *nodeMetrics

	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	// rn is set once by the run goroutine before startedC is closed; read
	// it only after startedC is closed.
	rn       raft.Node
	startedC chan struct{}

	// Owned by the apply goroutine while entries are queued for it, by the
	// run goroutine after drainApply.
	fsmApplied uint64 // state machine's applied index
	applyC     chan applyJob
	// Owned by the run goroutine only.
	lastSnapshot uint64 // raft index of the last snapshot taken or installed

	mu sync.Mutex // guards the fields below; never held while calling raft, fsm or storage
	// Invariant: applied <= commit.
	applied       uint64 // last log index processed by the apply loop
	commit        uint64
	term          uint64
	lead          uint64
	role          raft.StateType
	conf          *pb.ConfState
	confIndex     uint64        // log index that produced conf
	changedC      chan struct{} // closed and replaced whenever the fields above change
	leadC         chan struct{} // closed and replaced whenever lead changes
	pending       map[uint64]chan proposalResult
	reads         map[string]chan uint64
	leaderContact time.Time // last MsgApp/MsgHeartbeat/MsgSnap received
	catchingUp    bool      // joined with a wiped log: no votes, no ticks until promoted
	joinToken     uint64    // random id of this catch-up, carried in the learner conf change
	joinIndex     uint64    // log index of the conf change that re-added us as learner
	joinTokens    map[uint64]joinRecord
	installed     int // snapshots installed from the leader
}

type proposalResult struct {
	result []byte
	err    error
}

// Open starts a member: it opens raft.db in cfg.Dir, starts the peer
// listener and returns; joining or forming the group continues in the
// background (see the package documentation).
func Open(cfg Config) (*Node, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftmeta: data dir: %w", err)
	}
	st, err := OpenStorage(filepath.Join(cfg.Dir, "raft.db"))
	if err != nil {
		return nil, err
	}
	conf, confIndex := st.ConfState()
	n := &Node{
		cfg: cfg, log: cfg.Logger.With("raft_member", cfg.ID), storage: st, fsm: cfg.FSM,
		startedC: make(chan struct{}), applyC: make(chan applyJob, applyQueueLen), conf: conf, confIndex: confIndex, changedC: make(chan struct{}), leadC: make(chan struct{}),
		pending: map[uint64]chan proposalResult{}, reads: map[string]chan uint64{},
		joinTokens: map[uint64]joinRecord{},
	}
	n.ctx, n.cancel = context.WithCancelCause(context.Background())
	n.met = newNodeMetrics(n)
	tr, err := newTransport(n)
	if err != nil {
		n.cancel(err)
		n.met.close()
		st.Close()
		return nil, err
	}
	n.tr = tr
	n.wg.Add(1)
	go n.run()
	return n, nil
}

// Close stops the member and waits for every goroutine it started. The
// state machine is not closed (the caller owns it).
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.cancel(ErrClosed)
		n.tr.close()
		n.wg.Wait()
		n.met.close()
		n.closeErr = n.storage.Close()
	})
	return n.closeErr
}

// Addr returns the address the peer listener is bound to.
func (n *Node) Addr() string { return n.tr.addr() }

// Member is one member of the group as this node sees it.
type Member struct {
	ID      uint64 `json:"id"`
	URL     string `json:"url"`
	Voter   bool   `json:"voter"`
	Learner bool   `json:"learner"`
}

// Status is a member's view of the group.
type Status struct {
	ID          uint64   `json:"id"`
	Leader      uint64   `json:"leader"` // 0 when unknown
	Term        uint64   `json:"term"`
	Commit      uint64   `json:"commit"`
	Applied     uint64   `json:"applied"`
	Role        string   `json:"role"` // StateLeader, StateFollower, StateCandidate, StatePreCandidate
	Voter       bool     `json:"voter"`
	Learner     bool     `json:"learner"`
	Members     []Member `json:"members"`
	Initialized bool     `json:"initialized"` // raft is running (the group was formed or joined)
	CatchingUp  bool     `json:"catching_up"` // rejoined with a wiped log, not a voter yet
}

// Status returns the member's current view. It does not block on raft.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := Status{
		ID: n.cfg.ID, Leader: n.lead, Term: n.term, Commit: n.commit, Applied: n.applied,
		Role: n.role.String(), Initialized: n.started(), CatchingUp: n.catchingUp,
	}
	s.Voter = slices.Contains(n.conf.GetVoters(), n.cfg.ID)
	s.Learner = slices.Contains(n.conf.GetLearners(), n.cfg.ID)
	for _, id := range sortedIDs(n.cfg.Peers) {
		s.Members = append(s.Members, Member{
			ID: id, URL: n.cfg.Peers[id],
			Voter:   slices.Contains(n.conf.GetVoters(), id),
			Learner: slices.Contains(n.conf.GetLearners(), id),
		})
	}
	return s
}

// Ready reports whether this member is part of a working quorum: it is the
// leader (raft's CheckQuorum makes a leader that lost its quorum step down
// within an election timeout), or it is a voter that heard from a leader
// within the last election timeout. A member still catching up after a
// wipe is not ready.
func (n *Node) Ready() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.started() || n.catchingUp || !slices.Contains(n.conf.GetVoters(), n.cfg.ID) {
		return false
	}
	if n.role == raft.StateLeader {
		return true
	}
	return n.lead != 0 && time.Since(n.leaderContact) < n.electionTimeout()
}

func (n *Node) electionTimeout() time.Duration {
	return electionTicks * n.cfg.TickInterval
}

// started reports whether the raft node exists.
func (n *Node) started() bool {
	select {
	case <-n.startedC:
		return true
	default:
		return false
	}
}

// waitStarted waits until the raft node exists.
func (n *Node) waitStarted(ctx context.Context) error {
	select {
	case <-n.startedC:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.ctx.Done():
		return ErrClosed
	}
}

// notifyLocked wakes everyone waiting on changedC. Callers hold n.mu.
func (n *Node) notifyLocked() {
	close(n.changedC)
	n.changedC = make(chan struct{})
}

// changed returns a channel closed at the next state change.
func (n *Node) changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changedC
}

// leaderChanged is closed when the known leader next changes.
func (n *Node) leaderChanged() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leadC
}

// leader returns the known leader (0 when none).
func (n *Node) leader() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lead
}

// waitApplied returns once the apply loop has reached index.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	for {
		n.mu.Lock()
		done, ch := n.applied >= index, n.changedC
		n.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.ctx.Done():
			return ErrClosed
		}
	}
}
