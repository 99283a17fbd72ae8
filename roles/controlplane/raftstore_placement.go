package controlplane

import (
	"context"

	"github.com/felixmq/felix/raftmeta/catalog"
	"github.com/felixmq/felix/wire"
)

// PlacementStore is the part of a Store that keeps the shard assignments
// (see docs/placement.md). Only the leader's placement loop writes them.
type PlacementStore interface {
	// PlacementInput reads, after a barrier and in one transaction, the
	// brokers, every stream and cache, and the placement.
	PlacementInput(ctx context.Context) (catalog.PlacementInput, error)
	// ApplyPlacement commits one placement pass; ErrConflict when the
	// placement changed since the pass read it (compute again).
	ApplyPlacement(ctx context.Context, ch catalog.PlacementChange) error
	// ResourcePlacement returns, after a barrier, one stream's or cache's
	// assignments in shard order and the generation counter.
	ResourcePlacement(ctx context.Context, kind, tenant, ns, name string) ([]wire.ShardAssignment, uint64, error)
	// ClusterState reads, after a barrier and in one transaction, the
	// brokers (deregistered left out) and the placement's revision and
	// counter, with every assignment when withAssignments is set.
	ClusterState(ctx context.Context, withAssignments bool) (catalog.ClusterState, error)
	// PlacementInputsChanged receives (one coalescing slot) when this
	// member applied a command that may change the placement's input.
	PlacementInputsChanged() <-chan struct{}
	// ClusterChanged is closed once this member commits a command that
	// may change what ClusterState reads; take it before the read.
	ClusterChanged() <-chan struct{}
	// LocalClusterState is ClusterState without assignments and without
	// the barrier: what this member has applied.
	LocalClusterState() (catalog.ClusterState, error)
}

var _ PlacementStore = (*RaftStore)(nil)

// PlacementInput implements PlacementStore.
func (s *RaftStore) PlacementInput(ctx context.Context) (catalog.PlacementInput, error) {
	return readAfter(ctx, s, s.cat.PlacementInput)
}

// ApplyPlacement implements PlacementStore.
func (s *RaftStore) ApplyPlacement(ctx context.Context, ch catalog.PlacementChange) error {
	_, err := s.propose(ctx, catalog.CmdApplyPlacement(ch))
	return err
}

// ResourcePlacement implements PlacementStore.
func (s *RaftStore) ResourcePlacement(ctx context.Context, kind, tenant, ns, name string) ([]wire.ShardAssignment, uint64, error) {
	type result struct {
		as  []wire.ShardAssignment
		gen uint64
	}
	r, err := readAfter(ctx, s, func() (result, error) {
		as, gen, err := s.cat.ResourcePlacement(kind, tenant, ns, name)
		return result{as, gen}, err
	})
	return r.as, r.gen, err
}

// PlacementInputsChanged implements PlacementStore.
func (s *RaftStore) PlacementInputsChanged() <-chan struct{} { return s.cat.PlacementInputsChanged() }

// ClusterState implements PlacementStore.
func (s *RaftStore) ClusterState(ctx context.Context, withAssignments bool) (catalog.ClusterState, error) {
	return readAfter(ctx, s, func() (catalog.ClusterState, error) { return s.cat.ClusterState(withAssignments) })
}

// ClusterChanged implements PlacementStore.
func (s *RaftStore) ClusterChanged() <-chan struct{} { return s.cat.ClusterChanged() }

// LocalClusterState implements PlacementStore.
func (s *RaftStore) LocalClusterState() (catalog.ClusterState, error) {
	return s.cat.ClusterState(false)
}
