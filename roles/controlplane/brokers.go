package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// Bounds of a broker registration.
const (
	maxClientAddrs  = 8
	maxAddrLen      = 256
	maxFeatures     = 64
	maxFeatureLen   = 64
	maxFinalizeList = 64
)

// RegisterBroker registers a broker, stamped with this member's clock. It
// is also the in-process registration of the broker of `felix serve`.
func (s *Service) RegisterBroker(ctx context.Context, reg wire.BrokerRegistration) (wire.Broker, error) {
	if err := validateRegistration(reg); err != nil {
		return wire.Broker{}, err
	}
	br, err := s.store.RegisterBroker(ctx, reg, s.now().UnixMilli())
	if err != nil {
		return br, registryErr(err)
	}
	s.log.Info("broker registered", "node_id", br.NodeID, "addrs", br.ClientAddrs, "zone", br.Zone,
		"storage_id", br.StorageID, "registrations", br.Registrations)
	br.ExpiryTimeoutMs = s.expiryTimeoutMs.Load()
	return br, nil
}

// HeartbeatBroker records a heartbeat, stamped with this member's clock.
func (s *Service) HeartbeatBroker(ctx context.Context, hb wire.BrokerHeartbeat) (wire.Broker, error) {
	var p problems
	p.name("node_id", hb.NodeID)
	p.name("storage_id", hb.StorageID)
	if len(hb.Suspects) > wire.MaxSuspects {
		p.add("suspects", "%d entries; at most %d", len(hb.Suspects), wire.MaxSuspects)
	}
	validatePositions(&p, hb.Positions)
	if err := p.err(); err != nil {
		return wire.Broker{}, err
	}
	br, err := s.store.HeartbeatBroker(ctx, hb, s.now().UnixMilli())
	if err != nil {
		return br, registryErr(err)
	}
	br.ExpiryTimeoutMs = s.expiryTimeoutMs.Load()
	return br, nil
}

// validatePositions checks a heartbeat's positions: at most
// wire.MaxPositions, each naming a shard (kind stream or cache, tenant,
// namespace and name) at a generation, a leader's end not short of its
// durable offset. Only the first bad entry is named.
func validatePositions(p *problems, ps []wire.ShardPosition) {
	if len(ps) > wire.MaxPositions {
		p.add("positions", "%d entries; at most %d", len(ps), wire.MaxPositions)
		return
	}
	for i, sp := range ps {
		var why string
		switch {
		case sp.Kind != wire.PlacementStream && sp.Kind != wire.PlacementCache:
			why = fmt.Sprintf("kind %q (want stream or cache)", sp.Kind)
		case sp.TenantID == "" || sp.Namespace == "" || sp.Name == "":
			why = "tenant_id, namespace and name are required"
		case len(sp.TenantID)+len(sp.Namespace)+len(sp.Name) > 3*maxAddrLen:
			why = "names too long"
		case sp.Generation == 0:
			why = "generation 0"
		case sp.Leader && sp.End < sp.Durable:
			why = fmt.Sprintf("a leader's end %d short of its durable offset %d", sp.End, sp.Durable)
		case !sp.Leader && sp.End != 0:
			why = "end is a leader's field"
		}
		if why != "" {
			p.add("positions", "entry %d (%s/%s/%s shard %d): %s", i, sp.TenantID, sp.Namespace, sp.Name, sp.Shard, why)
			return
		}
	}
}

// DeregisterBroker removes a broker from the fleet. A broker that is
// still running registers again at its next heartbeat: stop it first.
func (s *Service) DeregisterBroker(ctx context.Context, nodeID string) error {
	var p problems
	p.name("node_id", nodeID)
	if err := p.err(); err != nil {
		return err
	}
	if err := s.store.DeregisterBroker(ctx, nodeID); err != nil {
		return registryErr(err)
	}
	s.log.Info("broker deregistered", "node_id", nodeID)
	return nil
}

// registryErr turns the registry's refusals into typed errors (code
// conflict or not_found, retry class fatal), the same a broker gets over
// HTTP, so an in-process broker tells them apart the same way.
func registryErr(err error) error {
	switch {
	case errors.Is(err, ErrConflict):
		return &wire.Error{Code: codeConflict, Retry: wire.RetryFatal, Message: err.Error()}
	case errors.Is(err, ErrNotFound):
		return &wire.Error{Code: wire.CodeNotFound, Retry: wire.RetryFatal, Message: err.Error()}
	}
	return err
}

