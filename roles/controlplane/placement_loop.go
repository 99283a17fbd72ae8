package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/felixmq/felix/roles/controlplane/placement"
)

// PlacementConfig times the placement loop.
type PlacementConfig struct {
	// Interval is the placement pass period
	// (FELIX_SHARD_RECONCILE_INTERVAL_MS, default 5s). A pass also runs
	// soon after a broker or a stream or cache changes.
	Interval time.Duration
	// RestoreAfter is how long a follower's broker may stay down before
	// the follower is replaced by a copy on a live broker
	// (FELIX_SHARD_RESTORE_AFTER_MS, default 5 min; replication-factor
	// restore). StartPlacement fills 0 with the default; a placer built
	// with 0 (tests) never replaces one.
	RestoreAfter time.Duration

	// tickC, when set (tests), replaces the period's ticker.
	tickC <-chan time.Time
}

// DefaultPlacementInterval is the placement pass period the spec gives.
const DefaultPlacementInterval = 5 * time.Second

// DefaultRestoreAfter is the spec's FELIX_SHARD_RESTORE_AFTER_MS.
const DefaultRestoreAfter = 5 * time.Minute

// placementRetries bounds the passes one wake-up makes when its result
// was refused as stale (another leader's pass came between).
const placementRetries = 3

// PlacementConfigFromEnv reads FELIX_SHARD_RECONCILE_INTERVAL_MS (1 ms
// to a day) and FELIX_SHARD_RESTORE_AFTER_MS (1 s to a day), reporting
// every bad value at once.
func PlacementConfigFromEnv(env func(string) string) (PlacementConfig, error) {
	cfg := PlacementConfig{Interval: DefaultPlacementInterval, RestoreAfter: DefaultRestoreAfter}
	var p problems
	for _, v := range []struct {
		name  string
		dst   *time.Duration
		minMs int64
	}{
		{"FELIX_SHARD_RECONCILE_INTERVAL_MS", &cfg.Interval, 1},
		{"FELIX_SHARD_RESTORE_AFTER_MS", &cfg.RestoreAfter, 1000},
	} {
		raw := env(v.name)
		if raw == "" {
			continue
		}
		ms, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || ms < v.minMs || ms > 24*3600*1000 {
			p.add(v.name, "%q is not a number of milliseconds (%d to 86400000)", raw, v.minMs)
			continue
		}
		*v.dst = time.Duration(ms) * time.Millisecond
	}
	return cfg, p.err()
}

// placer is the placement loop. It runs on every member and acts only
// while its member leads the Raft group: it reads the brokers, the
// streams and caches and the current assignments (after a barrier),
// calls placement.Compute and proposes the result when anything changed.
// The records carry everything, so a new leader simply carries on; a
// pass computed from a placement another leader changed since is refused
// by the state machine and computed again.
type placer struct {
	store Store
	log   *slog.Logger
	cfg   PlacementConfig
	// metrics, when set, receives felix_shards_under_replicated.
	metrics *placementMetrics
	// now is the clock restore delays are measured on (the service's;
	// time.Now when nil).
	now func() time.Time

	// leaderTerm and leaderSince: the term this member last found itself
	// leader in and when (zero while it is not leader). Owned by the loop.
	leaderTerm  uint64
	leaderSince time.Time
}

// StartPlacement starts the placement loop; Close stops it and waits for
// it. Calling it twice is a programming error.
func (s *Service) StartPlacement(cfg PlacementConfig) {
	if s.placement != nil {
		panic("controlplane: StartPlacement called twice")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultPlacementInterval
	}
	if cfg.RestoreAfter <= 0 {
		cfg.RestoreAfter = DefaultRestoreAfter
	}
	s.placementMetrics = newPlacementMetrics()
	p := &placer{store: s.store, log: s.log, cfg: cfg, metrics: s.placementMetrics, now: s.now}
	s.placement = startLoop(s.log, "placement pass", cfg.Interval, cfg.tickC, s.store.PlacementInputsChanged(), p.pass)
}

// pass is one placement pass, retried when its result was stale; nothing
// unless this member leads.
func (p *placer) pass(ctx context.Context) error {
	for try := 1; ; try++ {
		err := p.passOnce(ctx)
		if !errors.Is(err, ErrConflict) || try == placementRetries {
			return err
		}
		p.log.Info("placement pass was stale (the placement changed meanwhile); computing again", "err", err)
	}
}

