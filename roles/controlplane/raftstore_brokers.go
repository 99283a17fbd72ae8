package controlplane

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/felixmq/felix/raftmeta/catalog"
	"github.com/felixmq/felix/wire"
)

// BrokerRegistry is the part of a Store that keeps the broker registry
// and the fleet feature gate. Times are Unix milliseconds on the caller's
// clock: the store never reads one.
type BrokerRegistry interface {
	// RegisterBroker records a broker's registration at atMs and returns
	// its record (ErrConflict for a duplicate node id or a missing
	// finalized feature).
	RegisterBroker(ctx context.Context, reg wire.BrokerRegistration, atMs int64) (wire.Broker, error)
	// HeartbeatBroker records a live broker's heartbeat at atMs, its
	// suspects and its positions, stamped with the storage identity it is
	// registered with (ErrNotFound when unknown, ErrConflict when down,
	// deregistered or under another storage identity).
	HeartbeatBroker(ctx context.Context, hb wire.BrokerHeartbeat, atMs int64) (wire.Broker, error)
	// MarkBrokerDown marks a live broker down unless it heartbeated after
	// seenHeartbeatMs; it reports whether it did.
	MarkBrokerDown(ctx context.Context, nodeID string, seenHeartbeatMs, atMs int64) (bool, error)
	// DeregisterBroker removes a broker from the fleet (ErrNotFound when unknown).
	DeregisterBroker(ctx context.Context, nodeID string) error
	// Brokers lists every broker record, ordered by node id.
	Brokers(ctx context.Context) ([]wire.Broker, error)
	// FleetFeatures returns the feature gate.
	FleetFeatures(ctx context.Context) (wire.FleetFeaturesView, error)
	// FinalizeFeatures turns features on (none: every supported one).
	FinalizeFeatures(ctx context.Context, features []string) error
}

var _ BrokerRegistry = (*RaftStore)(nil)

// RegisterBroker implements BrokerRegistry.
func (s *RaftStore) RegisterBroker(ctx context.Context, reg wire.BrokerRegistration, atMs int64) (wire.Broker, error) {
	return brokerResult(s.propose(ctx, catalog.CmdRegisterBroker(reg, atMs)))
}

// HeartbeatBroker implements BrokerRegistry.
func (s *RaftStore) HeartbeatBroker(ctx context.Context, hb wire.BrokerHeartbeat, atMs int64) (wire.Broker, error) {
	return brokerResult(s.propose(ctx, catalog.CmdHeartbeatBrokerReport(hb, atMs)))
}

// MarkBrokerDown implements BrokerRegistry.
func (s *RaftStore) MarkBrokerDown(ctx context.Context, nodeID string, seenHeartbeatMs, atMs int64) (bool, error) {
	res, err := s.propose(ctx, catalog.CmdMarkBrokerDown(nodeID, seenHeartbeatMs, atMs))
	return string(res) == "1", err
}

// DeregisterBroker implements BrokerRegistry.
func (s *RaftStore) DeregisterBroker(ctx context.Context, nodeID string) error {
	_, err := s.propose(ctx, catalog.CmdDeregisterBroker(nodeID))
	return err
}

// Brokers implements BrokerRegistry.
func (s *RaftStore) Brokers(ctx context.Context) ([]wire.Broker, error) {
	return readAfter(ctx, s, s.cat.Brokers)
}

// FleetFeatures implements BrokerRegistry.
func (s *RaftStore) FleetFeatures(ctx context.Context) (wire.FleetFeaturesView, error) {
	return readAfter(ctx, s, s.cat.FleetFeatures)
}

// FinalizeFeatures implements BrokerRegistry.
func (s *RaftStore) FinalizeFeatures(ctx context.Context, features []string) error {
	_, err := s.propose(ctx, catalog.CmdFinalizeFeatures(features))
	return err
}

func brokerResult(res []byte, err error) (wire.Broker, error) {
	var br wire.Broker
	if err != nil {
		return br, err
	}
	if err := json.Unmarshal(res, &br); err != nil {
		return br, fmt.Errorf("broker registry: decode the record: %w", err)
	}
	return br, nil
}
