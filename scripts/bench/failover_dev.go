package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// What the failover workload asks of a felix dev cluster: client commands
// through its client.json (`felix admin ... --data-dir`), the placement of
// a stream, the control plane's Raft leader, an SDK configuration, and a
// SIGKILL of one node.

// devClientJSON is the part of felix dev's client.json the SDK needs.
type devClientJSON struct {
	CAFile    string `json:"ca_file"`    // relative to the data dir
	TokenFile string `json:"token_file"` // relative to the data dir
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
}

// cliTimeout bounds one client command against the cluster.
const cliTimeout = 30 * time.Second

// cli runs `felix <args> --data-dir <dir>` and returns its stdout, or an
// error with the tail of its output when it fails or outlives cliTimeout.
func (d *felixDev) cli(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.bin, append(args, "--data-dir", d.dir)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("felix %s: %w; stderr: %s", strings.Join(args, " "), err, clip(errOut.String(), 400))
	}
	return out.Bytes(), nil
}

// placement is `felix admin placement show name -o json`.
func (d *felixDev) placement(ctx context.Context, name string) (wire.PlacementView, error) {
	var v wire.PlacementView
	out, err := d.cli(ctx, "admin", "placement", "show", name, "-o", "json")
	if err == nil {
		err = json.Unmarshal(out, &v)
	}
	return v, err
}

// raftLeader is the control plane's Raft leader as `felix admin members
// list -o json` reports it (a raft id; 0 when none is known).
func (d *felixDev) raftLeader(ctx context.Context) (uint64, error) {
	var m struct {
		Leader uint64 `json:"leader"`
	}
	out, err := d.cli(ctx, "admin", "members", "list", "-o", "json")
	if err == nil {
		err = json.Unmarshal(out, &m)
	}
	return m.Leader, err
}

// nodeByID returns the node whose broker is nodeID.
func (d *felixDev) nodeByID(nodeID string) (devNode, bool) {
	for _, n := range d.nodes {
		if n.NodeID == nodeID {
			return n, true
		}
	}
	return devNode{}, false
}

// sdkConfig reads client.json and returns an SDK configuration over
// transport tr with the admin token it names (every other option at its
// default: the 6 s idle timeout, 2 s keep-alive), the namespace, and
// every node's broker address as the seeds of a ClusterClient.
func (d *felixDev) sdkConfig(tr string) (felix.Config, string, []string, error) {
	var c devClientJSON
	b, err := os.ReadFile(filepath.Join(d.dir, "client.json"))
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return felix.Config{}, "", nil, fmt.Errorf("felix dev's client.json: %w", err)
	}
	tok, err := os.ReadFile(filepath.Join(d.dir, c.TokenFile))
	if err != nil {
		return felix.Config{}, "", nil, fmt.Errorf("felix dev's token: %w", err)
	}
	var seeds []string
	for _, n := range d.nodes {
		seeds = append(seeds, n.BrokerAddr)
	}
	cfg := felix.Config{Addr: seeds[0], CAFile: filepath.Join(d.dir, c.CAFile), Tenant: c.Tenant,
		Token: strings.TrimSpace(string(tok)), Transport: tr}
	return cfg, c.Namespace, seeds, nil
}

// kill9 sends SIGKILL to node n, once its PID is checked to be a running
// node of this binary, and returns the moment the signal was sent.
func (d *felixDev) kill9(n devNode) (time.Time, error) {
	if !d.isNode(n.PID) {
		return time.Time{}, fmt.Errorf("%s (pid %d) is not a running felix node", n.Name, n.PID)
	}
	if err := syscall.Kill(n.PID, syscall.SIGKILL); err != nil {
		return time.Time{}, fmt.Errorf("SIGKILL %s (pid %d): %w", n.Name, n.PID, err)
	}
	return time.Now(), nil
}
