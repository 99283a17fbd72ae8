package dev

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/felixmq/felix/internal/atomicfile"
	"github.com/felixmq/felix/internal/freeport"
)

// File names under --data-dir.
const (
	devJSONFile    = "dev.json"
	clientJSONFile = "client.json"
	caDir          = "tls"
	maxDevJSON     = 1 << 20
)

// devFile is <data-dir>/dev.json.
type devFile struct {
	Nodes []nodeInfo `json:"nodes"`
}

// nodeInfo is one node of the cluster as dev.json records it. Argv and
// Env start it again: run Argv with Env added to the environment.
type nodeInfo struct {
	Name            string   `json:"name"`    // node1, node2, ...
	RaftID          uint64   `json:"raft_id"` // its member id in the control plane's Raft group
	NodeID          string   `json:"node_id"` // its broker's node id
	PID             int      `json:"pid"`     // 0 when not running
	BrokerAddr      string   `json:"broker_addr"`
	PeerAddr        string   `json:"peer_addr"`
	ControlPlaneURL string   `json:"controlplane_url"`
	MetricsAddr     string   `json:"metrics_addr"`
	RaftPeerURL     string   `json:"raft_peer_url"`
	DataDir         string   `json:"data_dir"`
	Argv            []string `json:"argv"`
	Env             []string `json:"env"`
}

// ports are one node's loopback ports.
type ports struct {
	broker, peer, metrics, controlPlane, raft int
}

// plan is the cluster to run: its nodes with their addresses, argv and
// env, computed before anything starts.
type plan struct {
	dataDir string // absolute
	nodes   []nodeInfo
}

// portPicker gives free loopback ports: TCP ones for HTTP and Raft, and
// for the broker and peer listeners ports free on both UDP (QUIC) and
// TCP (TLS over TCP listens on the same number). A port is checked by
// binding it a moment; another process may take it before the child
// binds it, which the child then reports. Without a base port, ports are
// picked at random below the kernel's ephemeral range, where outgoing
// connections do not take them meanwhile.
type portPicker struct {
	base int          // 0: ports freeport picks
	used map[int]bool // handed out already
}

func (p *portPicker) free(both bool, want int) (int, error) {
	if want > 0 && !p.used[want] && freeport.Free(both, want) {
		p.used[want] = true
		return want, nil
	}
	if p.base > 0 {
		for port := p.base; port < 65536; port++ {
			if !p.used[port] && freeport.Free(both, port) {
				p.base = port + 1
				p.used[port] = true
				return port, nil
			}
		}
		return 0, errors.New("--base-port: no free port left above it")
	}
	port, err := freeport.Pick(both, func(port int) bool { return p.used[port] })
	if err != nil {
		return 0, err
	}
	p.used[port] = true
	return port, nil
}

// portsOf recovers a node's ports from dev.json, so a restart reuses them.
func portsOf(n nodeInfo) ports {
	return ports{
		broker:       portOf(n.BrokerAddr),
		peer:         portOf(n.PeerAddr),
		metrics:      portOf(n.MetricsAddr),
		controlPlane: portOf(strings.TrimPrefix(n.ControlPlaneURL, "http://")),
		raft:         portOf(strings.TrimPrefix(n.RaftPeerURL, "http://")),
	}
}

func portOf(hostPort string) int {
	_, p, err := net.SplitHostPort(hostPort)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}

