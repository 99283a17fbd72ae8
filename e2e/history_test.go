// The history scenarios of issue #18: a durable quorum stream with three
// copies (fsync always) on a felix dev cluster of three real processes,
// written by concurrent ClusterClients and read by a subscriber per
// shard while one fault family is injected, then checked by the history
// checker (history_check_test.go) once the faults heal.
//
// Each scenario runs one round by default, a few tens of seconds;
// FELIX_HISTORY_ROUNDS=N runs N rounds of its fault on the same cluster
// and stream before the check (docs/testing.md).
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// historyEnv is every history cluster's settings besides clusterTimings:
// every copy syncs each write before it answers, and a quorum publish
// with no majority is answered quorum_timeout before the client's own
// deadline.
var historyEnv = []string{"FELIX_DURABLE_FSYNC=always", "FELIX_PUBLISH_QUORUM_TIMEOUT_MS=1500"}

// historyRounds is FELIX_HISTORY_ROUNDS, 1 by default.
func historyRounds(t *testing.T) int {
	t.Helper()
	v := os.Getenv("FELIX_HISTORY_ROUNDS")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("FELIX_HISTORY_ROUNDS=%q: want a count of at least 1", v)
	}
	return n
}

// historyScenario is one fault family: round injects the fault once and
// heals it, leaving every node running.
type historyScenario struct {
	shards uint32
	// failovers is how many generation starts each round must at least
	// add to the shards' logs, so that a fault that changed nothing (and a
	// history that checks nothing) fails the test.
	failovers int
	round     func(ctx context.Context, r *historyRun, round int)
}

// runHistory starts a cluster, records a history through rounds of the
// scenario's fault, and checks it.
func runHistory(t *testing.T, sc historyScenario) {
	runHistoryOn(t, startDev(t, 3, historyEnv...), sc)
}

// runHistoryOn is runHistory on the cluster d, started with historyEnv.
func runHistoryOn(t *testing.T, d *devCluster, sc historyScenario) {
	rounds := historyRounds(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(2+rounds)*time.Minute)
	defer cancel()
	r := startHistory(ctx, t, d, "hist", sc.shards)
	r.waitProgress(time.Time{}, 50, expiryWait)
	for i := range rounds {
		sc.round(ctx, r, i)
		healed := time.Now()
		r.waitProgress(healed, 30, failoverWait)
	}
	h := r.finish(ctx)
	checkHistory(t, h)
	starts := 0
	for _, c := range h.copies {
		for _, rec := range c.records {
			if c.leader && rec.Kind == flog.KindGenerationStart {
				starts++
			}
		}
	}
	t.Logf("%d generation starts in the shards' logs after %d rounds", starts, rounds)
	if starts < sc.failovers*rounds {
		t.Errorf("%d generation starts in the shards' logs after %d rounds, want at least %d a round: the fault changed no leader",
			starts, rounds, sc.failovers)
	}
}

// SIGKILL the leader of a shard (it follows the others): a follower takes
// the shard over, the publishers and the subscriber carry on, and the
// killed node, restarted, catches up.
func TestHistoryShardLeaderKilled(t *testing.T) {
	runHistory(t, historyScenario{shards: 3, failovers: 1, round: func(ctx context.Context, r *historyRun, round int) {
		victim := r.leaders(ctx)[round%int(r.shards)]
		t.Logf("round %d: SIGKILL %s, leader of shard %d", round, victim, round%int(r.shards))
		r.d.kill9(victim)
		r.waitProgress(time.Now(), 10, failoverWait)
		r.restart(victim)
	}})
}

// SIGKILL a follower that leads no shard (two shards on three nodes):
// both shards keep a majority and go on acknowledging, also once the
// control plane has marked the follower down; the follower, restarted,
// catches up.
func TestHistoryFollowerKilled(t *testing.T) {
	runHistory(t, historyScenario{shards: 2, round: func(ctx context.Context, r *historyRun, round int) {
		victim := followerOnly(t, r.leaders(ctx), r.d)
		t.Logf("round %d: SIGKILL %s, a follower of every shard", round, victim)
		killed := time.Now()
		r.d.kill9(victim)
		id := r.d.node(victim).NodeID
		eventually(t, expiryWait, victim+" marked down", func() bool { return r.brokerState(ctx, victim, id) == wire.BrokerDown })
		r.waitProgress(killed, 30, failoverWait)
		r.restart(victim)
	}})
}

