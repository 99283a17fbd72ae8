package controlplane

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// ExpiryConfig times the broker expiry loop (defaults from the spec).
type ExpiryConfig struct {
	// Timeout is how long a broker may go without a heartbeat
	// (FELIX_NODE_EXPIRY_TIMEOUT_MS, default 15s).
	Timeout time.Duration
	// Margin is added to Timeout before it is marked down
	// (FELIX_NODE_REGRANT_MARGIN_MS, default 3.75s).
	Margin time.Duration
	// Sweep is how often the leader checks (FELIX_NODE_EXPIRY_SWEEP_INTERVAL_MS,
	// default 2s).
	Sweep time.Duration

	// tickC, when set (tests), replaces the sweep ticker.
	tickC <-chan time.Time
}

// Default expiry timings.
const (
	DefaultExpiryTimeout = 15 * time.Second
	DefaultRegrantMargin = 3750 * time.Millisecond
	DefaultExpirySweep   = 2 * time.Second
)

// ExpiryConfigFromEnv reads the FELIX_NODE_EXPIRY_* variables, reporting
// every bad value at once.
func ExpiryConfigFromEnv(env func(string) string) (ExpiryConfig, error) {
	cfg := ExpiryConfig{Timeout: DefaultExpiryTimeout, Margin: DefaultRegrantMargin, Sweep: DefaultExpirySweep}
	var p problems
	for _, v := range []struct {
		name     string
		dst      *time.Duration
		zeroOkay bool
	}{
		{"FELIX_NODE_EXPIRY_TIMEOUT_MS", &cfg.Timeout, false},
		{"FELIX_NODE_REGRANT_MARGIN_MS", &cfg.Margin, true},
		{"FELIX_NODE_EXPIRY_SWEEP_INTERVAL_MS", &cfg.Sweep, false},
	} {
		raw := env(v.name)
		if raw == "" {
			continue
		}
		ms, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || ms < 0 || (ms == 0 && !v.zeroOkay) || ms > 24*3600*1000 {
			p.add(v.name, "%q is not a number of milliseconds (1 to 86400000)", raw)
			continue
		}
		*v.dst = time.Duration(ms) * time.Millisecond
	}
	return cfg, p.err()
}

// expiry is the broker expiry loop. It runs on every member and acts only
// while its member leads the Raft group: the leader proposes mark-down
// for every live broker whose last heartbeat is older than Timeout +
// Margin on the leader's clock. Everything it needs is in the records, so
// a new leader simply carries on; it counts a broker's silence from no
// earlier than the moment it found itself leader, so that neither a
// leader change nor a clock that differs between members marks a broker
// down before it had a full expiry time to reach the new leader.
type expiry struct {
	store Store
	cfg   ExpiryConfig
	now   func() time.Time
	log   *slog.Logger

	// leaderTerm and leaderSince: the term this member last found itself
	// leader in and when (zero while it is not leader). Owned by the loop.
	leaderTerm  uint64
	leaderSince time.Time
}

// StartExpiry starts the broker expiry loop; Close stops it and waits for
// it. Calling it twice is a programming error.
func (s *Service) StartExpiry(cfg ExpiryConfig) {
	if s.expiry != nil {
		panic("controlplane: StartExpiry called twice")
	}
	e := &expiry{store: s.store, cfg: cfg, now: s.now, log: s.log}
	s.expiryTimeoutMs.Store(cfg.Timeout.Milliseconds())
	s.expiry = startLoop(s.log, "broker expiry sweep", cfg.Sweep, cfg.tickC, nil, e.sweep)
}

// sweep is one pass: nothing unless this member leads.
func (e *expiry) sweep(ctx context.Context) error {
	st, err := e.store.ClusterStatus(ctx)
	if err != nil {
		return err
	}
	if st.ID == 0 || st.Leader != st.ID {
		e.leaderSince = time.Time{}
		return nil
	}
	now := e.now()
	if e.leaderSince.IsZero() || st.Term != e.leaderTerm {
		e.leaderTerm, e.leaderSince = st.Term, now
	}
	ctx, cancel := context.WithTimeout(ctx, max(e.cfg.Sweep, time.Second))
	defer cancel()
	brokers, err := e.store.Brokers(ctx)
	if err != nil {
		return err
	}
	limit := e.cfg.Timeout + e.cfg.Margin
	for _, br := range brokers {
		if !br.State.Serving() {
			continue
		}
		last := time.UnixMilli(br.LastHeartbeatMs)
		if last.Before(e.leaderSince) {
			last = e.leaderSince
		}
		if now.Sub(last) <= limit {
			continue
		}
		down, err := e.store.MarkBrokerDown(ctx, br.NodeID, br.LastHeartbeatMs, now.UnixMilli())
		if err != nil {
			return fmt.Errorf("mark broker %q down: %w", br.NodeID, err)
		}
		if down {
			e.log.Info("broker marked down: no heartbeat within the expiry time", "node_id", br.NodeID,
				"last_heartbeat", time.UnixMilli(br.LastHeartbeatMs).UTC().Format(time.RFC3339Nano), "expiry", limit)
		}
	}
	return nil
}
