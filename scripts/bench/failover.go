package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// The failover workload (issue #18's "Speed (benchmark)"): how long a
// durable Quorum shard with three copies is out of service when its
// leader is killed, with the cluster's default timings. Each kill runs on
// a fresh `felix dev --nodes 3`: a one-shard stream at replication factor
// 3 with quorum consistency, a ClusterClient in this process publishing
// one acknowledged record at a time and reading the shard from the
// earliest offset, then SIGKILL of the shard's leader. It measures, from
// the kill, (a) the first acknowledgement of a publish sent after it and
// (b) the first delivery to the subscriber of a record sent after it. A
// kill with no such acknowledgement or delivery within failoverGiveUp is a
// failed kill and counts at failoverGiveUp in the percentiles.
//
// Only Quorum shards are measured: a Leader shard fails over once its
// leader is marked down (18.75 s after its last heartbeat by default),
// which this workload does not time.

const (
	// failoverKillsDefault is the kills per round and transport
	// (--failover-kills or BENCH_FAILOVER_KILLS overrides it).
	failoverKillsDefault = 20
	// failoverGiveUp bounds each kill's wait for (a) and (b).
	failoverGiveUp = 60 * time.Second
	// failoverStream is the stream each fresh cluster gets.
	failoverStream = "failover"
	// failoverWarm is the acknowledged publishes and deliveries a kill
	// waits for before it kills.
	failoverWarm = 100
)

// failoverTimingVars are the cluster timings the workload leaves at their
// defaults; it refuses to run when the environment sets one, since felix
// dev passes the environment to its nodes.
var failoverTimingVars = []string{"FELIX_NODE_HEARTBEAT_INTERVAL_MS", "FELIX_NODE_EXPIRY_TIMEOUT_MS",
	"FELIX_NODE_REGRANT_MARGIN_MS", "FELIX_NODE_EXPIRY_SWEEP_INTERVAL_MS", "FELIX_SHARD_RECONCILE_INTERVAL_MS",
	"FELIX_LEADER_SUSPECT_AFTER_MS", "FELIX_MAX_IDLE_TIMEOUT_MS", "FELIX_KEEPALIVE_MS"}

const failoverNote = "SIGKILL of a durable Quorum shard's leader (replication factor 3, one shard) on a fresh felix dev --nodes 3 " +
	"per kill, default timings (leader suspected after 5 s of silence; marked down after 15 s + 3.75 s). A ClusterClient in the " +
	"harness publishes one acknowledged 16 B record at a time (each call bounded by --failover-call-timeout, 500 ms by default, " +
	"so the figures are late by up to that) and reads the shard from the earliest offset. " +
	"Seconds from the kill to the first acknowledgement of a publish sent after it, and to the first delivery of such a record; " +
	"a kill with either missing after 60 s is failed and counts as 60 s. With 20 kills p99 is the slowest. Over QUIC a killed " +
	"broker says nothing: the client finds it out by probing the connection after a call timed out (or at its 6 s idle timeout); " +
	"over TCP the kernel resets a killed process's connections at once. Leader shards (failed over after the mark-down) are not measured."

func failoverWorkload() workload {
	return workload{name: "failover", note: failoverNote,
		onlyNamed: "each kill starts a fresh cluster: 20 kills take about 10 minutes per transport",
		noWarmup:  "every kill starts a fresh cluster",
		cases: func(o *options) []caseSpec {
			return []caseSpec{{
				name: fmt.Sprintf("Quorum RF3, %d leader SIGKILLs", o.failoverKills),
				metrics: []metric{
					{"kill → acked p50", "s", true, "acked_p50", ""},
					{"kill → acked p99", "s", true, "acked_p99", ""},
					{"kill → acked max", "s", true, "acked_max", ""},
					{"kill → delivered p50", "s", true, "delivered_p50", ""},
					{"kill → delivered p99", "s", true, "delivered_p99", ""},
					{"kill → delivered max", "s", true, "delivered_max", ""},
					{"failed kills", "kills", true, "failed", ""},
					{"kills", "kills", false, "kills", ""},
				},
				felix: func(ctx context.Context, e *env, tr string) (figures, error) {
					return runFailover(ctx, e, tr, o.failoverKills, o.failoverCall)
				},
			}}
		}}
}