// brokerState asks the control plane of a running node other than avoid
// for the broker id's state; "" when none answers.
func (r *historyRun) brokerState(ctx context.Context, avoid, id string) wire.BrokerState {
	for _, n := range r.d.nodes {
		if n.Name == avoid || !processAlive(n.PID) {
			continue
		}
		out, _, code := r.d.felix(ctx, "admin", "brokers", "list", "-o", "json", "--controlplane", n.ControlPlaneURL)
		var list []wire.Broker
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
			continue
		}
		for _, b := range list {
			if b.NodeID == id {
				return b.State
			}
		}
	}
	return ""
}

// followerOnly returns a node that leads none of the shards.
func followerOnly(t *testing.T, leaders []string, d *devCluster) string {
	t.Helper()
	leads := map[string]bool{}
	for _, l := range leaders {
		leads[l] = true
	}
	for _, n := range d.nodes {
		if !leads[n.Name] {
			return n.Name
		}
	}
	t.Fatalf("every node leads a shard: %v", leaders)
	return ""
}

// SIGSTOP a shard's leader until every shard it led has a new leader (it
// is past its lease), then SIGCONT: the deposed leader must acknowledge
// nothing the new leaders do not hold at that offset. Probes sent to it
// on a connection of its own are part of the history, so an
// acknowledgement from it at an offset the new leader gave another record
// is a conflict (invariant 2) or a lost ack (invariant 1): one publish per
// shard it led sent just after the freeze, left waiting in its socket
// until it runs again, and three more after it runs again.
func TestHistoryFrozenLeaderIsDeposed(t *testing.T) {
	runHistory(t, historyScenario{shards: 3, failovers: 1, round: func(ctx context.Context, r *historyRun, round int) {
		before := r.leaders(ctx)
		victim := before[round%int(r.shards)]
		var led []uint32
		for s, l := range before {
			if l == victim {
				led = append(led, uint32(s))
			}
		}
		t.Logf("round %d: SIGSTOP %s, leader of shards %v", round, victim, led)
		pinned := r.d.connect(ctx, victim, r.token)
		r.probeWith(ctx, pinned, "warm-probe@"+victim, led, round, 0) // so the frozen probes are past auth
		r.d.signal(victim, syscall.SIGSTOP)
		frozen := time.Now()
		waiting := r.probeInFlight(ctx, pinned, victim, led, round)
		eventually(t, failoverWait, "every shard "+victim+" led led by another node", func() bool {
			v, ok := r.placement(ctx, victim)
			if !ok {
				return false
			}
			for _, a := range v.Shards {
				if slices.Contains(led, a.Shard) && (a.Unavailable != "" || a.NodeID == "" || nodeNameOf(a.NodeID) == victim) {
					return false
				}
			}
			return true
		})
		// SIGCONT at once: a freeze shorter than the clients' 6 s QUIC idle
		// timeout leaves the frozen probes' connection up, so the deposed
		// leader reads them when it runs again.
		r.d.signal(victim, syscall.SIGCONT)
		t.Logf("%s frozen for %v", victim, time.Since(frozen))
		for _, a := range waiting() {
			t.Logf("probe %s sent to %s while it was frozen: %v at offset %d %s", a.payload, victim, a.outcome, a.offset, a.err)
		}
		r.probe(ctx, victim, led, round)
	}})
}

