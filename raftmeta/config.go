package raftmeta

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config configures a Node.
type Config struct {
	// ID is this member's id (FELIX_RAFT_NODE_ID); non-zero and a key of Peers.
	ID uint64
	// Dir holds raft.db (FELIX_RAFT_DATA_DIR). The state machine keeps its
	// own files; they may live here too.
	Dir string
	// Peers maps every member id, this one included, to its peer URL
	// (https://host:port, or http:// for tests) (FELIX_RAFT_PEERS).
	Peers map[uint64]string
	// FSM is the replicated state machine.
	FSM StateMachine
	// TLS is used for both the peer listener and the peer client; mutual
	// when it carries certificates and client CAs. nil means plain HTTP,
	// for tests only.
	TLS *tls.Config
	// Listener, when set, is used for peer traffic instead of listening on
	// the host:port of this member's peer URL (tests pass port 0).
	Listener net.Listener
	// TickInterval is the raft clock (default 100ms). An election times out
	// after 10 ticks; the leader sends a heartbeat every tick.
	TickInterval time.Duration
	// SnapshotEvery is how many applied entries go by between snapshots
	// (default 10000).
	SnapshotEvery uint64
	// Logger receives the node's and raft's logs (default slog.Default()).
	Logger *slog.Logger

	// hooks are test seams in the Ready loop (ready.go); nil outside tests.
	hooks *readyHooks
}

// Defaults used by Config.
const (
	DefaultTickInterval  = 100 * time.Millisecond
	DefaultSnapshotEvery = 10000
	electionTicks        = 10
	heartbeatTicks       = 1
)

func (c *Config) setDefaults() {
	if c.TickInterval <= 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = DefaultSnapshotEvery
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// validate reports every bad field at once.
func (c *Config) validate() error {
	var errs []error
	if c.ID == 0 {
		errs = append(errs, errors.New("FELIX_RAFT_NODE_ID: must be a positive integer"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("FELIX_RAFT_DATA_DIR: must be set"))
	}
	if _, ok := c.Peers[c.ID]; c.ID != 0 && !ok {
		errs = append(errs, fmt.Errorf("FELIX_RAFT_PEERS: has no entry for this node id %d", c.ID))
	}
	for id, u := range c.Peers {
		if err := checkPeerURL(u); err != nil {
			errs = append(errs, fmt.Errorf("FELIX_RAFT_PEERS: member %d: %w", id, err))
		}
	}
	if c.FSM == nil {
		errs = append(errs, errors.New("raftmeta: Config.FSM must be set"))
	}
	return errors.Join(errs...)
}

func checkPeerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Errorf("url %q: scheme must be https (or http for tests)", s)
	}
	if u.Host == "" {
		return fmt.Errorf("url %q: missing host:port", s)
	}
	return nil
}

// ParsePeers parses FELIX_RAFT_PEERS: comma-separated id=url pairs, e.g.
// "1=https://a:7000,2=https://b:7000". Ids are positive and unique.
func ParsePeers(s string) (map[uint64]string, error) {
	out := map[uint64]string{}
	var errs []error
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		idStr, u, ok := strings.Cut(part, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("FELIX_RAFT_PEERS: %q is not id=url", part))
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSpace(idStr), 10, 64)
		if err != nil || id == 0 {
			errs = append(errs, fmt.Errorf("FELIX_RAFT_PEERS: %q: id must be a positive integer", part))
			continue
		}
		if _, dup := out[id]; dup {
			errs = append(errs, fmt.Errorf("FELIX_RAFT_PEERS: id %d appears twice", id))
			continue
		}
		u = strings.TrimRight(strings.TrimSpace(u), "/")
		if err := checkPeerURL(u); err != nil {
			errs = append(errs, fmt.Errorf("FELIX_RAFT_PEERS: member %d: %w", id, err))
			continue
		}
		out[id] = u
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("FELIX_RAFT_PEERS: no members"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// sortedIDs returns the member ids in ascending order.
func sortedIDs(peers map[uint64]string) []uint64 {
	ids := make([]uint64, 0, len(peers))
	for id := range peers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