// runFailover runs the round's kills over transport tr and summarizes them.
func runFailover(ctx context.Context, e *env, tr string, kills int, call time.Duration) (figures, error) {
	for _, v := range failoverTimingVars {
		if val, ok := os.LookupEnv(v); ok {
			return nil, fmt.Errorf("%s=%s is set: the failover workload measures the default timings", v, val)
		}
	}
	var results []killResult
	setupErrs := 0
	for len(results) < kills && ctx.Err() == nil {
		r, err := failoverKill(ctx, e, tr, call)
		if err != nil {
			setupErrs++
			logf("failover %s kill %d/%d: %v", tr, len(results)+1, kills, err)
			if setupErrs > 3 {
				return nil, fmt.Errorf("%d kills could not be set up; the last: %w", setupErrs, err)
			}
			continue
		}
		results = append(results, r)
		logf("failover %s kill %d/%d: %s", tr, len(results), kills, r)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return summarizeKills(results), nil
}

// killResult is what one kill measured.
type killResult struct {
	victim       string        // the killed leader's node name
	raftLeader   bool          // the victim also led the control plane's Raft group
	newLeader    string        // the shard's leader afterwards ("" unknown)
	acked        time.Duration // kill → first ack of a publish sent after it
	delivered    time.Duration // kill → first delivery of such a record
	ackedOK      bool
	deliveredOK  bool
	pubErrs      int // publishes that failed after the kill
	resubs       int // times the subscriber had to subscribe again itself
	lastErr      error
	clusterStart time.Duration // how long the fresh cluster took to be ready
}

func (r killResult) String() string {
	show := func(d time.Duration, ok bool) string {
		if !ok {
			return "none within " + failoverGiveUp.String()
		}
		return d.Round(time.Millisecond).String()
	}
	s := fmt.Sprintf("killed %s (raft leader %v) → acked %s, delivered %s; new leader %s; %d failed publishes",
		r.victim, r.raftLeader, show(r.acked, r.ackedOK), show(r.delivered, r.deliveredOK), cmp.Or(r.newLeader, "?"), r.pubErrs)
	if r.resubs > 0 {
		s += fmt.Sprintf(", subscriber subscribed again %d×", r.resubs)
	}
	if r.lastErr != nil {
		s += "; last publish error: " + clip(r.lastErr.Error(), 160)
	}
	return s + fmt.Sprintf(" (cluster ready in %s)", r.clusterStart.Round(100*time.Millisecond))
}

// summarizeKills is the round's figures: percentiles over the kills in
// seconds, a failed kill counting at failoverGiveUp.
func summarizeKills(rs []killResult) figures {
	f := figures{"kills": float64(len(rs))}
	var acked, delivered []float64
	failed, raft := 0, 0
	for _, r := range rs {
		a, d := failoverGiveUp, failoverGiveUp
		if r.ackedOK {
			a = r.acked
		}
		if r.deliveredOK {
			d = r.delivered
		}
		if !r.ackedOK || !r.deliveredOK {
			failed++
		}
		if r.raftLeader {
			raft++
		}
		acked, delivered = append(acked, a.Seconds()), append(delivered, d.Seconds())
	}
	f["failed"], f["raft_leader_kills"] = float64(failed), float64(raft)
	for name, v := range map[string][]float64{"acked": acked, "delivered": delivered} {
		if len(v) == 0 {
			continue
		}
		slices.Sort(v)
		f[name+"_p50"], f[name+"_p99"], f[name+"_max"] = percentile(v, 0.50), percentile(v, 0.99), v[len(v)-1]
	}
	return f
}

// failoverKill runs one kill on a fresh cluster. An error is a kill that
// could not be set up (the cluster, the stream or the load); a failover
// that does not happen is a result with ackedOK or deliveredOK false.
func failoverKill(ctx context.Context, e *env, tr string, call time.Duration) (killResult, error) {
	var r killResult
	dir := e.dir("failover")
	defer os.RemoveAll(dir)
	t0 := time.Now()
	d, err := startFelixDev(ctx, e.p, e.felixBin, dir, 3, nil)
	if err != nil {
		return r, err
	}
	defer d.stop()
	r.clusterStart = time.Since(t0)
	if _, err := d.cli(ctx, "admin", "stream", "create", failoverStream, "--durable", "--shards", "1",
		"--replication-factor", "3", "--consistency", "quorum"); err != nil {
		return r, err
	}
	leader, err := waitServed(ctx, d, "", 30*time.Second)
	if err != nil {
		return r, err
	}
	cfg, ns, seeds, err := d.sdkConfig(tr)
	if err != nil {
		return r, err
	}
	cc, err := felix.ConnectCluster(ctx, seeds, cfg)
	if err != nil {
		return r, fmt.Errorf("connect to the cluster over %s: %w", tr, err)
	}
	defer cc.Close()
	w := &killWatch{}
	stop, err := runLoad(ctx, cc, ns, failoverStream, call, w)
	if err != nil {
		return r, err
	}
	defer stop()
	if err := waitWarm(ctx, w, 30*time.Second); err != nil {
		return r, err
	}
	if r.raftLeader, err = isRaftLeader(ctx, d, leader); err != nil {
		logf("failover: the control plane's leader is unknown: %v", err)
	}
	r.victim = leader.Name
	killedAt, err := d.kill9(leader)
	if err != nil {
		return r, err
	}
	w.kill(killedAt)
	waitFailover(ctx, w, killedAt.Add(failoverGiveUp))
	s := w.snapshot()
	r.acked, r.ackedOK = s.acked.Sub(killedAt), !s.acked.IsZero()
	r.delivered, r.deliveredOK = s.delivered.Sub(killedAt), !s.delivered.IsZero()
	r.pubErrs, r.resubs, r.lastErr = s.pubErrs, s.resubs, s.lastErr
	if r.ackedOK {
		if n, err := waitServed(ctx, d, leader.NodeID, 5*time.Second); err == nil {
			r.newLeader = n.Name
		}
	}
	return r, nil
}

// waitServed waits until the stream's one shard is served by a node other
// than notID with two followers, and returns that node.
func waitServed(ctx context.Context, d *felixDev, notID string, within time.Duration) (devNode, error) {
	deadline := time.Now().Add(within)
	var last string
	for {
		v, err := d.placement(ctx, failoverStream)
		switch {
		case err != nil:
			last = err.Error()
		case len(v.Shards) != 1:
			last = fmt.Sprintf("%d shards", len(v.Shards))
		default:
			a := v.Shards[0]
			last = fmt.Sprintf("leader %q at generation %d, unavailable %q, %d followers", a.NodeID, a.Generation, a.Unavailable, len(a.Replicas))
			if a.Generation != 0 && a.Unavailable == "" && a.NodeID != notID && len(a.Replicas) == 2 {
				if n, ok := d.nodeByID(a.NodeID); ok {
					return n, nil
				}
				return devNode{}, fmt.Errorf("the shard's leader %q is not in dev.json", a.NodeID)
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return devNode{}, fmt.Errorf("%s not served with two followers within %v: %s", failoverStream, within, last)
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// waitWarm waits until the load has failoverWarm acknowledgements and
// deliveries.
func waitWarm(ctx context.Context, w *killWatch, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		s := w.snapshot()
		if s.acks >= failoverWarm && s.events >= failoverWarm {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("before the kill: %d acknowledged, %d delivered within %v, want %d each", s.acks, s.events, within, failoverWarm)
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
}

// waitFailover waits until the kill's acknowledgement and delivery are
// both seen, or the deadline.
func waitFailover(ctx context.Context, w *killWatch, deadline time.Time) {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if s := w.snapshot(); !s.acked.IsZero() && !s.delivered.IsZero() {
			return
		}
		sleepCtx(ctx, 10*time.Millisecond)
	}
}

// isRaftLeader reports whether node n leads the control plane's Raft group.
func isRaftLeader(ctx context.Context, d *felixDev, n devNode) (bool, error) {
	id, err := d.raftLeader(ctx)
	if err != nil {
		return false, err
	}
	if id == 0 {
		return false, errors.New("no leader")
	}
	return id == n.RaftID, nil
}