// newPlan lays out a cluster of count nodes under dataDir for the
// executable exe. prev (dev.json of an earlier run, may be nil) gives the
// ports to reuse; env is the FELIX_* settings every child gets.
func newPlan(exe, dataDir string, count, basePort int, prev *devFile, env []string) (*plan, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	pick := &portPicker{base: basePort, used: map[int]bool{}}
	want := make([]ports, count)
	if prev != nil && len(prev.Nodes) == count && basePort == 0 {
		for i, n := range prev.Nodes {
			want[i] = portsOf(n)
		}
	}
	got := make([]ports, count)
	for i := range got {
		w, g := want[i], &got[i]
		for _, f := range []struct {
			dst  *int
			both bool // TCP and UDP
			want int
		}{{&g.broker, true, w.broker}, {&g.peer, true, w.peer}, {&g.metrics, false, w.metrics},
			{&g.controlPlane, false, w.controlPlane}, {&g.raft, false, w.raft}} {
			if *f.dst, err = pick.free(f.both, f.want); err != nil {
				return nil, err
			}
		}
	}
	var peers []string
	for i, g := range got {
		peers = append(peers, fmt.Sprintf("%d=http://%s", i+1, loopback(g.raft)))
	}
	p := &plan{dataDir: abs}
	for i, g := range got {
		id := uint64(i + 1)
		n := nodeInfo{
			Name:            fmt.Sprintf("node%d", id),
			RaftID:          id,
			NodeID:          fmt.Sprintf("broker-%d", id),
			BrokerAddr:      loopback(g.broker),
			PeerAddr:        loopback(g.peer),
			ControlPlaneURL: "http://" + loopback(g.controlPlane),
			MetricsAddr:     loopback(g.metrics),
			RaftPeerURL:     "http://" + loopback(g.raft),
			DataDir:         filepath.Join(abs, fmt.Sprintf("node%d", id)),
			Env:             env,
		}
		n.Argv = []string{exe, "serve",
			"--data-dir", n.DataDir,
			"--broker-addr", n.BrokerAddr,
			"--peer-addr", n.PeerAddr,
			"--controlplane-addr", loopback(g.controlPlane),
			"--metrics-addr", n.MetricsAddr,
			"--raft-node-id", strconv.FormatUint(id, 10),
			"--raft-peers", strings.Join(peers, ","),
		}
		p.nodes = append(p.nodes, n)
	}
	return p, nil
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// perNodeVars are the FELIX_* settings that name one node: felix dev
// passes none of them from its own environment to every node.
var perNodeVars = map[string]bool{
	"FELIX_NODE_ID": true, "FELIX_NODE_ADVERTISE_ADDR": true, "FELIX_NODE_PEER_ADVERTISE_ADDR": true,
	"FELIX_NODE_TLS_CERT": true, "FELIX_NODE_TLS_KEY": true, "FELIX_NODE_TLS_CA": true,
	"FELIX_RAFT_NODE_ID": true, "FELIX_RAFT_PEERS": true, "FELIX_RAFT_DATA_DIR": true,
	"FELIX_DATA_DIR": true, "FELIX_CONFIG": true,
}

// inheritedEnv is environ less the variables childEnv keeps from every
// node (perNodeVars and felix dev's own FELIX_DEV_*): a child
// starts from it, so they reach a node only through its own env.
func inheritedEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if perNodeVars[k] || strings.HasPrefix(k, devOwnPrefix) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// childEnv is the part of the environment every node inherits and
// dev.json records: the FELIX_* settings, less those that name one node
// (they would give every node the same identity or address).
// FELIX_DEV_* variables are felix dev's own (overrides.go) and are not
// passed on either.
func childEnv(environ []string) (env, dropped []string) {
	env = []string{}
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "FELIX_") || strings.HasPrefix(k, devOwnPrefix) {
			continue
		}
		if perNodeVars[k] {
			dropped = append(dropped, k)
			continue
		}
		env = append(env, kv)
	}
	return env, dropped
}

// readDevFile reads dev.json; a missing file is (nil, nil).
func readDevFile(dataDir string) (*devFile, error) {
	path := filepath.Join(dataDir, devJSONFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(b) > maxDevJSON {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxDevJSON)
	}
	var df devFile
	if err := json.Unmarshal(b, &df); err != nil {
		return nil, fmt.Errorf("%s: %w (remove it to start afresh on new ports)", path, err)
	}
	return &df, nil
}

// writeDevFile (re)writes dev.json with the nodes' current PIDs.
func writeDevFile(dataDir string, nodes []nodeInfo) error {
	b, err := json.MarshalIndent(devFile{Nodes: nodes}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dataDir, devJSONFile), append(b, '\n'), 0o644)
}

// clientFile is the cluster's client.json: the fields felix serve writes
// (naming node1) plus every node's broker and control plane, which the
// client commands fall back on when the first does not answer.
type clientFile struct {
	BrokerAddr       string   `json:"broker_addr"`
	ControlPlaneURL  string   `json:"controlplane_url"`
	BrokerAddrs      []string `json:"broker_addrs"`
	ControlPlaneURLs []string `json:"controlplane_urls"`
	CAFile           string   `json:"ca_file"`
	TokenFile        string   `json:"token_file"`
	Tenant           string   `json:"tenant"`
	Namespace        string   `json:"namespace"`
}

// writeClientFile writes <data-dir>/client.json naming every node. Its
// token is node1's admin token: the signing keys are the Raft group's, so
// every broker accepts it.
func writeClientFile(p *plan) error {
	cf := clientFile{CAFile: filepath.Join(caDir, "ca.pem"), TokenFile: filepath.Join(p.nodes[0].Name, "admin.token"),
		Tenant: "default", Namespace: "default"}
	for _, n := range p.nodes {
		cf.BrokerAddrs = append(cf.BrokerAddrs, n.BrokerAddr)
		cf.ControlPlaneURLs = append(cf.ControlPlaneURLs, n.ControlPlaneURL)
	}
	cf.BrokerAddr, cf.ControlPlaneURL = cf.BrokerAddrs[0], cf.ControlPlaneURLs[0]
	b, err := json.MarshalIndent(cf, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(p.dataDir, clientJSONFile), append(b, '\n'), 0o644)
}
