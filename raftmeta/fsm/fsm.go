// Package fsm is the contract between a Raft node (package raftmeta) and
// the replicated state machine it drives, and the logical snapshot format
// of state machines kept in bbolt. It is a leaf: a state machine imports
// it and no Raft, transport or raft-log code.
//
// The node calls Apply (or ApplyBatch) for every committed command in log
// order from one goroutine at a time, never concurrently with Snapshot or
// Restore; the package raftmeta documentation says which goroutine and
// when.
package fsm

import (
	"io"
)

// StateMachine is the replicated state a node drives. The node calls Apply
// for every committed command in log order, one call at a time, and never
// concurrently with Snapshot or Restore.
//
// Errors: Apply's error is part of the replicated outcome when it is
// deterministic (the same on every member, e.g. "already exists"); such an
// error must still advance AppliedIndex to index. If Apply returns an error
// and AppliedIndex has NOT reached index, the node takes it for a local
// failure (a disk error) and stops, because continuing would let this
// member's state diverge.
type StateMachine interface {
	// Apply applies the command committed at index and returns its result
	// (handed back to the proposer as is) or a deterministic error. A
	// command at or below AppliedIndex must be ignored.
	Apply(index uint64, cmd []byte) (result []byte, err error)
	// AppliedIndex returns the index of the last applied command, persisted
	// together with the state so that a restart does not re-apply.
	AppliedIndex() uint64
	// Snapshot returns a consistent copy of the whole state and the applied
	// index it reflects. The caller closes the reader.
	Snapshot() (io.ReadCloser, uint64, error)
	// Restore replaces the whole state (and the applied index) with a
	// snapshot produced by Snapshot, atomically.
	Restore(r io.Reader) error
}

// BatchApplier is a StateMachine that can apply several committed entries
// in one durable step (one transaction, one fsync). The node hands it all
// the normal entries of one Ready at once. The results must be exactly
// what Apply would have returned entry by entry, and a non-deterministic
// failure is returned as the error, with the results of the entries before
// it.
type BatchApplier interface {
	ApplyBatch(entries []BatchEntry) ([]BatchResult, error)
}

// BatchEntry is one committed command for ApplyBatch.
type BatchEntry struct {
	Index uint64
	Cmd   []byte
}

// BatchResult is what Apply would have returned for one entry.
type BatchResult struct {
	Result []byte
	Err    error
}
