package dev

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/roles/broker/tlsconf"
)

func TestPrefixWriterWritesWholePrefixedLines(t *testing.T) {
	var out bytes.Buffer
	w := &prefixWriter{mu: &sync.Mutex{}, out: &out, prefix: "node2 | "}
	w.Write([]byte("one\ntw"))
	w.Write([]byte("o\n\nthree"))
	if got := out.String(); got != "node2 | one\nnode2 | two\nnode2 | \n" {
		t.Fatalf("before flush: %q", got)
	}
	w.flush()
	if got := out.String(); !strings.HasSuffix(got, "node2 | three\n") {
		t.Fatalf("after flush: %q", got)
	}
	out.Reset()
	w.Write(bytes.Repeat([]byte("x"), maxLine+10))
	if n := strings.Count(out.String(), "node2 | "); n != 1 {
		t.Fatalf("a line longer than %d bytes: %d prefixed pieces written before its end, want 1", maxLine, n)
	}
}

func TestChildEnvKeepsSharedSettingsOnly(t *testing.T) {
	env, dropped := childEnv([]string{"PATH=/bin", "FELIX_NODE_HEARTBEAT_INTERVAL_MS=200", "FELIX_NODE_ID=x", "FELIX_RAFT_PEERS=1=a", "HOME=/h"})
	if !slices.Equal(env, []string{"FELIX_NODE_HEARTBEAT_INTERVAL_MS=200"}) {
		t.Errorf("env = %v", env)
	}
	if !slices.Equal(dropped, []string{"FELIX_NODE_ID", "FELIX_RAFT_PEERS"}) {
		t.Errorf("dropped = %v", dropped)
	}
}

func TestNodesShareTheCores(t *testing.T) {
	unset := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		procs, nodes int
		want         string
	}{{2, 3, "GOMAXPROCS=1"}, {8, 3, "GOMAXPROCS=2"}, {16, 1, "GOMAXPROCS=16"}, {1, 5, "GOMAXPROCS=1"}} {
		if got := nodeProcs(unset, tc.procs, tc.nodes); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%d cores, %d nodes: %v, want %s", tc.procs, tc.nodes, got, tc.want)
		}
	}
	set := func(k string) (string, bool) { return "4", k == "GOMAXPROCS" }
	if got := nodeProcs(set, 2, 3); got != nil {
		t.Errorf("with GOMAXPROCS set: %v, want nothing added (the nodes inherit it)", got)
	}
}

func TestStreamsGetThreeCopiesOrOnePerNode(t *testing.T) {
	unset := func(string) (string, bool) { return "", false }
	for nodes, want := range map[int]string{1: "1", 2: "2", 3: "3", 5: "3"} {
		if got := nodeReplication(unset, nodes); !slices.Equal(got, []string{"FELIX_DEFAULT_REPLICATION_FACTOR=" + want}) {
			t.Errorf("%d nodes: %v, want a factor of %s", nodes, got, want)
		}
	}
	set := func(k string) (string, bool) { return "1", k == "FELIX_DEFAULT_REPLICATION_FACTOR" }
	if got := nodeReplication(set, 3); got != nil {
		t.Errorf("with the factor set: %v, want nothing added (the nodes inherit it)", got)
	}
}

