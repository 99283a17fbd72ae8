package raftmeta

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/felixmq/felix/wire"
)

// promoteLag is how far (in entries) behind the leader's last index a
// learner's acknowledged index may be when the leader promotes it.
const promoteLag = 16

// joinRecord remembers which catch-up (token) re-added a member as a
// learner, and at which log index.
type joinRecord struct {
	token, index uint64
}

// applyConfChange applies a committed configuration change to raft and
// records the resulting configuration durably.
func (n *Node) applyConfChange(e *pb.Entry) error {
	if _, confIndex := n.storage.ConfState(); e.GetIndex() <= confIndex {
		return nil // applied before a restart
	}
	cc, err := decodeConfChange(e)
	if err != nil {
		n.log.Error("skipping undecodable conf change", "index", e.GetIndex(), "err", err)
		return nil
	}
	cs := n.rn.ApplyConfChange(cc)
	if err := n.storage.SetConfState(cs, e.GetIndex()); err != nil {
		return err
	}
	n.mu.Lock()
	n.noteJoinLocked(cc.AsV2(), e.GetIndex())
	ended := n.setConfLocked(cs, e.GetIndex())
	n.mu.Unlock()
	return n.endCatchUp(ended)
}

// endCatchUp durably clears the catch-up marker once a catch-up ended.
func (n *Node) endCatchUp(ended bool) error {
	if !ended {
		return nil
	}
	return n.storage.SetCatchUpToken(0)
}

func decodeConfChange(e *pb.Entry) (pb.ConfChangeI, error) {
	if e.GetType() == pb.EntryConfChange {
		cc := &pb.ConfChange{}
		return cc, proto.Unmarshal(e.GetData(), cc)
	}
	cc := &pb.ConfChangeV2{}
	return cc, proto.Unmarshal(e.GetData(), cc)
}

// noteJoinLocked records a learner re-add carrying a join token.
func (n *Node) noteJoinLocked(cc *pb.ConfChangeV2, index uint64) {
	if len(cc.GetContext()) != 8 {
		return
	}
	token := binary.BigEndian.Uint64(cc.GetContext())
	for _, c := range cc.GetChanges() {
		if c.GetType() != pb.ConfChangeAddLearnerNode {
			continue
		}
		n.joinTokens[c.GetNodeId()] = joinRecord{token: token, index: index}
		if c.GetNodeId() == n.cfg.ID && token == n.joinToken && n.joinIndex == 0 {
			n.joinIndex = index
		}
	}
}

// setConfLocked installs the configuration in force after index. It
// reports whether that ended a catch-up (see endCatchUp).
func (n *Node) setConfLocked(cs *pb.ConfState, index uint64) bool {
	n.conf, n.confIndex = cs, index
	return n.maybeEndCatchUpLocked()
}

// maybeEndCatchUpLocked ends a catch-up once this member is a voter in a
// configuration newer than the one that re-added it as a learner.
func (n *Node) maybeEndCatchUpLocked() bool {
	if !n.catchingUp || n.joinIndex == 0 || n.confIndex <= n.joinIndex || !slices.Contains(n.conf.GetVoters(), n.cfg.ID) {
		return false
	}
	n.catchingUp = false
	n.log.Info("caught up after rejoining; voting again", "conf_index", n.confIndex)
	n.notifyLocked()
	return true
}

// supervise runs the slow membership duties: a catching-up member asks the
// leader to re-add it, and the leader promotes caught-up learners.
func (n *Node) supervise() {
	defer n.wg.Done()
	t := time.NewTicker(n.electionTimeout() / 2)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		n.mu.Lock()
		needJoin := n.catchingUp && n.joinIndex == 0
		isLeader := n.lead == n.cfg.ID
		n.mu.Unlock()
		if needJoin {
			n.requestJoin()
		}
		if isLeader {
			n.promoteLearners()
		}
	}
}