// probeInFlight publishes to each of the shards on c, a client of node
// alone, each call waiting up to a minute, and returns a function that
// waits for the answers and returns the attempts (all recorded).
func (r *historyRun) probeInFlight(ctx context.Context, c *felix.Client, node string, shards []uint32, round int) func() []pubAttempt {
	client := "frozen-probe@" + node
	out := make([]pubAttempt, len(shards))
	var wg sync.WaitGroup
	for i, s := range shards {
		payload := fmt.Sprintf("%s-%s-r%d-s%d", r.stream, client, round, s)
		wg.Go(func() {
			out[i] = r.publishOne(ctx, time.Minute, client, s, payload, func(pctx context.Context) (felix.PublishResult, error) {
				return c.PublishKeyedAcked(pctx, r.ns, r.stream, r.keys[s], []byte(payload), felix.AckPerMessage)
			})
		})
	}
	return func() []pubAttempt { wg.Wait(); return out }
}

// probe publishes to the shards on a client connected to node alone, at
// once and one and two seconds later, and records the attempts.
func (r *historyRun) probe(ctx context.Context, node string, shards []uint32, round int) {
	pinned := r.d.connect(ctx, node, r.token)
	for i, wait := range []time.Duration{0, time.Second, 2 * time.Second} {
		time.Sleep(wait)
		for _, a := range r.probeWith(ctx, pinned, "probe@"+node, shards, round, i) {
			r.t.Logf("probe %s to the deposed %s: %v at offset %d %s", a.payload, node, a.outcome, a.offset, a.err)
		}
	}
}

// probeWith publishes once to each of the shards on c, and records the
// attempts as client's.
func (r *historyRun) probeWith(ctx context.Context, c *felix.Client, client string, shards []uint32, round, i int) []pubAttempt {
	var out []pubAttempt
	for _, s := range shards {
		payload := fmt.Sprintf("%s-%s-r%d-%d-s%d", r.stream, client, round, i, s)
		out = append(out, r.publishOne(ctx, historyCallTimeout, client, s, payload, func(pctx context.Context) (felix.PublishResult, error) {
			return c.PublishKeyedAcked(pctx, r.ns, r.stream, r.keys[s], []byte(payload), felix.AckPerMessage)
		}))
	}
	return out
}

// SIGKILL two of the three nodes at once: no shard has a majority (nor
// the control plane), so nothing is acknowledged until they return (a
// publish started after both died and answered before the first restart
// began must not be acknowledged); then they return and every shard
// serves everything acknowledged before.
func TestHistoryTwoBrokersDown(t *testing.T) {
	runHistory(t, historyScenario{shards: 3, round: func(ctx context.Context, r *historyRun, round int) {
		a, b := r.d.nodes[round%3].Name, r.d.nodes[(round+1)%3].Name
		t.Logf("round %d: SIGKILL %s and %s together", round, a, b)
		r.d.signal(a, syscall.SIGKILL)
		r.d.signal(b, syscall.SIGKILL)
		r.waitGone(a, b)
		down := time.Now()
		// The shard waits: the publishers keep trying (and the calls to the
		// dead leaders time out) while nothing is acknowledged.
		eventually(t, 30*time.Second, "two publishes to every shard tried and answered with two nodes down", func() bool {
			tried := map[uint32]int{}
			for _, at := range r.attemptsBetween(down, time.Now()) {
				tried[at.shard]++
			}
			for s := range r.shards {
				if tried[s] < 2 {
					return false
				}
			}
			return true
		})
		up := time.Now()
		during := r.attemptsBetween(down, up)
		answers := map[string]int{}
		for _, at := range during {
			if at.outcome == pubAcked {
				t.Errorf("%s's publish %q to shard %d, started %v after two of three nodes died, acknowledged at offset %d",
					at.client, at.payload, at.shard, at.start.Sub(down), at.offset)
			}
			answers[fmt.Sprintf("shard %d: %s", at.shard, errorKind(at.err))]++
		}
		t.Logf("%d publishes tried with two nodes down: %v", len(during), answers)
		r.restart(a)
		r.restart(b)
	}})
}