func TestPlanGivesEveryNodeItsOwnPortsAndAFullCommandLine(t *testing.T) {
	dir := t.TempDir()
	p, err := newPlan("/bin/felix", dir, 3, 0, nil, []string{"FELIX_X=1"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, n := range p.nodes {
		for _, a := range []string{n.BrokerAddr, n.PeerAddr, n.MetricsAddr, n.ControlPlaneURL, n.RaftPeerURL} {
			if seen[a] {
				t.Errorf("%s: address %s given twice", n.Name, a)
			}
			seen[a] = true
		}
		if n.DataDir != filepath.Join(dir, n.Name) || n.NodeID != "broker-"+n.Name[4:] || n.RaftID != uint64(i+1) {
			t.Errorf("node %d: %+v", i, n)
		}
		argv := strings.Join(n.Argv, " ")
		for _, want := range []string{"/bin/felix serve", "--data-dir " + n.DataDir, "--broker-addr " + n.BrokerAddr,
			"--raft-node-id " + n.Name[4:], "--raft-peers 1=" + p.nodes[0].RaftPeerURL + ",2=" + p.nodes[1].RaftPeerURL} {
			if !strings.Contains(argv, want) {
				t.Errorf("%s argv %q lacks %q", n.Name, argv, want)
			}
		}
	}
	// A restart reuses the ports dev.json recorded (they are free again).
	again, err := newPlan("/bin/felix", dir, 3, 0, &devFile{Nodes: p.nodes}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.nodes {
		if !slices.Equal(again.nodes[i].Argv, p.nodes[i].Argv) {
			t.Errorf("restart: %v, want %v", again.nodes[i].Argv, p.nodes[i].Argv)
		}
	}
}

func TestDevFileRoundTrips(t *testing.T) {
	dir := t.TempDir()
	if df, err := readDevFile(dir); df != nil || err != nil {
		t.Fatalf("no dev.json: %v, %v", df, err)
	}
	p, err := newPlan("/bin/felix", dir, 2, 0, nil, []string{})
	if err != nil {
		t.Fatal(err)
	}
	p.nodes[0].PID = 42
	if err := writeDevFile(dir, p.nodes); err != nil {
		t.Fatal(err)
	}
	df, err := readDevFile(dir)
	if err != nil || len(df.Nodes) != 2 || df.Nodes[0].PID != 42 || !slices.Equal(df.Nodes[1].Argv, p.nodes[1].Argv) {
		t.Fatalf("read back %+v, %v", df, err)
	}
	var raw map[string][]map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, devJSONFile))
	json.Unmarshal(b, &raw)
	for _, k := range []string{"name", "node_id", "pid", "broker_addr", "peer_addr", "controlplane_url", "metrics_addr", "data_dir", "argv", "env"} {
		if _, ok := raw["nodes"][0][k]; !ok {
			t.Errorf("dev.json lacks %q", k)
		}
	}
}

func TestClientFileNamesEveryNode(t *testing.T) {
	dir := t.TempDir()
	p, err := newPlan("/bin/felix", dir, 3, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeClientFile(p); err != nil {
		t.Fatal(err)
	}
	var cf clientFile
	b, _ := os.ReadFile(filepath.Join(dir, clientJSONFile))
	if err := json.Unmarshal(b, &cf); err != nil {
		t.Fatal(err)
	}
	if cf.BrokerAddr != p.nodes[0].BrokerAddr || len(cf.BrokerAddrs) != 3 || cf.BrokerAddrs[2] != p.nodes[2].BrokerAddr ||
		len(cf.ControlPlaneURLs) != 3 || cf.CAFile != "tls/ca.pem" || cf.TokenFile != "node1/admin.token" {
		t.Fatalf("client.json: %+v", cf)
	}
}

func TestShareCAGivesEveryNodeTheSameCA(t *testing.T) {
	dir := t.TempDir()
	p, err := newPlan("/bin/felix", dir, 3, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	created, err := shareCA(dir, p.nodes)
	if err != nil || !created {
		t.Fatalf("first: created=%v err=%v", created, err)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "tls", tlsconf.CACertFile))
	for _, n := range p.nodes {
		// What felix serve does at start: reuse the CA it finds.
		cert, _, made, err := tlsconf.EnsureDevCA(filepath.Join(n.DataDir, "tls"))
		if err != nil || made {
			t.Fatalf("%s: made a CA of its own (%v, %v)", n.Name, made, err)
		}
		got, _ := os.ReadFile(cert)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: a different CA", n.Name)
		}
	}
	if created, err := shareCA(dir, p.nodes); err != nil || created {
		t.Fatalf("second: created=%v err=%v", created, err)
	}
	// The node certificates each node issues itself (as its broker does at
	// start) are accepted by every other node's peer listener.
	creds := make([]tlsconf.NodeCredentials, len(p.nodes))
	for i, n := range p.nodes {
		cert, key, ca, err := tlsconf.WriteNodeCert(filepath.Join(n.DataDir, "tls"), n.NodeID)
		if err != nil {
			t.Fatal(err)
		}
		if creds[i], err = tlsconf.LoadNodeCredentials(cert, key, ca); err != nil {
			t.Fatal(err)
		}
	}
	for i := range creds {
		for j := range creds {
			opts := x509.VerifyOptions{Roots: creds[j].CAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
			if _, err := creds[i].Cert.Leaf.Verify(opts); err != nil {
				t.Errorf("%s's node certificate is not trusted by %s: %v", p.nodes[i].Name, p.nodes[j].Name, err)
			}
		}
	}
}

func TestASecondFelixDevOnOneDirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	release, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockDataDir(dir)
	if err == nil || !strings.Contains(err.Error(), "another felix dev") || !strings.Contains(err.Error(), fmt.Sprintf("PID %d", os.Getpid())) {
		t.Fatalf("second lock: %v", err)
	}
	release()
	release2, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	release2()
}

// runDev runs `felix dev` with args in a bare app and returns the exit
// code its error asks for (0 for none) and the error's text.
func runDev(t *testing.T, args ...string) (int, string) {
	t.Helper()
	app := &cli.App{Name: "felix", Commands: []*cli.Command{Command()}, ExitErrHandler: func(*cli.Context, error) {},
		Writer: io.Discard, ErrWriter: io.Discard}
	err := app.Run(append([]string{"felix", "dev"}, args...))
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode(), ec.Error()
	}
	if err != nil {
		return 1, err.Error()
	}
	return 0, ""
}

