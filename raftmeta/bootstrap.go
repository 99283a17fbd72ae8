package raftmeta

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
)

// startRaft decides how this member starts: restart from its own storage,
// form a brand-new group with every configured peer, or (storage empty
// while the group already has state) rejoin as a catching-up learner. It
// returns false when the node was closed first.
func (n *Node) startRaft() (raft.Node, bool) {
	n.fsmApplied = n.fsm.AppliedIndex()
	if !n.storage.IsEmpty() {
		applied, err := n.prepareRestart()
		if err != nil {
			n.log.Error("cannot restart raft", "err", err)
			n.cancel(err)
			return nil, false
		}
		token, err := n.storage.CatchUpToken()
		if err != nil {
			n.log.Error("cannot restart raft", "err", err)
			n.cancel(err)
			return nil, false
		}
		if token != 0 {
			n.mu.Lock()
			n.catchingUp, n.joinToken = true, token
			n.mu.Unlock()
			n.log.Warn("restarting in the middle of a catch-up: still not voting")
		}
		return raft.RestartNode(n.raftConfig(applied)), true
	}
	if len(n.cfg.Peers) == 1 {
		return n.startNew(), true
	}
	firstProbe := time.Now()
	for {
		switch n.probe(time.Since(firstProbe) > 5*n.electionTimeout()) {
		case probeNew:
			return n.startNew(), true
		case probeExisting:
			rn, err := n.startCatchUp()
			if err != nil {
				n.log.Error("cannot start catching up", "err", err)
				n.cancel(err)
				return nil, false
			}
			return rn, true
		}
		select {
		case <-n.ctx.Done():
			return nil, false
		case <-time.After(n.cfg.TickInterval):
		}
	}
}

func (n *Node) startNew() raft.Node {
	var peers []raft.Peer
	for _, id := range sortedIDs(n.cfg.Peers) {
		peers = append(peers, raft.Peer{ID: id})
	}
	n.log.Info("forming a new raft group", "members", len(peers))
	return raft.StartNode(n.raftConfig(0), peers)
}

// startCatchUp starts raft over the empty log without any configuration:
// raft will not campaign, the node does not tick and drops vote requests
// until the leader has re-added it as a learner and promoted it.
func (n *Node) startCatchUp() (raft.Node, error) {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	token := binary.BigEndian.Uint64(b[:]) | 1
	if err := n.storage.SetCatchUpToken(token); err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.catchingUp, n.joinToken = true, token
	n.mu.Unlock()
	n.log.Warn("raft storage is empty but the group has state: rejoining as a learner")
	return raft.RestartNode(n.raftConfig(0)), nil
}

// prepareRestart reconciles the state machine with raft storage and
// returns the index raft may consider applied. A state machine older than
// the stored snapshot (a crash between saving a received snapshot and
// restoring it) is restored from that snapshot.
func (n *Node) prepareRestart() (uint64, error) {
	snapIndex := n.storage.SnapshotIndex()
	if n.fsmApplied < snapIndex {
		snap, err := n.storage.Snapshot()
		if err != nil {
			return 0, err
		}
		if err := n.installSnapshot(snap); err != nil {
			return 0, err
		}
	}
	hs, _, _ := n.storage.InitialState()
	// Conf changes past this point are re-delivered and skipped by index
	// (applyConfChange); normal entries past it are re-applied.
	applied := max(n.fsmApplied, snapIndex)
	if applied > hs.GetCommit() {
		if snapIndex > hs.GetCommit() {
			return 0, fmt.Errorf("raftmeta: snapshot %d beyond commit %d", snapIndex, hs.GetCommit())
		}
		applied = hs.GetCommit()
	}
	n.lastSnapshot = snapIndex
	n.mu.Lock()
	n.applied, n.commit, n.term = applied, hs.GetCommit(), hs.GetTerm()
	n.mu.Unlock()
	return applied, nil
}

type probeResult int

const (
	probeUndecided probeResult = iota
	probeNew
	probeExisting
)

// probe asks every other peer for its status. The group exists when any
// peer has committed past the bootstrap entries or is itself catching up
// after a wipe. It is new when every peer answered without that, or (after
// a grace period) a majority did: a majority of members wiped at once while
// the rest are down is indistinguishable from a first start.
func (n *Node) probe(graceOver bool) probeResult {
	ctx, cancel := context.WithTimeout(n.ctx, n.electionTimeout())
	defer cancel()
	answered := 1 // this member
	for _, id := range sortedIDs(n.cfg.Peers) {
		if id == n.cfg.ID {
			continue
		}
		st, err := n.tr.status(ctx, id)
		if err != nil {
			continue
		}
		if st.CatchingUp || (st.Initialized && st.Commit > uint64(len(n.cfg.Peers))) {
			return probeExisting
		}
		answered++
	}
	if answered == len(n.cfg.Peers) || (graceOver && answered > len(n.cfg.Peers)/2) {
		return probeNew
	}
	return probeUndecided
}
