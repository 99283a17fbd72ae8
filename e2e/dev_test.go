package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// devBrokers runs `felix admin brokers list -o json` against the cluster.
func (d *devCluster) brokers(ctx context.Context) map[string]wire.Broker {
	d.t.Helper()
	var list []wire.Broker
	if err := json.Unmarshal([]byte(d.mustFelix(ctx, "admin", "brokers", "list", "-o", "json")), &list); err != nil {
		d.t.Fatalf("brokers list: %v", err)
	}
	out := map[string]wire.Broker{}
	for _, b := range list {
		out[b.NodeID] = b
	}
	return out
}

// placement runs `felix admin placement show` with args and -o json.
func (d *devCluster) placement(ctx context.Context, args ...string) wire.PlacementView {
	d.t.Helper()
	var v wire.PlacementView
	out := d.mustFelix(ctx, append([]string{"admin", "placement", "show"}, append(args, "-o", "json")...)...)
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		d.t.Fatalf("placement show %v: %v\n%s", args, err, out)
	}
	return v
}

// owners counts the shards of v each broker serves; unserved shards
// count under "".
func owners(v wire.PlacementView) map[string]int {
	out := map[string]int{}
	for _, a := range v.Shards {
		if a.Generation == 0 || a.Unavailable != "" {
			out[""]++
			continue
		}
		out[a.NodeID]++
	}
	return out
}

