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

	// tickC, when set (tests), replaces the period's ticker.
	tickC <-chan time.Time
}

// DefaultPlacementInterval is the placement pass period the spec gives.
const DefaultPlacementInterval = 5 * time.Second

// placementRetries bounds the passes one wake-up makes when its result
// was refused as stale (another leader's pass came between).
const placementRetries = 3

// PlacementConfigFromEnv reads FELIX_SHARD_RECONCILE_INTERVAL_MS.
func PlacementConfigFromEnv(env func(string) string) (PlacementConfig, error) {
	cfg := PlacementConfig{Interval: DefaultPlacementInterval}
	const name = "FELIX_SHARD_RECONCILE_INTERVAL_MS"
	if raw := env(name); raw != "" {
		ms, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || ms < 1 || ms > 24*3600*1000 {
			var p problems
			p.add(name, "%q is not a number of milliseconds (1 to 86400000)", raw)
			return cfg, p.err()
		}
		cfg.Interval = time.Duration(ms) * time.Millisecond
	}
	return cfg, nil
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
	p := &placer{store: s.store, log: s.log, cfg: cfg}
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
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, max(p.cfg.Interval, 5*time.Second))
	defer cancel()
	in, err := p.store.PlacementInput(ctx)
	if err != nil {
		return err
	}
	out, err := placement.Compute(placementInput(in))
	if err != nil {
		return fmt.Errorf("placement input: %w", err)
	}
	if len(out.Decisions) == 0 {
		return nil
	}
	ch := placementChange(in, out.Next)
	if len(ch.Put) == 0 && len(ch.Drop) == 0 && ch.LastGeneration == in.LastGeneration {
		return nil
	}
	if err := p.store.ApplyPlacement(ctx, ch); err != nil {
		return err
	}
	p.logDecisions(out.Decisions, out.Next.LastGeneration)
	return nil
}

// maxLoggedDecisions bounds the decisions one pass logs one by one; the
// rest are counted.
const maxLoggedDecisions = 100

func (p *placer) logDecisions(ds []placement.Decision, lastGen uint64) {
	counts := map[placement.DecisionKind]int{}
	for i, d := range ds {
		counts[d.Kind]++
		if i >= maxLoggedDecisions {
			continue
		}
		attrs := []any{"decision", string(d.Kind), "shard", d.Shard.Resource.String() + "#" + strconv.FormatUint(uint64(d.Shard.Shard), 10),
			"generation", d.Generation}
		if d.From != "" {
			attrs = append(attrs, "from", d.From)
		}
		if d.To != "" {
			attrs = append(attrs, "to", d.To)
		}
		if d.Reason != "" {
			attrs = append(attrs, "reason", d.Reason)
		}
		p.log.Info("placement", attrs...)
	}
	p.log.Info("placement pass committed", "placed", counts[placement.Placed], "reassigned", counts[placement.Reassigned],
		"waiting", counts[placement.Waiting], "restored", counts[placement.Restored], "dropped", counts[placement.Dropped],
		"last_generation", lastGen)
}
