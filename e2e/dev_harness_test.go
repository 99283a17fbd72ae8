package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// clusterTimings shorten a cluster's clocks so that failures are noticed
// within a test's patience: heartbeats every 200 ms, a broker down after
// 1.5 s without one, shards re-placed 300 ms after that and every 300 ms.
var clusterTimings = []string{
	"FELIX_NODE_HEARTBEAT_INTERVAL_MS=200",
	"FELIX_NODE_EXPIRY_TIMEOUT_MS=1500",
	"FELIX_NODE_REGRANT_MARGIN_MS=300",
	"FELIX_NODE_EXPIRY_SWEEP_INTERVAL_MS=200",
	"FELIX_SHARD_RECONCILE_INTERVAL_MS=300",
}

// devNode is one node as felix dev's dev.json records it.
type devNode struct {
	Name            string   `json:"name"`
	RaftID          int      `json:"raft_id"`
	NodeID          string   `json:"node_id"`
	PID             int      `json:"pid"`
	BrokerAddr      string   `json:"broker_addr"`
	PeerAddr        string   `json:"peer_addr"`
	ControlPlaneURL string   `json:"controlplane_url"`
	RaftPeerURL     string   `json:"raft_peer_url"`
	MetricsAddr     string   `json:"metrics_addr"`
	DataDir         string   `json:"data_dir"`
	Argv            []string `json:"argv"`
	Env             []string `json:"env"`
}

// devCluster is one `felix dev` process and the nodes it started. A
// node the test restarted runs as the test's own child (restarted).
type devCluster struct {
	*proc
	t        *testing.T
	dataDir  string // felix dev's --data-dir
	nodes    []devNode
	client   clientJSON
	mu       sync.Mutex
	restarts map[string]*exec.Cmd // by node name: the latest restart's process
	restLogs map[string]*syncBuffer
}

// startDev runs `felix dev --nodes n` in a temporary directory with the
// cluster timings (and env after them), waits until it reports the
// cluster ready, and reads dev.json and client.json. At cleanup it
// interrupts felix dev, and kills whatever node is still running.
func startDev(t *testing.T, n int, env ...string) *devCluster {
	t.Helper()
	return startDevIn(t, t.TempDir(), n, env...)
}

// startDevIn is startDev run in the directory dir, with its state in
// dir/felix-dev (felix dev's default).
func startDevIn(t *testing.T, dir string, n int, env ...string) *devCluster {
	t.Helper()
	cmd := exec.Command(felixBin, "dev", "--nodes", fmt.Sprint(n), "--stop-timeout", "15s")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), clusterTimings...), env...)
	d := &devCluster{t: t, dataDir: filepath.Join(dir, "felix-dev"), proc: startProc(t, "felix dev", cmd),
		restarts: map[string]*exec.Cmd{}, restLogs: map[string]*syncBuffer{}}
	t.Cleanup(d.cleanup)
	d.waitOutput(t, "felix dev", "the cluster ready", 90*time.Second, func(stdout string) bool {
		return strings.Contains(stdout, "cluster is ready")
	})
	d.nodes = d.readDevJSON()
	if len(d.nodes) != n {
		t.Fatalf("dev.json lists %d nodes, want %d", len(d.nodes), n)
	}
	b, err := os.ReadFile(filepath.Join(d.dataDir, "client.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d.client); err != nil {
		t.Fatalf("client.json: %v", err)
	}
	return d
}

func (d *devCluster) readDevJSON() []devNode {
	d.t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dataDir, "dev.json"))
	if err != nil {
		d.t.Fatal(err)
	}
	var df struct{ Nodes []devNode }
	if err := json.Unmarshal(b, &df); err != nil {
		d.t.Fatalf("dev.json: %v", err)
	}
	return df.Nodes
}

// interrupt sends SIGINT to felix dev and waits up to grace for it to
// exit (it stops every node first).
func (d *devCluster) interrupt(grace time.Duration) error {
	stopProcess(d.t, "felix dev", d.cmd.Process, d.exited, syscall.SIGINT, grace)
	return d.exitErr
}

func (d *devCluster) cleanup() {
	for _, n := range d.nodes {
		syscall.Kill(n.PID, syscall.SIGCONT) // a frozen node cannot stop
	}
	select {
	case <-d.exited:
	default:
		d.interrupt(40 * time.Second)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, cmd := range d.restarts {
		cmd.Process.Signal(syscall.SIGCONT)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		stopProcess(d.t, "restarted "+name, cmd.Process, done, syscall.SIGTERM, 20*time.Second)
	}
	for _, n := range d.nodes { // nothing felix dev started may outlive the test
		if n.PID > 0 && processAlive(n.PID) && d.restarts[n.Name] == nil {
			syscall.Kill(n.PID, syscall.SIGKILL)
		}
	}
	if d.t.Failed() {
		d.t.Logf("felix dev stdout:\n%s\nstderr:\n%s", d.stdout, d.stderr)
		for name, b := range d.restLogs {
			d.t.Logf("restarted %s output:\n%s", name, b)
		}
	}
}

// processAlive reports whether pid is a process that has not exited (a
// zombie, exited but not yet reaped by its parent, counts as exited).
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: trust kill(0)
	}
	// The state follows the command name in parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// node returns the node named name ("node1", ...).