// felix dev starts three nodes that form one cluster: three live brokers,
// three voters of one Raft group, a six-shard stream placed over all
// three brokers, and every node ready. Client commands given --data-dir
// reach it.
func TestDevStartsAThreeNodeCluster(t *testing.T) {
	d := startDev(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, n := range d.nodes {
		if n.PID <= 0 || !processAlive(n.PID) || len(n.Argv) < 2 || n.Argv[1] != "serve" || n.DataDir == "" {
			t.Fatalf("dev.json: %+v", n)
		}
		if !d.ready(n.Name) {
			t.Errorf("%s is not ready", n.Name)
		}
		resp, err := http.Get(n.ControlPlaneURL + "/ready")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s control plane /ready: %v %v", n.Name, resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
	if len(d.client.BrokerAddr) == 0 {
		t.Fatalf("client.json: %+v", d.client)
	}

	eventually(t, 30*time.Second, "three live brokers", func() bool {
		b := d.brokers(ctx)
		for _, id := range []string{"broker-1", "broker-2", "broker-3"} {
			if b[id].State != wire.BrokerLive {
				return false
			}
		}
		return len(b) == 3
	})

	var members struct {
		Leader  uint64 `json:"leader"`
		Members []struct {
			ID    uint64 `json:"id"`
			Voter bool   `json:"voter"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(d.mustFelix(ctx, "admin", "members", "list", "-o", "json")), &members); err != nil {
		t.Fatal(err)
	}
	if len(members.Members) != 3 || members.Leader == 0 {
		t.Fatalf("control plane members: %+v", members)
	}
	for _, m := range members.Members {
		if !m.Voter {
			t.Errorf("member %d is not a voter", m.ID)
		}
	}

	d.mustFelix(ctx, "admin", "stream", "create", "orders", "--shards", "6")
	eventually(t, 30*time.Second, "six shards placed over three brokers", func() bool {
		o := owners(d.placement(ctx, "orders"))
		return o[""] == 0 && o["broker-1"] > 0 && o["broker-2"] > 0 && o["broker-3"] > 0
	})
	if out := d.mustFelix(ctx, "pub", "orders", "hello"); strings.Contains(out, "error") {
		t.Fatalf("pub: %s", out)
	}
	// The client commands reach the cluster through every broker
	// client.json names (a ClusterClient), and through one for the few
	// requests that need one broker's connection.
	d.mustFelix(ctx, "admin", "cache", "create", "sessions")
	d.mustFelix(ctx, "cache", "put", "sessions", "user-1", "hello")
	if out := d.mustFelix(ctx, "cache", "get", "sessions", "user-1"); strings.TrimSpace(out) != "hello" {
		t.Fatalf("cache get: %q", out)
	}
	d.mustFelix(ctx, "admin", "stream", "info", "orders")
}

// A node killed with SIGKILL is marked down; started again with the
// command line dev.json records, it comes back live under the same id.
func TestDevRestartsAKilledNodeFromDevJSON(t *testing.T) {
	d := startDev(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eventually(t, 30*time.Second, "broker-3 live", func() bool { return d.brokers(ctx)["broker-3"].State == wire.BrokerLive })

	d.kill9("node3")
	eventually(t, 30*time.Second, "broker-3 marked down", func() bool { return d.brokers(ctx)["broker-3"].State == wire.BrokerDown })
	if !strings.Contains(d.stderr.String(), "node3 (pid") {
		eventually(t, 10*time.Second, "felix dev to report node3's exit", func() bool {
			return strings.Contains(d.stderr.String(), "node3 (pid")
		})
	}
	if !d.ready("node1") || !d.ready("node2") {
		t.Fatal("the other nodes stopped being ready")
	}

	d.restart("node3")
	eventually(t, 30*time.Second, "broker-3 live again", func() bool { return d.brokers(ctx)["broker-3"].State == wire.BrokerLive })
	d.mustFelix(ctx, "admin", "stream", "create", "after-restart", "--shards", "3")
	eventually(t, 30*time.Second, "a new stream placed on all three brokers", func() bool {
		o := owners(d.placement(ctx, "after-restart"))
		return o[""] == 0 && len(o) == 3
	})
}

// SIGINT to felix dev stops every node it started and then exits 0:
// no node process is left, and dev.json records none running.
func TestDevStopsEveryNodeOnInterrupt(t *testing.T) {
	dir := t.TempDir()
	d := startDevIn(t, dir, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d.mustFelix(ctx, "admin", "stream", "create", "kept", "--durable")
	if err := d.interrupt(40 * time.Second); err != nil {
		t.Fatalf("felix dev exit: %v\nstderr:\n%s", err, d.stderr)
	}
	for _, n := range d.nodes {
		if processAlive(n.PID) {
			t.Errorf("%s (pid %d) still runs", n.Name, n.PID)
		}
	}
	for _, n := range d.readDevJSON() {
		if n.PID != 0 {
			t.Errorf("dev.json still records %s as pid %d", n.Name, n.PID)
		}
	}
	for _, name := range []string{"node1", "node2", "node3"} {
		if !strings.Contains(d.stderr.String(), name+" | ") || !strings.Contains(d.stderr.String(), "stopped") {
			t.Errorf("no prefixed output of %s", name)
		}
	}
	if !strings.Contains(d.stderr.String(), "every node stopped") {
		t.Errorf("felix dev did not say every node stopped:\n%s", d.stderr)
	}

	for i := range d.nodes {
		d.nodes[i].PID = 0 // gone: the cleanup must not signal a PID reused since
	}

	// felix dev again on the same directory brings the same cluster back,
	// on the same ports; another, elsewhere, runs beside it.
	again := startDevIn(t, dir, 3)
	for i, n := range again.nodes {
		if n.BrokerAddr != d.nodes[i].BrokerAddr || n.ControlPlaneURL != d.nodes[i].ControlPlaneURL {
			t.Errorf("%s came back on %s, %s; was %s, %s", n.Name, n.BrokerAddr, n.ControlPlaneURL, d.nodes[i].BrokerAddr, d.nodes[i].ControlPlaneURL)
		}
	}
	again.mustFelix(ctx, "admin", "stream", "get", "kept")
	other := startDev(t, 1)
	other.mustFelix(ctx, "admin", "stream", "create", "elsewhere")
	if _, _, code := again.felix(ctx, "admin", "stream", "get", "elsewhere"); code == 0 {
		t.Error("a stream of the other cluster is visible in this one")
	}
}

// A felix dev killed outright (kill -9) leaves no node behind: each gets
// SIGTERM from the kernel (Linux) and stops.
func TestDevNodesStopWhenFelixDevIsKilled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	d := startDev(t, 3)
	d.cmd.Process.Kill()
	<-d.exited
	for _, n := range d.nodes {
		eventually(t, 30*time.Second, n.Name+" to stop after felix dev died", func() bool { return !processAlive(n.PID) })
	}
}
