package raftmeta

import "github.com/felixmq/felix/raftmeta/fsm"

// The state machine contract lives in the leaf package fsm, so a state
// machine (such as package catalog) needs no Raft code; these names keep
// it reachable from here.
type (
	// StateMachine is fsm.StateMachine: what a Node drives.
	StateMachine = fsm.StateMachine
	// BatchApplier is fsm.BatchApplier.
	BatchApplier = fsm.BatchApplier
	// BatchEntry is fsm.BatchEntry.
	BatchEntry = fsm.BatchEntry
	// BatchResult is fsm.BatchResult.
	BatchResult = fsm.BatchResult
)
