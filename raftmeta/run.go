package raftmeta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// maxSnapshotBytes bounds a state machine snapshot held in memory.
const maxSnapshotBytes = 1 << 30

// run is the node's owning goroutine: it decides how to start raft, then
// drives the Ready loop until Close.
func (n *Node) run() {
	defer n.wg.Done()
	rn, ok := n.startRaft()
	if !ok {
		return
	}
	n.rn = rn
	close(n.startedC)
	n.wg.Add(2)
	go n.supervise()
	go n.applyLoop()
	defer rn.Stop()
	ticker := time.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-ticker.C:
			if !n.isCatchingUp() {
				rn.Tick()
			}
		case rd := <-rn.Ready():
			if err := n.handleReady(rd); err != nil {
				n.log.Error("raft node stopping after a local failure", "err", err)
				n.cancel(err)
				return
			}
			rn.Advance()
		}
	}
}

func (n *Node) isCatchingUp() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.catchingUp
}

// raftConfig is the raft configuration shared by every start path.
func (n *Node) raftConfig(applied uint64) *raft.Config {
	return &raft.Config{
		ID:                        n.cfg.ID,
		ElectionTick:              electionTicks,
		HeartbeatTick:             heartbeatTicks,
		Storage:                   n.storage,
		Applied:                   applied,
		MaxSizePerMsg:             1 << 20,
		MaxInflightMsgs:           256,
		MaxUncommittedEntriesSize: 64 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		// A follower's raft never forwards: the member sends MsgProp itself
		// (forward.go). Raft's own forwarding stops for good on a member
		// that was removed and re-added until the leader changes.
		DisableProposalForwarding: true,
		Logger:                    raftLogger{n.log},
	}
}

// applyQueueLen bounds the Readys of committed entries waiting for the
// apply goroutine; beyond it the Ready loop waits, which slows raft.
const applyQueueLen = 64

// applyJob is one Ready's committed normal entries, or (ents nil) a
// barrier that the apply goroutine closes once everything before it is
// applied.
type applyJob struct {
	ents    []*pb.Entry
	drained chan struct{}
}

// apply hands committed entries to the state machine. Runs of normal
// entries go to the apply goroutine, so the state machine's commit
// overlaps the next Ready's write (etcd does the same). A configuration
// change is applied here, after everything before it: raft must see it
// before the next Ready, and it touches raft storage, which only this
// goroutine writes.
func (n *Node) apply(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	if !slices.ContainsFunc(ents, func(e *pb.Entry) bool { return e.GetType() != pb.EntryNormal }) {
		return n.enqueueApply(applyJob{ents: ents})
	}
	if err := n.drainApply(); err != nil {
		return err
	}
	return n.applyCommitted(ents)
}

func (n *Node) enqueueApply(j applyJob) error {
	select {
	case n.applyC <- j:
		return nil
	case <-n.ctx.Done():
		return context.Cause(n.ctx)
	}
}

// drainApply returns once the apply goroutine has applied everything
// queued; until the next enqueue, the caller owns the state machine.
func (n *Node) drainApply() error {
	done := make(chan struct{})
	if err := n.enqueueApply(applyJob{drained: done}); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-n.ctx.Done():
		return context.Cause(n.ctx)
	}
}

// applyLoop applies queued entries in order. Whatever has queued up while
// it was busy goes to the state machine as one batch (one commit).
func (n *Node) applyLoop() {
	defer n.wg.Done()
	var ents []*pb.Entry
	for {
		var j applyJob
		select {
		case j = <-n.applyC:
		case <-n.ctx.Done():
			return
		}
		ents = append(ents[:0], j.ents...)
		barrier := j.drained
	more:
		for barrier == nil {
			select {
			case j = <-n.applyC:
				ents = append(ents, j.ents...)
				barrier = j.drained
			default:
				break more
			}
		}
		if err := n.applyCommitted(ents); err != nil {
			n.log.Error("raft node stopping after a state machine failure", "err", err)
			n.cancel(err)
			return
		}
		clear(ents)
		if barrier != nil {
			close(barrier)
		}
	}
}

func (n *Node) noteSoftState(rd raft.Ready) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if rd.SoftState != nil {
		if rd.SoftState.Lead != n.lead {
			close(n.leadC)
			n.leadC = make(chan struct{})
		}
		n.lead, n.role = rd.SoftState.Lead, rd.SoftState.RaftState
	}
	if rd.HardState != nil && !raft.IsEmptyHardState(rd.HardState) {
		n.term, n.commit = rd.HardState.GetTerm(), rd.HardState.GetCommit()
	}
	n.met.observe(n.term, n.commit, n.applied, n.role == raft.StateLeader)
	n.notifyLocked()
}

// installSnapshot replaces the state machine with a snapshot received from
// the leader. It runs before the snapshot is saved to raft storage; a
// crash between the two is repaired at restart (see restartApplied).
func (n *Node) installSnapshot(snap *pb.Snapshot) error {
	if err := n.fsm.Restore(bytes.NewReader(snap.GetData())); err != nil {
		return fmt.Errorf("raftmeta: restore snapshot at %d: %w", snap.GetMetadata().GetIndex(), err)
	}
	n.fsmApplied = n.fsm.AppliedIndex()
	n.met.snapshotsInstalled.Inc()
	return nil
}

func (n *Node) afterSnapshotSaved(snap *pb.Snapshot) error {
	idx := snap.GetMetadata().GetIndex()
	n.lastSnapshot = idx
	cs := pb.EnsureConfState(snap.GetMetadata().GetConfState())
	n.mu.Lock()
	n.installed++
	n.applied = max(n.applied, idx)
	n.commit = max(n.commit, idx)
	ended := n.setConfLocked(cs, idx)
	n.notifyLocked()
	n.mu.Unlock()
	return n.endCatchUp(ended)
}

