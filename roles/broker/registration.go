package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/wire"
)

// Registry is the control plane's broker registry as a broker uses it.
// The control plane's Service implements it in process; the HTTP
// catalog source implements it over REST (docs/protocol.md, "Broker
// registry"). Refusals are *wire.Error with code conflict, not_found or
// invalid_request.
type Registry interface {
	// RegisterBroker registers this broker and returns its record.
	RegisterBroker(ctx context.Context, reg wire.BrokerRegistration) (wire.Broker, error)
	// HeartbeatBroker tells the control plane this broker is alive.
	HeartbeatBroker(ctx context.Context, hb wire.BrokerHeartbeat) (wire.Broker, error)
}

// NodeConfig is this broker's identity in a cluster.
type NodeConfig struct {
	// ID names the broker in the cluster (FELIX_NODE_ID). Empty means
	// "broker-1"; felix serve derives "broker-<raft node id>".
	ID string
	// Zone is its failure domain (FELIX_NODE_ZONE, default unset).
	Zone string
	// Region is its region (FELIX_NODE_REGION, default unset).
	Region string
	// AdvertiseAddr is the address clients are told to reach it at
	// (FELIX_NODE_ADVERTISE_ADDR; default the listener's address, with
	// the host name in place of an unspecified IP).
	AdvertiseAddr string
	// HeartbeatInterval is how often it heartbeats
	// (FELIX_NODE_HEARTBEAT_INTERVAL_MS, default 5000).
	HeartbeatInterval time.Duration
	// LeaderSuspectAfter is how long a follower hears nothing from a
	// Quorum shard's leader before it reports it silent in a heartbeat,
	// sent at once (FELIX_LEADER_SUSPECT_AFTER_MS, default 5000, at least
	// 2000: a leader sends its followers something every second).
	LeaderSuspectAfter time.Duration
}

// Defaults of NodeConfig.
const (
	DefaultNodeID            = "broker-1"
	DefaultHeartbeatInterval = 5 * time.Second
	// DefaultLeaderSuspectAfter is FELIX_LEADER_SUSPECT_AFTER_MS's default.
	DefaultLeaderSuspectAfter = 5 * time.Second
	// storageIDFile holds the storage identity, in the durable storage
	// directory: a new directory gets a new identity.
	storageIDFile = "storage.id"
	// registryCallTimeout bounds one registration or heartbeat call.
	registryCallTimeout = 10 * time.Second
)

// ImplementedFleetFeatures are the fleet features this broker implements:
// jump-hash routing (wire.ShardForKey), incarnations of streams and
// caches, recording publishers (FELIX_RECORD_PUBLISHERS), and atomic
// commits (a version-3 record a broker of an earlier release refuses,
// so a registered broker takes commits only once the fleet finalized it).
var ImplementedFleetFeatures = []string{
	wire.FleetJumpHashRouting, wire.FleetStreamIncarnations, wire.FleetCacheIncarnations, wire.FleetPublisherPrincipal,
	wire.FleetAtomicCommit,
}

func (r *envReader) node(n *NodeConfig) {
	r.str(&n.ID, "FELIX_NODE_ID")
	r.str(&n.Zone, "FELIX_NODE_ZONE")
	r.str(&n.Region, "FELIX_NODE_REGION")
	r.str(&n.AdvertiseAddr, "FELIX_NODE_ADVERTISE_ADDR")
	r.millis(&n.HeartbeatInterval, "FELIX_NODE_HEARTBEAT_INTERVAL_MS", 1)
	r.millis(&n.LeaderSuspectAfter, "FELIX_LEADER_SUSPECT_AFTER_MS", 2000)
}