// requestJoin asks the leader (or, when none is known, each peer in turn,
// since non-leaders answer with the leader's id) to re-add us.
func (n *Node) requestJoin() {
	ctx, cancel := context.WithTimeout(n.ctx, 5*n.electionTimeout())
	defer cancel()
	n.mu.Lock()
	token, lead := n.joinToken, n.lead
	n.mu.Unlock()
	targets := sortedIDs(n.cfg.Peers)
	if lead != 0 && lead != n.cfg.ID {
		targets = []uint64{lead}
	}
	for _, to := range targets {
		if to == n.cfg.ID {
			continue
		}
		idx, err := n.tr.join(ctx, to, n.cfg.ID, token)
		if err != nil {
			n.log.Debug("join request failed", "to", to, "err", err)
			continue
		}
		n.mu.Lock()
		ended := false
		if n.joinIndex == 0 {
			n.joinIndex = idx
			ended = n.maybeEndCatchUpLocked()
		}
		n.mu.Unlock()
		if err := n.endCatchUp(ended); err != nil {
			n.log.Error("clearing the catch-up marker failed", "err", err)
		}
		return
	}
}

// handleJoin runs on the leader for a member that restarted with a wiped
// log: the member is removed (dropping raft's memory of how far its old log
// went) and added back as a learner carrying its join token. It returns the
// index of the learner conf change.
func (n *Node) handleJoin(ctx context.Context, id, token uint64) (uint64, error) {
	if _, ok := n.cfg.Peers[id]; !ok || id == n.cfg.ID {
		return 0, wire.NewError(wire.CodeInvalidRequest, "member %d is not a peer", id)
	}
	if n.leader() != n.cfg.ID {
		return 0, notLeaderError(n.leader())
	}
	n.tr.joinMu.Lock()
	defer n.tr.joinMu.Unlock()
	if rec, ok := n.joinRecord(id); ok && rec.token == token {
		return rec.index, nil
	}
	if n.inConf(id) {
		if voters := n.voters(); len(voters) == 1 && voters[0] == id {
			return 0, wire.NewError(wire.CodeInvalidRequest, "member %d is the only voter", id)
		}
		remove := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: new(id)}}}
		if err := n.proposeConfAndWait(ctx, remove, func() bool { return !n.inConf(id) }); err != nil {
			return 0, err
		}
	}
	add := &pb.ConfChangeV2{
		Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeAddLearnerNode.Enum(), NodeId: new(id)}},
		Context: binary.BigEndian.AppendUint64(nil, token),
	}
	done := func() bool { rec, ok := n.joinRecord(id); return ok && rec.token == token }
	if err := n.proposeConfAndWait(ctx, add, done); err != nil {
		return 0, err
	}
	rec, _ := n.joinRecord(id)
	n.log.Info("re-added wiped member as learner", "member", id, "index", rec.index)
	return rec.index, nil
}

func (n *Node) joinRecord(id uint64) (joinRecord, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	rec, ok := n.joinTokens[id]
	return rec, ok
}

func (n *Node) inConf(id uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Contains(n.conf.GetVoters(), id) || slices.Contains(n.conf.GetLearners(), id)
}

func (n *Node) voters() []uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.conf.GetVoters())
}

// proposeConfAndWait proposes cc until done reports it applied. raft drops
// a conf change silently while another is pending, hence the retries.
func (n *Node) proposeConfAndWait(ctx context.Context, cc *pb.ConfChangeV2, done func() bool) error {
	for !done() {
		if n.leader() != n.cfg.ID {
			return notLeaderError(n.leader())
		}
		if err := n.rn.ProposeConfChange(ctx, cc); err != nil {
			return fmt.Errorf("raftmeta: conf change: %w", err)
		}
		wait, cancel := context.WithTimeout(ctx, 2*n.electionTimeout())
		for !done() && wait.Err() == nil {
			select {
			case <-n.changed():
			case <-wait.Done():
			case <-n.ctx.Done():
				cancel()
				return ErrClosed
			}
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// promoteLearners turns learners that are configured peers into voters
// once their log is within promoteLag entries of the leader's.
func (n *Node) promoteLearners() {
	n.mu.Lock()
	learners := slices.Clone(n.conf.GetLearners())
	n.mu.Unlock()
	if len(learners) == 0 {
		return
	}
	st := n.rn.Status()
	last, _ := n.storage.LastIndex()
	for _, id := range learners {
		pr, ok := st.Progress[id]
		if _, peer := n.cfg.Peers[id]; !ok || !peer || pr.Match+promoteLag < last {
			continue
		}
		cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeAddNode.Enum(), NodeId: new(id)}}}
		if err := n.rn.ProposeConfChange(n.ctx, cc); err != nil {
			n.log.Debug("promotion proposal failed", "member", id, "err", err)
			return
		}
		n.log.Info("promoting caught-up learner", "member", id, "match", pr.Match, "last", last)
		return // one conf change at a time
	}
}