// applyCommitted applies a Ready's committed entries in order. With a
// BatchApplier, each run of normal entries goes to the state machine in
// one call, so one fsync covers them all.
func (n *Node) applyCommitted(ents []*pb.Entry) error {
	ba, batching := n.fsm.(BatchApplier)
	for i := 0; i < len(ents); {
		if !batching || ents[i].GetType() != pb.EntryNormal {
			if err := n.applyEntry(ents[i]); err != nil {
				return err
			}
			i++
			continue
		}
		j := i + 1
		for j < len(ents) && ents[j].GetType() == pb.EntryNormal {
			j++
		}
		if err := n.applyNormalBatch(ba, ents[i:j]); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// applyNormalBatch applies a run of normal entries with one ApplyBatch and
// answers their proposers.
func (n *Node) applyNormalBatch(ba BatchApplier, ents []*pb.Entry) error {
	var batch []BatchEntry
	var ids []uint64
	for _, e := range ents {
		if len(e.GetData()) == 0 || e.GetIndex() <= n.fsmApplied {
			continue
		}
		id, cmd, err := decodeEnvelope(e.GetData())
		if err != nil {
			n.log.Error("skipping undecodable entry", "index", e.GetIndex(), "err", err)
			continue
		}
		batch = append(batch, BatchEntry{Index: e.GetIndex(), Cmd: cmd})
		ids = append(ids, id)
	}
	if len(batch) > 0 {
		results, err := ba.ApplyBatch(batch)
		for k, r := range results {
			n.fsmApplied = batch[k].Index
			n.answer(ids[k], proposalResult{result: r.Result, err: r.Err})
		}
		if err != nil {
			return fmt.Errorf("raftmeta: state machine failed in a batch: %w", err)
		}
	}
	last := ents[len(ents)-1].GetIndex()
	n.mu.Lock()
	n.applied = last
	n.commit = max(n.commit, n.applied)
	n.met.observe(n.term, n.commit, n.applied, n.role == raft.StateLeader)
	n.notifyLocked()
	n.mu.Unlock()
	return nil
}

// answer hands a proposal's outcome to its waiting proposer, if any.
func (n *Node) answer(id uint64, r proposalResult) {
	n.mu.Lock()
	ch := n.pending[id]
	delete(n.pending, id)
	n.mu.Unlock()
	if ch != nil {
		ch <- r // buffered, one send per id
	}
}

// applyEntry applies one committed entry.
func (n *Node) applyEntry(e *pb.Entry) error {
	var err error
	switch e.GetType() {
	case pb.EntryNormal:
		err = n.applyNormal(e)
	case pb.EntryConfChange, pb.EntryConfChangeV2:
		err = n.applyConfChange(e)
	}
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.applied = e.GetIndex()
	n.commit = max(n.commit, n.applied)
	n.met.observe(n.term, n.commit, n.applied, n.role == raft.StateLeader)
	n.notifyLocked()
	n.mu.Unlock()
	return nil
}

func (n *Node) applyNormal(e *pb.Entry) error {
	if len(e.GetData()) == 0 || e.GetIndex() <= n.fsmApplied {
		return nil // a leader's empty entry, or applied before a restart
	}
	id, cmd, err := decodeEnvelope(e.GetData())
	if err != nil {
		// Every member sees the same bytes, so skipping is deterministic.
		n.log.Error("skipping undecodable entry", "index", e.GetIndex(), "err", err)
		return nil
	}
	result, applyErr := n.fsm.Apply(e.GetIndex(), cmd)
	if applyErr != nil && n.fsm.AppliedIndex() < e.GetIndex() {
		return fmt.Errorf("raftmeta: state machine failed at index %d: %w", e.GetIndex(), applyErr)
	}
	n.fsmApplied = e.GetIndex()
	n.answer(id, proposalResult{result: result, err: applyErr})
	return nil
}

func (n *Node) deliverReads(states []raft.ReadState) {
	if len(states) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, rs := range states {
		if ch := n.reads[string(rs.RequestCtx)]; ch != nil {
			select {
			case ch <- rs.Index:
			default:
			}
		}
	}
}

// maybeSnapshot takes a snapshot every SnapshotEvery applied entries and
// compacts the log behind it, keeping a tail for slightly slow followers.
func (n *Node) maybeSnapshot() error {
	n.mu.Lock()
	applied := n.applied
	n.mu.Unlock()
	if applied < n.lastSnapshot+n.cfg.SnapshotEvery {
		return nil
	}
	if err := n.drainApply(); err != nil {
		return err
	}
	n.mu.Lock()
	applied, cs := n.applied, n.conf
	n.mu.Unlock()
	rc, _, err := n.fsm.Snapshot()
	if err != nil {
		return fmt.Errorf("raftmeta: state machine snapshot: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(rc, maxSnapshotBytes+1))
	closeErr := rc.Close()
	if err == nil && len(data) > maxSnapshotBytes {
		err = fmt.Errorf("snapshot over %d bytes", maxSnapshotBytes)
	}
	if err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("raftmeta: state machine snapshot: %w", err)
	}
	// Entries between the state machine's index and applied are empty or
	// conf changes, so the state at applied is the state just read.
	if _, err := n.storage.CreateSnapshot(applied, cs, data); err != nil {
		return err
	}
	n.lastSnapshot = applied
	n.met.snapshots.Inc()
	tail := min(max(n.cfg.SnapshotEvery/2, 1), 5000)
	if applied > tail {
		if err := n.storage.Compact(applied - tail); err != nil && !errors.Is(err, raft.ErrCompacted) {
			return err
		}
	}
	return nil
}