// waitGone waits until the nodes' processes have exited (they were sent
// SIGKILL).
func (r *historyRun) waitGone(names ...string) {
	r.t.Helper()
	for _, name := range names {
		n := r.d.node(name)
		if cmd := r.d.restarts[name]; cmd != nil {
			cmd.Wait()
		}
		eventually(r.t, 10*time.Second, name+" to exit", func() bool { return !processAlive(n.PID) })
	}
}

// SIGKILL all three nodes together, then start them again: with quorum
// acknowledgements and fsync always nothing acknowledged is lost.
func TestHistoryAllBrokersKilled(t *testing.T) {
	runHistory(t, historyScenario{shards: 3, failovers: 1, round: func(ctx context.Context, r *historyRun, round int) {
		var names []string
		for _, n := range r.d.nodes {
			names = append(names, n.Name)
		}
		t.Logf("round %d: SIGKILL %v together", round, names)
		for _, name := range names {
			r.d.signal(name, syscall.SIGKILL)
		}
		r.waitGone(names...)
		time.Sleep(500 * time.Millisecond)
		r.restartTogether(names...)
	}})
}

// restartTogether starts the nodes again as restart does, all before
// waiting for any to be ready: a lone node of three never is (its control
// plane has no majority), so restarting them one by one would wait
// forever on the first. A node that exits before it is ready (a port of
// its taken meanwhile by some connection's source port: the kill freed
// it) is started again, up to five times.
func (r *historyRun) restartTogether(names ...string) {
	r.t.Helper()
	http.DefaultClient.CloseIdleConnections()
	starts := map[string]int{}
	for _, name := range names {
		r.d.startNode(name)
		starts[name]++
	}
	deadline := time.Now().Add(90 * time.Second)
	for _, name := range names {
		for !r.d.ready(name) {
			if !processAlive(r.d.node(name).PID) {
				r.d.restarts[name].Wait()
				if starts[name] == 5 {
					r.t.Fatalf("%s exited %d times before it was ready:\n%s", name, starts[name], r.d.restLogs[name])
				}
				r.t.Logf("%s exited before it was ready; starting it again:\n%s", name, r.d.restLogs[name])
				time.Sleep(time.Second)
				r.d.startNode(name)
				starts[name]++
			}
			if time.Now().After(deadline) {
				r.t.Fatalf("timed out waiting for %s /ready", name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// restart is the harness's restart, after closing the test's idle HTTP
// connections, whose source ports could take a port the node listens on.
func (r *historyRun) restart(name string) {
	r.t.Helper()
	http.DefaultClient.CloseIdleConnections()
	r.d.restart(name)
}

// SIGKILL a shard's leader and, right after, the node whose control plane
// leads the Raft group: with three voters two down leave no majority, so
// the control-plane leader's node is started again a second later, and
// the surviving majority (it and the third node) must elect a control
// plane leader and fail the shard over while its old leader is still
// down; then that one is started again.
func TestHistoryControlPlaneLeaderKilledAfterAShardLeader(t *testing.T) {
	runHistory(t, historyScenario{shards: 3, failovers: 1, round: func(ctx context.Context, r *historyRun, round int) {
		cp := r.d.raftLeader(ctx).Name
		leaders := r.leaders(ctx)
		victim := ""
		for i := range leaders {
			if l := leaders[(round+i)%len(leaders)]; l != cp {
				victim = l
				break
			}
		}
		if victim == "" { // the control plane's leader leads every shard: one kill does both
			t.Logf("round %d: SIGKILL %s, the control plane's Raft leader and every shard's leader", round, cp)
			r.d.kill9(cp)
			r.waitProgress(time.Now(), 10, failoverWait)
			r.restart(cp)
			return
		}
		t.Logf("round %d: SIGKILL %s (a shard leader), then %s (the control plane's Raft leader)", round, victim, cp)
		r.d.signal(victim, syscall.SIGKILL)
		r.d.signal(cp, syscall.SIGKILL)
		r.waitGone(victim, cp)
		time.Sleep(time.Second)
		r.restart(cp)
		r.waitProgress(time.Now(), 10, failoverWait)
		r.restart(victim)
	}})
}