func validateRegistration(reg wire.BrokerRegistration) error {
	var p problems
	p.name("node_id", reg.NodeID)
	p.name("storage_id", reg.StorageID)
	if reg.CrashedStorageID != "" {
		p.name("crashed_storage_id", reg.CrashedStorageID)
		if reg.CrashedStorageID == reg.StorageID {
			p.add("crashed_storage_id", "is the storage_id; it names the identity replaced by this one")
		}
	}
	if n := len(reg.ClientAddrs); n == 0 || n > maxClientAddrs {
		p.add("client_addrs", "%d addresses; send 1 to %d", n, maxClientAddrs)
	}
	for _, a := range append(append([]string{}, reg.ClientAddrs...), reg.PeerAddr, reg.TCPAddr) {
		if len(a) > maxAddrLen || strings.ContainsFunc(a, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			p.add("client_addrs, peer_addr, tcp_addr", "%q is not an address", a)
		}
	}
	if slices.Contains(reg.ClientAddrs, "") {
		p.add("client_addrs", "an address is empty")
	}
	if reg.Zone != "" {
		p.name("zone", reg.Zone)
	}
	if reg.Region != "" {
		p.name("region", reg.Region)
	}
	if len(reg.Features) > maxFeatures {
		p.add("features", "%d features; at most %d", len(reg.Features), maxFeatures)
	}
	for _, f := range reg.Features {
		p.feature("features", f)
	}
	return p.err()
}

// feature checks a fleet feature name: 1-64 of [a-z0-9_].
func (p *problems) feature(field, f string) {
	if f == "" || len(f) > maxFeatureLen || strings.ContainsFunc(f, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
	}) {
		p.add(field, "%q is not a feature name (1 to %d of a-z, 0-9, '_')", f, maxFeatureLen)
	}
}

func (s *Service) postBroker(r *http.Request, _ *auth.Identity) (int, any, error) {
	var reg wire.BrokerRegistration
	if err := decodeBody(r, &reg); err != nil {
		return 0, nil, err
	}
	br, err := s.RegisterBroker(r.Context(), reg)
	return http.StatusOK, br, err
}

func (s *Service) postHeartbeat(r *http.Request, _ *auth.Identity) (int, any, error) {
	var hb wire.BrokerHeartbeat
	if err := decodeBody(r, &hb); err != nil {
		return 0, nil, err
	}
	node := r.PathValue("node")
	if hb.NodeID != "" && hb.NodeID != node {
		return 0, nil, invalid("node_id: " + hb.NodeID + " differs from the path's " + node)
	}
	hb.NodeID = node
	br, err := s.HeartbeatBroker(r.Context(), hb)
	return http.StatusOK, br, err
}

func (s *Service) deleteBroker(r *http.Request, _ *auth.Identity) (int, any, error) {
	return http.StatusNoContent, nil, s.DeregisterBroker(r.Context(), r.PathValue("node"))
}

func (s *Service) listBrokers(r *http.Request, _ *auth.Identity) (int, any, error) {
	items, err := s.Brokers(r.Context())
	if items == nil {
		items = []wire.Broker{}
	}
	return http.StatusOK, listBody[wire.Broker]{Items: items}, err
}

func (s *Service) getFleetFeatures(r *http.Request, _ *auth.Identity) (int, any, error) {
	view, err := s.FleetFeatures(r.Context())
	return http.StatusOK, view, err
}

func (s *Service) finalizeFeatures(r *http.Request, _ *auth.Identity) (int, any, error) {
	var req wire.FinalizeRequest
	if r.ContentLength != 0 {
		if err := decodeBody(r, &req); err != nil {
			return 0, nil, err
		}
	}
	var p problems
	if len(req.Features) > maxFinalizeList {
		p.add("features", "%d features; at most %d", len(req.Features), maxFinalizeList)
	}
	for _, f := range req.Features {
		p.feature("features", f)
	}
	if err := p.err(); err != nil {
		return 0, nil, err
	}
	if err := s.store.FinalizeFeatures(r.Context(), req.Features); err != nil {
		return 0, nil, err
	}
	s.log.Info("fleet features finalized", "features", req.Features)
	return s.getFleetFeatures(r, nil)
}

// Brokers lists the registered brokers, ordered by node id.
func (s *Service) Brokers(ctx context.Context) ([]wire.Broker, error) { return s.store.Brokers(ctx) }

// FleetFeatures returns the fleet-wide feature gate.
func (s *Service) FleetFeatures(ctx context.Context) (wire.FleetFeaturesView, error) {
	return s.store.FleetFeatures(ctx)
}