func (p *placer) passOnce(ctx context.Context) error {
	st, err := p.store.ClusterStatus(ctx)
	if err != nil {
		return err
	}
	if st.ID == 0 || st.Leader != st.ID {
		p.leaderSince = time.Time{}
		p.setUnderReplicated(0)
		return nil
	}
	now := p.clock()
	if p.leaderSince.IsZero() || st.Term != p.leaderTerm {
		p.leaderTerm, p.leaderSince = st.Term, now
	}
	ctx, cancel := context.WithTimeout(ctx, max(p.cfg.Interval, 5*time.Second))
	defer cancel()
	in, err := p.store.PlacementInput(ctx)
	if err != nil {
		return err
	}
	pin := placementInput(in)
	p.setRestoreClock(&pin, now)
	out, err := placement.Compute(pin)
	if err != nil {
		return fmt.Errorf("placement input: %w", err)
	}
	ch := placementChange(in, out.Next)
	if len(out.Decisions) > 0 && (len(ch.Put) > 0 || len(ch.Drop) > 0 || ch.LastGeneration != in.LastGeneration) {
		if err := p.store.ApplyPlacement(ctx, ch); err != nil {
			return err
		}
		p.logDecisions(out.Decisions, out.Next.LastGeneration)
	}
	pin.Current = out.Next
	p.setUnderReplicated(placement.UnderReplicated(pin))
	return nil
}

// clock reads p.now, or time.Now when it is not set.
func (p *placer) clock() time.Time {
	if p.now == nil {
		return time.Now()
	}
	return p.now()
}

// setRestoreClock gives pin the clock reading and the restore delay, and
// counts each down broker's time down from no earlier than the moment
// this member found itself leader. The expiry loop counts silence the
// same way: neither a leader change nor a clock that differs between
// members replaces a follower before its broker was down for the full
// delay on this leader's clock (a leader change restarts the count).
func (p *placer) setRestoreClock(pin *placement.Input, now time.Time) {
	pin.NowMs, pin.RestoreAfterMs = now.UnixMilli(), p.cfg.RestoreAfter.Milliseconds()
	since := p.leaderSince.UnixMilli()
	for i := range pin.Brokers {
		if b := &pin.Brokers[i]; b.State == placement.Down {
			b.DownSinceMs = max(b.DownSinceMs, since)
		}
	}
}

// setUnderReplicated publishes felix_shards_under_replicated, if p has
// metrics.
func (p *placer) setUnderReplicated(n int) {
	if p.metrics != nil {
		p.metrics.underReplicated.Set(float64(n))
	}
}

// maxLoggedDecisions bounds the decisions one pass logs one by one; the
// rest are counted.
const maxLoggedDecisions = 100

// shardName renders a shard as kind:tenant/namespace/name#shard, for logs.
func shardName(s placement.ShardRef) string {
	return s.Resource.String() + "#" + strconv.FormatUint(uint64(s.Shard), 10)
}

func (p *placer) logDecisions(ds []placement.Decision, lastGen uint64) {
	counts := map[placement.DecisionKind]int{}
	for i, d := range ds {
		counts[d.Kind]++
		if i >= maxLoggedDecisions {
			continue
		}
		attrs := []any{"decision", string(d.Kind), "shard", shardName(d.Shard),
			"generation", d.Generation}
		if d.From != "" {
			attrs = append(attrs, "from", d.From)
		}
		if d.To != "" {
			attrs = append(attrs, "to", d.To)
		}
		if d.Replica != "" {
			attrs = append(attrs, "replica", d.Replica)
		}
		if d.Reason != "" {
			attrs = append(attrs, "reason", d.Reason)
		}
		if d.Detail != "" {
			attrs = append(attrs, "detail", d.Detail)
		}
		p.log.Info("placement", attrs...)
	}
	p.log.Info("placement pass committed", "placed", counts[placement.Placed], "reassigned", counts[placement.Reassigned], "promoted", counts[placement.Promoted],
		"waiting", counts[placement.Waiting], "restored", counts[placement.Restored], "reopened", counts[placement.Reopened], "dropped", counts[placement.Dropped],
		"replicas_added", counts[placement.ReplicaAdded], "replicas_dropped", counts[placement.ReplicaDropped],
		"last_generation", lastGen)
}