func TestDevRefusesBadSettingsBeforeStartingAnything(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "0"}, "--nodes 0"},
		{[]string{"--nodes", "16"}, "--nodes 16"},
		{[]string{"--base-port", "-1"}, "--base-port -1"},
		{[]string{"--stop-timeout", "0s"}, "--stop-timeout"},
		{[]string{"--data-dir", ""}, "--data-dir"},
	} {
		code, msg := runDev(t, append([]string{"--data-dir", dir}, tc.args...)...)
		if code != 2 || !strings.Contains(msg, tc.want) {
			t.Errorf("%v: exit %d %q, want 2 naming %s", tc.args, code, msg, tc.want)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("a refused felix dev created its data directory")
	}
	// A directory holding a 3-node cluster keeps its count.
	os.MkdirAll(dir, 0o700)
	p, err := newPlan("/bin/felix", dir, 3, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeDevFile(dir, p.nodes)
	if code, msg := runDev(t, "--data-dir", dir, "--nodes", "5"); code != 2 || !strings.Contains(msg, "3-node cluster") {
		t.Errorf("--nodes 5 on a 3-node directory: exit %d %q", code, msg)
	}
}

func TestNodeOverridesReachOneNodeOnly(t *testing.T) {
	environ := []string{"PATH=/bin", "FELIX_DEV_NODE2_NODE_PEER_ADVERTISE_ADDR=127.0.0.1:7000", "FELIX_DEV_NODE1_X=a=b",
		"FELIX_NODE_PEER_ADVERTISE_ADDR=127.0.0.1:9", "FELIX_Y=1"}
	got, err := nodeOverrides(environ, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"FELIX_X=a=b"}, {"FELIX_NODE_PEER_ADVERTISE_ADDR=127.0.0.1:7000"}, nil}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("node%d's overrides = %v, want %v", i+1, got[i], want[i])
		}
	}
	// Neither felix dev's own variables nor a per-node one reach every node.
	if env, _ := childEnv(environ); !slices.Equal(env, []string{"FELIX_Y=1"}) {
		t.Errorf("childEnv = %v", env)
	}
	if env := inheritedEnv(environ); !slices.Equal(env, []string{"PATH=/bin", "FELIX_Y=1"}) {
		t.Errorf("inheritedEnv = %v", env)
	}
	for _, bad := range []string{"FELIX_DEV_NODE4_X=1", "FELIX_DEV_NODE0_X=1", "FELIX_DEV_NODEX_Y=1", "FELIX_DEV_NODE1_=1", "FELIX_DEV_NODE1=1"} {
		if _, err := nodeOverrides([]string{bad}, 3); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestRaftViaRoutesTheOtherNodesOnly(t *testing.T) {
	p, err := newPlan("/bin/felix", t.TempDir(), 3, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	via, err := raftVia([]string{"FELIX_DEV_RAFT_VIA2=127.0.0.1:7002", "FELIX_X=1"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	applyRaftVia(p, via)
	peersOf := func(n nodeInfo) string {
		i := slices.Index(n.Argv, "--raft-peers")
		if i < 0 || i+1 >= len(n.Argv) {
			t.Fatalf("%s: no --raft-peers in %v", n.Name, n.Argv)
		}
		return n.Argv[i+1]
	}
	for i, n := range p.nodes {
		peers := peersOf(n)
		want2 := "2=http://127.0.0.1:7002"
		if i == 1 {
			want2 = "2=" + p.nodes[1].RaftPeerURL // node2 listens on its own entry
		}
		if !strings.Contains(peers, want2) || !strings.Contains(peers, "1="+p.nodes[0].RaftPeerURL) ||
			!strings.Contains(peers, "3="+p.nodes[2].RaftPeerURL) {
			t.Errorf("%s: --raft-peers %s, want member 2 as %s and the others as their listeners", n.Name, peers, want2)
		}
	}
	if env, _ := childEnv([]string{"FELIX_DEV_RAFT_VIA2=x", "FELIX_Y=1"}); !slices.Equal(env, []string{"FELIX_Y=1"}) {
		t.Errorf("childEnv passes felix dev's own variables: %v", env)
	}
	for _, bad := range []string{"FELIX_DEV_RAFT_VIA4=a:1", "FELIX_DEV_RAFT_VIA=a:1", "FELIX_DEV_RAFT_VIA1=", "FELIX_DEV_RAFT_VIA1=http://a:1"} {
		if _, err := raftVia([]string{bad}, 3); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