// loadStorageID returns the storage identity kept in dir, writing a new
// random one when dir has none. Without a directory (no durable storage)
// the identity is new on every start: nothing survives one.
func loadStorageID(dir string) (string, error) {
	if dir == "" {
		return newStorageID(), nil
	}
	path := filepath.Join(dir, storageIDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("storage identity: %w", err)
	}
	id := newStorageID()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("storage identity: %w", err)
	}
	tmp := path + ".tmp"
	if err := writeSynced(tmp, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("storage identity: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("storage identity: %w", err)
	}
	return id, nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func newStorageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// advertised is the address to register for a listener at ln: the
// configured one, else the listener's, with the host name in place of an
// unspecified IP. Without a listener it is "".
func advertised(configured string, ln net.Addr) string {
	if configured != "" {
		return configured
	}
	if ln == nil {
		return ""
	}
	udp, ok := ln.(*net.UDPAddr)
	if !ok || !udp.IP.IsUnspecified() {
		return ln.String()
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return net.JoinHostPort(host, fmt.Sprint(udp.Port))
}

// registration is this broker's registration and heartbeat task.
type registration struct {
	reg     Registry
	self    wire.BrokerRegistration
	every   time.Duration
	onFatal func(error)
	// renew is called after every answered registration and heartbeat
	// with the time the call started and the answer's expiry timeout (0:
	// no lease): routeTable.Renew.
	renew func(sent time.Time, expiry time.Duration)
	// fleet holds felix_broker_fleet_feature_enabled{feature} for every
	// feature this release knows: 1 once the control plane's answer to a
	// registration or heartbeat lists it as finalized.
	fleet map[string]*metrics.Gauge
	// suspects, when set, is what each heartbeat reports silent (the
	// Quorum fast path), and soon asks for a heartbeat now.
	suspects func() []wire.ShardSuspect
	soon     <-chan struct{}
	// positions, when set, is what each heartbeat reports of the
	// replicated shards this broker holds (replication.positions).
	positions func() []wire.ShardPosition
	// accepted, when set, is called after every registration the control
	// plane accepted (storageIdentity.registered).
	accepted func()
	// finalized, when set, is called with the finalized fleet features of
	// every answer (Server.fleetFinalized).
	finalized func([]string)
}

// newFleetGauges registers the fleet feature gauges in set, all 0.
func newFleetGauges(set *metrics.Set) map[string]*metrics.Gauge {
	out := make(map[string]*metrics.Gauge, len(wire.FleetFeatures))
	for _, f := range wire.FleetFeatures {
		out[f] = set.NewGauge(fmt.Sprintf("felix_broker_fleet_feature_enabled{feature=%q}", f), nil)
	}
	return out
}

// answered records what an answer to a call started at sent carried:
// the lease and the gate.
func (r *registration) answered(sent time.Time, br wire.Broker) {
	if r.renew != nil {
		r.renew(sent, time.Duration(br.ExpiryTimeoutMs)*time.Millisecond)
	}
	r.learn(br)
}

// learn records the gate an answer carried.
func (r *registration) learn(br wire.Broker) {
	if r.finalized != nil {
		r.finalized(br.FinalizedFeatures)
	}
	for name, g := range r.fleet {
		if slices.Contains(br.FinalizedFeatures, name) {
			g.Set(1)
		} else {
			g.Set(0)
		}
	}
}

// refused reports whether the control plane refused a heartbeat (as
// opposed to failing to answer it): the broker registers again.
func refused(err error) bool {
	var we *wire.Error
	return errors.As(err, &we) && (we.Code == "conflict" || we.Code == wire.CodeNotFound || we.Code == wire.CodeInvalidRequest)
}

// registrationRefused reports whether the control plane refused a
// registration for good (a duplicate node id, a missing finalized
// feature, a bad field). not_found is not one: a control plane of an
// earlier release has no registry, and the broker keeps trying.
func registrationRefused(err error) bool {
	var we *wire.Error
	return errors.As(err, &we) && (we.Code == "conflict" || we.Code == wire.CodeInvalidRequest)
}

// prepareRegistration builds the registration for a client listener at
// ln, a TLS-over-TCP listener at tcpLn and a peer listener at peerLn (nil
// without one), with storage identity si.
func (s *Server) prepareRegistration(ln, tcpLn, peerLn net.Addr, si storageIdentity) *registration {
	n := s.cfg.Node
	if n.ID == "" {
		n.ID = DefaultNodeID
	}
	every := n.HeartbeatInterval
	if every <= 0 {
		every = DefaultHeartbeatInterval
	}
	client := advertised(n.AdvertiseAddr, ln)
	ident := &si
	accepted := func() {
		if err := ident.registered(); err != nil {
			s.log.Warn("cannot record in the run marker that the control plane heard of the crashed storage identity", "err", err)
		}
	}
	return &registration{accepted: accepted, finalized: s.fleetFinalized, reg: s.registry, every: every, onFatal: s.onFatal, renew: s.routes.Renew, fleet: newFleetGauges(s.metrics.set),
		suspects: s.repl.suspects, soon: s.repl.soonC, positions: s.repl.reportPositions, self: wire.BrokerRegistration{
			NodeID: n.ID, ClientAddrs: []string{client}, Zone: n.Zone, Region: n.Region,
			Features: ImplementedFleetFeatures, StorageID: si.ID, CrashedStorageID: si.Crashed, PeerAddr: advertised(s.cfg.Peer.AdvertiseAddr, peerLn),
			TCPAddr: tcpAdvertised(client, tcpLn),
		}}
}

// tcpAdvertised is the TCP address to register beside the client address
// client: "" when the TCP listener at tcpLn shares client's port number
// (clients reach it at client), else client's host with its port.
func tcpAdvertised(client string, tcpLn net.Addr) string {
	tcp, ok := tcpLn.(*net.TCPAddr)
	if !ok {
		return ""
	}
	host, port, err := net.SplitHostPort(client)
	if err != nil || port == fmt.Sprint(tcp.Port) {
		return ""
	}
	return net.JoinHostPort(host, fmt.Sprint(tcp.Port))
}

// register makes one registration call.
func (r *registration) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, registryCallTimeout)
	defer cancel()
	sent := time.Now()
	br, err := r.reg.RegisterBroker(ctx, r.self)
	if err == nil {
		r.answered(sent, br)
		if r.accepted != nil {
			r.accepted()
		}
	}
	return err
}

