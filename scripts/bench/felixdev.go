package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// felixDev is one `felix dev --nodes N` child: the cluster users run on one
// machine, each node a `felix serve` process felix dev starts (in its own
// process group) and stops on SIGTERM. Every port is free ones felix dev
// picks on 127.0.0.1.
type felixDev struct {
	dir   string // felix dev's --data-dir: client.json, dev.json, node1..
	bin   string
	proc  *child
	nodes []devNode
}

// devNode is the part of a node's dev.json record the harness uses.
type devNode struct {
	Name       string `json:"name"`
	NodeID     string `json:"node_id"` // the broker's id, as placement names it
	RaftID     uint64 `json:"raft_id"` // the control-plane member's id
	PID        int    `json:"pid"`
	BrokerAddr string `json:"broker_addr"` // QUIC and TLS over TCP share the port
	DataDir    string `json:"data_dir"`
}

// devReadyLine is what felix dev prints once every node is ready.
const devReadyLine = "-node cluster is ready"

// startFelixDev runs `felix dev --nodes nodes` with its state under dir,
// the benchmark environment and env passed to every node, and waits until
// it reports the cluster ready.
func startFelixDev(ctx context.Context, p *procs, bin, dir string, nodes int, env []string) (*felixDev, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	d := &felixDev{dir: filepath.Join(dir, "felix-dev"), bin: bin}
	cmd := exec.Command(bin, "dev", "--nodes", strconv.Itoa(nodes), "--data-dir", d.dir, "--stop-timeout", "15s")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), felixEnv...), env...)
	out := &tailBuffer{max: 64 << 10}
	cmd.Stdout = out
	c, err := p.start("felix dev", cmd)
	if err != nil {
		return nil, err
	}
	d.proc = c
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(out.String(), devReadyLine) {
		select {
		case <-c.exited:
			return nil, fmt.Errorf("felix dev exited before its cluster was ready: %v\nstdout: %s\nstderr: %s",
				c.err, clip(out.String(), 600), clip(c.stderr.String(), 600))
		case <-ctx.Done():
			d.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("felix dev's cluster was not ready within 90s; stdout: %s", clip(out.String(), 600))
		}
	}
	b, err := os.ReadFile(filepath.Join(d.dir, "dev.json"))
	if err == nil {
		var f struct{ Nodes []devNode }
		if err = json.Unmarshal(b, &f); err == nil {
			d.nodes = f.Nodes
		}
	}
	if err != nil || len(d.nodes) != nodes {
		d.stop()
		return nil, fmt.Errorf("felix dev's dev.json: %d nodes of %d (%v)", len(d.nodes), nodes, err)
	}
	return d, nil
}

// pids are the nodes' process ids.
func (d *felixDev) pids() []int {
	out := make([]int, len(d.nodes))
	for i, n := range d.nodes {
		out[i] = n.PID
	}
	return out
}

// alive says whether felix dev and every node still run.
func (d *felixDev) alive() bool {
	if !d.proc.alive() {
		return false
	}
	for _, n := range d.nodes {
		if !d.isNode(n.PID) {
			return false
		}
	}
	return true
}

// isNode says whether pid is a running (not zombie) process of the felix
// binary: a node felix dev started and that has not exited.
func (d *felixDev) isNode(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(stat), ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
		return false
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return err == nil && filepath.Clean(exe) == filepath.Clean(d.bin)
}

// stop sends felix dev SIGTERM, which stops every node (SIGTERM, then
// SIGKILL after --stop-timeout), and waits; a node still running after
// that (felix dev was killed first) is killed by its recorded PID, once
// it is checked to be this binary.
func (d *felixDev) stop() {
	d.proc.stop(30 * time.Second)
	for _, n := range d.nodes {
		if n.PID > 0 && d.isNode(n.PID) {
			syscall.Kill(n.PID, syscall.SIGKILL)
		}
	}
}

// storedBytes is the size of the durable logs under each node's data
// directory, by node.
func (d *felixDev) storedBytes() []int64 {
	out := make([]int64, len(d.nodes))
	for i, n := range d.nodes {
		out[i] = dirBytes(filepath.Join(n.DataDir, "log", "streams"))
	}
	return out
}

// bench runs `felix bench <args> -o json` against the cluster through its
// client.json, bounded by limit.
func (d *felixDev) bench(ctx context.Context, p *procs, limit time.Duration, args ...string) (figures, error) {
	return runFelixBench(ctx, p, d.bin, nil, limit, append(args, "--data-dir", d.dir)...)
}