func (d *devCluster) node(name string) *devNode {
	d.t.Helper()
	for i := range d.nodes {
		if d.nodes[i].Name == name {
			return &d.nodes[i]
		}
	}
	d.t.Fatalf("no node %s", name)
	return nil
}

// signal sends sig to a node's process: syscall.SIGKILL, SIGSTOP, SIGCONT.
func (d *devCluster) signal(name string, sig syscall.Signal) {
	d.t.Helper()
	n := d.node(name)
	if err := syscall.Kill(n.PID, sig); err != nil {
		d.t.Fatalf("%v to %s (pid %d): %v", sig, name, n.PID, err)
	}
}

// kill9 kills a node with SIGKILL and waits until its process is gone.
func (d *devCluster) kill9(name string) {
	d.t.Helper()
	n := d.node(name)
	d.signal(name, syscall.SIGKILL)
	if cmd := d.restarts[name]; cmd != nil {
		cmd.Wait()
	}
	eventually(d.t, 10*time.Second, name+" to exit", func() bool { return !processAlive(n.PID) })
}

// restart starts a node again from dev.json's argv and env, as a user
// would, and waits until it is ready. The process is the test's child.
func (d *devCluster) restart(name string) {
	d.t.Helper()
	n, out := d.startNode(name)
	// A node that cannot start (a port taken meanwhile: the kill freed
	// it) fails the test at once, and another process answering /ready at
	// its old metrics address is not taken for it.
	alive := func() {
		if !processAlive(n.PID) {
			d.t.Fatalf("restarted %s exited:\n%s", name, out)
		}
	}
	eventually(d.t, 60*time.Second, name+" /ready", func() bool {
		alive()
		return d.ready(name)
	})
	time.Sleep(200 * time.Millisecond)
	alive()
}

// startNode starts a node again from dev.json's argv and env as the
// test's child, without waiting for it, and returns it and its output.
func (d *devCluster) startNode(name string) (*devNode, *syncBuffer) {
	d.t.Helper()
	n := d.node(name)
	cmd := exec.Command(n.Argv[0], n.Argv[1:]...)
	cmd.Env = append(os.Environ(), n.Env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		d.t.Fatalf("restart %s: %v", name, err)
	}
	d.mu.Lock()
	d.restarts[name], d.restLogs[name] = cmd, out
	d.mu.Unlock()
	n.PID = cmd.Process.Pid
	return n, out
}

// waitReady waits until the node's broker answers /ready with "ready".
func (d *devCluster) waitReady(name string, within time.Duration) {
	d.t.Helper()
	eventually(d.t, within, name+" /ready", func() bool { return d.ready(name) })
}

func (d *devCluster) ready(name string) bool {
	resp, err := http.Get("http://" + d.node(name).MetricsAddr + "/ready")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct{ Status string }
	return json.NewDecoder(resp.Body).Decode(&h) == nil && resp.StatusCode == http.StatusOK && h.Status == "ready"
}

// felix runs a client command against the cluster (--data-dir) and
// returns its stdout, stderr and exit code.
func (d *devCluster) felix(ctx context.Context, args ...string) (string, string, int) {
	d.t.Helper()
	return runFelix(d.t, ctx, "", append(args, "--data-dir", d.dataDir)...)
}

// mustFelix is felix that fails the test on a non-zero exit.
func (d *devCluster) mustFelix(ctx context.Context, args ...string) string {
	d.t.Helper()
	return mustRunFelix(d.t, ctx, "", append(args, "--data-dir", d.dataDir)...)
}

// adminToken is the token client.json names (node1's admin token, valid
// on every broker).
func (d *devCluster) adminToken() string {
	d.t.Helper()
	return d.client.token(d.t, d.dataDir)
}

// sdkConfig is an SDK configuration for the cluster with token, aimed at
// node name's broker.
func (d *devCluster) sdkConfig(name, token string) felix.Config {
	return d.client.config(d.dataDir, d.node(name).BrokerAddr, token)
}

// connect opens an SDK client to one node's broker, closed at test end.
func (d *devCluster) connect(ctx context.Context, name, token string) *felix.Client {
	d.t.Helper()
	return connectSDK(d.t, ctx, d.sdkConfig(name, token), name)
}

// connectCluster opens a ClusterClient seeded with every broker.
func (d *devCluster) connectCluster(ctx context.Context, token string) *felix.ClusterClient {
	d.t.Helper()
	var seeds []string
	for _, n := range d.nodes {
		seeds = append(seeds, n.BrokerAddr)
	}
	cc, err := felix.ConnectCluster(ctx, seeds, d.sdkConfig(d.nodes[0].Name, token))
	if err != nil {
		d.t.Fatalf("connect to the cluster: %v", err)
	}
	d.t.Cleanup(func() { cc.Close() })
	return cc
}

// metric returns the sum of every sample of the family named name on a
// node's /metrics (0 when there is none), or an error when the node does
// not answer.
func (d *devCluster) metric(nodeName, name string) (float64, error) {
	resp, err := http.Get("http://" + d.node(nodeName).MetricsAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			var v float64
			fields := strings.Fields(line)
			fmt.Sscan(fields[len(fields)-1], &v)
			sum += v
		}
	}
	return sum, sc.Err()
}