// run heartbeats every r.every until ctx ends; registered says whether
// the first registration (made by Start) succeeded. A heartbeat the
// control plane refuses (unknown, marked down, deregistered) is answered
// by registering again; a registration it refuses is fatal. Failures to
// reach it are logged and retried, registrations with back-off.
func (r *registration) run(ctx context.Context, log *slog.Logger, registered bool) {
	backoff := 100 * time.Millisecond
	wait := r.every
	if !registered {
		wait = backoff
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.soon:
			if !registered {
				continue // the registration's own timer runs
			}
			t.Stop()
		}
		wait = r.every
		if !registered {
			err := r.register(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case registrationRefused(err):
				r.onFatal(fmt.Errorf("the control plane refused this broker's registration: %w", err))
				return
			case err != nil:
				log.Warn("cannot register with the control plane; trying again", "node_id", r.self.NodeID, "in", backoff, "err", err)
				wait, backoff = backoff, min(2*backoff, r.every)
			default:
				registered = true
				log.Info("registered with the control plane", "node_id", r.self.NodeID, "storage_id", r.self.StorageID)
			}
			t.Reset(wait)
			continue
		}
		hctx, cancel := context.WithTimeout(ctx, registryCallTimeout)
		sent := time.Now()
		hb := wire.BrokerHeartbeat{NodeID: r.self.NodeID, StorageID: r.self.StorageID}
		if r.suspects != nil {
			hb.Suspects = r.suspects()
		}
		if r.positions != nil {
			hb.Positions = r.positions()
		}
		br, err := r.reg.HeartbeatBroker(hctx, hb)
		cancel()
		if err == nil {
			r.answered(sent, br)
		}
		switch {
		case ctx.Err() != nil:
			return
		case refused(err):
			log.Warn("the control plane refused a heartbeat; registering again", "node_id", r.self.NodeID, "err", err)
			registered, wait = false, 0
		case err != nil:
			log.Warn("heartbeat failed; trying again at the next one", "node_id", r.self.NodeID, "err", err)
		}
		t.Reset(wait)
	}
}

// registerAtStart makes the first registration (nothing without a
// registry). A refusal fails the start; a control plane that does not
// answer is retried by the heartbeat task.
func (s *Server) registerAtStart(ctx context.Context, ln, tcpLn, peerLn net.Addr, si storageIdentity) (*registration, bool, error) {
	if s.registry == nil {
		return nil, false, nil
	}
	reg := s.prepareRegistration(ln, tcpLn, peerLn, si)
	err := reg.register(ctx)
	switch {
	case registrationRefused(err):
		return nil, false, fmt.Errorf("broker: the control plane refused this broker's registration: %w", err)
	case err != nil:
		s.log.Warn("cannot register with the control plane yet; retrying in the background", "node_id", reg.self.NodeID, "err", err)
		return reg, false, nil
	}
	s.log.Info("registered with the control plane", "node_id", reg.self.NodeID, "addr", reg.self.ClientAddrs[0],
		"peer_addr", reg.self.PeerAddr, "zone", reg.self.Zone, "storage_id", reg.self.StorageID,
		"crashed_storage_id", reg.self.CrashedStorageID)
	return reg, true, nil
}

// startHeartbeats runs the heartbeat task under bgWG until Shutdown.
func (s *Server) startHeartbeats(reg *registration, registered bool) {
	if reg == nil {
		return
	}
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		reg.run(s.bgCtx, s.log, registered)
	}()
}
