// Package raftmeta is the control plane's replicated metadata store: a
// go.etcd.io/raft/v3 node whose log, hard state and snapshots live in one
// bbolt file (raft.db), driving a deterministic StateMachine, with an HTTP
// peer transport and follower-to-leader forwarding.
//
// # Usage
//
//	kv, _ := raftmeta.OpenKV(filepath.Join(dir, "kv.db")) // or catalog.OpenCatalog
//	n, err := raftmeta.Open(raftmeta.Config{ID: 1, Dir: dir, Peers: peers, FSM: kv, TLS: tlsConf})
//	res, err := n.Propose(ctx, cmd) // any member; returns after the LOCAL apply
//	err = n.ReadIndex(ctx)           // then read the local state machine linearizably
//	n.Close()                        // then close the state machine
//
// # The state machine
//
// A Node drives any fsm.StateMachine (package raftmeta/fsm: Apply,
// AppliedIndex, Snapshot, Restore, and optionally ApplyBatch); that leaf
// package also holds the logical bbolt snapshot format. The control
// plane's state machine is package raftmeta/catalog, which imports no
// Raft, transport or raft-log code. KV here is a small reference state
// machine for the node's tests.
//
// # The Ready loop (what is durable before which message is sent)
//
// One goroutine (run) owns the raft node and raft.db; a second (the apply
// goroutine) applies runs of committed normal entries to the state
// machine. For every Ready the run goroutine, in this order:
//
//  1. hands the Ready's MsgApp and MsgHeartbeat messages (only a leader
//     sends them) to the per-peer senders at once: the leader writes to its
//     disk in parallel with replicating (Raft thesis §10.2.1, as etcd raft
//     allows). This is safe because these messages promise nothing about
//     the leader's disk, and raft counts the leader's own acknowledgement
//     towards a commit only at Advance (step 7), after its save;
//  2. if the Ready carries a snapshot, waits until the apply goroutine has
//     applied everything queued, then restores the snapshot into the state
//     machine;
//  3. saves the snapshot, the new entries and the hard state to raft.db in
//     one bbolt transaction, which fsyncs on commit. A hard state that
//     differs from the stored one only in its commit index is not written
//     on its own (raft does not need the commit index durable); it rides
//     along with the next write or Close;
//  4. only then hands every other message to the senders. So a MsgAppResp
//     leaves only once the entries it acknowledges are in raft.db, a
//     MsgVoteResp (and MsgPreVoteResp) only once the term and vote it is
//     based on are, and a candidate's MsgVote only once its new term and
//     its vote for itself are: no member acknowledges an entry it could
//     lose, or votes twice in a term, across a crash;
//  5. hands the Ready's committed entries to be applied, never before step
//     3 (they may include entries saved in step 3). Runs of normal entries
//     are queued, in log order, to the apply goroutine, which applies them
//     in that order (a BatchApplier gets what is queued as one ApplyBatch). A
//     conf change waits until that queue is empty, then the run goroutine
//     applies it to raft and records the new ConfState in raft.db, before
//     any later entry is queued. So the state machine and raft see the
//     committed entries exactly in log order;
//  6. answers read-index waiters and, every SnapshotEvery applied entries,
//     waits for the apply queue to empty and takes a snapshot;
//  7. calls Advance.
//
// A proposal's waiter (Propose on the member that proposed the entry) is
// answered by the goroutine that applied the entry, right after the state
// machine's Apply or ApplyBatch returned for it, with its result or its
// deterministic error; an entry applied on another member answers no one
// here. A state machine failure that did not advance AppliedIndex stops
// the node, and its waiters get ErrClosed.
//
// Every SnapshotEvery applied entries the node reads a state machine
// snapshot, stores it in raft.db and compacts the log, keeping a tail of
// min(SnapshotEvery/2, 5000) entries for followers that are slightly
// behind. A follower behind the compaction point is sent the snapshot over
// POST /raft/snapshot (the message header, then the data bytes) and
// restores it.
//
// # Restart and the state machine's durability
//
// At restart raft resumes from raft.db with Applied set to the state
// machine's AppliedIndex (or the stored snapshot's index, whichever is
// higher). A state machine older than the stored snapshot is restored from
// it first; conf changes already recorded are skipped by index. So a state
// machine that loses its last few applies in a crash is repaired by
// re-applying them from the log; one whose Apply fails without advancing
// AppliedIndex stops the node.
//
// # Proposals and results
//
// Each entry is an envelope: a version byte, an 8-byte random proposal id
// and the command. The proposing member registers the id and waits until
// it applies that entry itself; then it returns Apply's result or its
// deterministic error. A follower sends the envelope to the leader as a
// MsgProp on its message stream (the leader only appends it to raft) and
// waits for its own apply, so whoever wrote through a member can read the
// write there at once, and results never cross the network. A leader of an
// earlier release gets envelopes on POST /raft/proposals or /raft/propose
// instead (forward.go). Hand-overs that certainly did not reach the
// leader's raft (no leader, refused connection, "not leader") are retried;
// a proposal still unapplied one election timeout after the leader changed,
// or whose caller's context ended, ends with wire code quorum_timeout and
// retry class outcome_unknown, because a command is never re-proposed
// blindly (the catalog's request ids make its re-proposals safe).
//
// ReadIndex asks the leader (directly or over POST /raft/readindex) for a
// quorum-confirmed commit index, then waits for the local apply to reach
// it.
//
// # A member that lost its data
//
// A member whose raft.db is empty probes its peers (GET /raft/status).
// If any peer has committed beyond the bootstrap entries, the group exists
// and this member must not vote: with an empty log it would vote for any
// candidate, including one missing acknowledged writes. It then:
//
//   - starts raft with no configuration (raft will not campaign), does not
//     tick its clock, and drops vote requests it receives;
//   - asks the leader (POST /raft/join, with a random token) to re-add it.
//     The leader first removes the id (raft's progress for the old log
//     must be forgotten: the leader would otherwise keep trusting indexes
//     the member no longer has), then adds it back as a learner with the
//     token in the conf change's context;
//   - catches up as a learner (entries or a snapshot). The leader promotes
//     a learner that is a configured peer once its acknowledged index is
//     within 16 entries of the leader's last index;
//   - resumes ticking and voting once it applies a configuration, newer
//     than its re-add, in which it is a voter.
//
// While one member is being replaced the group has one voter fewer, so a
// three-member group needs both other members until the promotion.
// Members heartbeat commit indexes are clamped to the local log, so a
// leader that remembers more of a wiped log than exists cannot crash it.
//
// When every peer answers that nothing was committed yet (or, after five
// election timeouts, a majority does), the members form a new group from
// the identical peer list. A wiped member that finds no peer at all keeps
// probing rather than forming a group alone.
//
// # Readiness
//
// Ready is true on the leader (CheckQuorum steps a leader down once it has
// not heard from a quorum for an election timeout) and on a voter that
// heard from the leader within the last election timeout; never while
// catching up.
//
// # Transport
//
// HTTP/2 over TLS with the configured tls.Config (plain HTTP/1.1 when TLS
// is nil, for tests). Endpoints: POST /raft/stream (a long-lived body of
// message batches; GET /raft/stream says whether a member has it and takes
// proposals on it), POST /raft/message (one batch of length-prefixed
// raftpb messages), POST /raft/snapshot, POST /raft/proposals and
// /raft/propose, POST /raft/readindex, POST /raft/join, GET /raft/status.
// Each peer has a
// queue of 4096 messages and one sender goroutine; a full queue drops the
// message and reports the peer unreachable to raft, and a failed send backs
// off exponentially from one tick to one election timeout, dropping what
// was queued meanwhile (raft retransmits). Snapshots are streamed by their
// own goroutine, one at a time per peer, and reported to raft.
//
// # Metrics
//
// felix_raft_term, felix_raft_commit_index, felix_raft_applied_index,
// felix_raft_is_leader, felix_raft_proposals_total,
// felix_raft_proposal_failures_total, felix_raft_snapshots_total,
// felix_raft_snapshots_installed_total, felix_raft_messages_dropped_total,
// each labelled member="<id>".
package raftmeta
