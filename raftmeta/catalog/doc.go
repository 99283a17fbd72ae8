// Package catalog is the control plane's replicated state machine, driven
// by a raftmeta.Node through the fsm.StateMachine contract. It imports no
// Raft, transport or raft-log code: only package fsm, wire and bbolt.
//
// Catalog is the control plane's StateMachine: tenants, namespaces,
// streams, caches and revocations (each with a live bucket and a change
// log whose bucket sequence is the feed cursor), a meta map, RBAC record
// buckets (policies, assignments), batch idempotency keys, the broker
// registry and the fleet feature gate (brokers.go), in one bbolt file
// with the applied index. Commands are versioned JSON built by the
// Cmd* functions; Apply never reads a clock (the proposer stamps times
// into the command). Not-found, conflict and malformed commands are
// deterministic outcomes (ErrNotFound, ErrConflict, ErrBadCommand): the
// command's writes are rolled back and the applied index still advances.
// A command marked WithRequestID is applied once: a later copy of it
// answers with the recorded outcome, so a proposer may re-propose a
// command whose fate it lost. Snapshots are the logical bbolt format, so
// members that applied the same commands produce identical bytes.
package catalog
