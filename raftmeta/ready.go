package raftmeta

import (
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// handleReady performs one Ready's duties in the order the package
// documentation's numbered list states: a leader's appends and heartbeats
// go out at once, then the snapshot is restored, then everything is saved,
// then every other message goes out, then committed entries are applied.
func (n *Node) handleReady(rd raft.Ready) error {
	n.noteSoftState(rd)
	early, late := splitBySave(rd.Messages)
	n.send(early)
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.drainApply(); err != nil {
			return err
		}
		if err := n.installSnapshot(rd.Snapshot); err != nil {
			return err
		}
	}
	if h := n.cfg.hooks; h != nil && h.beforeSave != nil {
		h.beforeSave(n, rd.HardState, rd.Entries)
	}
	if err := n.storage.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
		return err
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.afterSnapshotSaved(rd.Snapshot); err != nil {
			return err
		}
	}
	n.send(late)
	if err := n.apply(rd.CommittedEntries); err != nil {
		return err
	}
	n.deliverReads(rd.ReadStates)
	return n.maybeSnapshot()
}

// sendsBeforeSave reports whether m may leave before the Ready that
// carries it is saved. Only a leader sends MsgApp and MsgHeartbeat, and
// they promise nothing about its own disk: the leader counts itself
// towards a commit only when raft steps its self-acknowledgement, at
// Advance, after the save (Raft thesis §10.2.1; etcd raft's doc.go: "the
// leader can write to its disk in parallel with replicating to
// followers"). Everything else waits: MsgAppResp, MsgVoteResp and
// MsgPreVoteResp promise stored entries and a stored term and vote, and a
// candidate's MsgVote announces a term it must not forget.
func sendsBeforeSave(m *pb.Message) bool {
	t := m.GetType()
	return t == pb.MsgApp || t == pb.MsgHeartbeat
}

// splitBySave splits a Ready's messages into those sent before its save
// and those sent after, each in the Ready's order.
func splitBySave(msgs []*pb.Message) (early, late []*pb.Message) {
	for _, m := range msgs {
		if sendsBeforeSave(m) {
			early = append(early, m)
		} else {
			late = append(late, m)
		}
	}
	return early, late
}

// send hands messages to the per-peer senders.
func (n *Node) send(msgs []*pb.Message) {
	if len(msgs) == 0 {
		return
	}
	if h := n.cfg.hooks; h != nil && h.onSend != nil {
		for _, m := range msgs {
			h.onSend(n, m)
		}
	}
	n.tr.send(msgs)
}

// readyHooks are test seams in the Ready loop. Both run on the Ready loop
// goroutine, so a hook that blocks holds the loop exactly there.
type readyHooks struct {
	// beforeSave runs just before a Ready's save to raft.db.
	beforeSave func(n *Node, hs *pb.HardState, ents []*pb.Entry)
	// onSend sees each message as it is handed to the transport.
	onSend func(n *Node, m *pb.Message)
}
