package serve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// parse runs the serve flags over args and returns the resolved options.
func parse(t *testing.T, args ...string) (*options, error) {
	t.Helper()
	var o *options
	var err error
	app := &cli.App{Name: "t", Flags: append(serverFlags(), brokerOnlyFlags()...), Action: func(c *cli.Context) error {
		o, err = loadOptions(c)
		return nil
	}}
	if rerr := app.Run(append([]string{"t"}, args...)); rerr != nil {
		t.Fatal(rerr)
	}
	return o, err
}

func TestOptionsLayering(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "felix.yaml")
	yaml := "data-dir: /from/yaml\nbroker-addr: 127.0.0.1:7000\nmetrics-addr: 127.0.0.1:7002\nshutdown-timeout: 3s\nenv:\n  FELIX_SUB_QUEUE_POLICY: block\n  FELIX_LOG_LEVEL: debug\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FELIX_LOG_LEVEL", "warn")
	t.Setenv("FELIX_BROKER_METRICS_BIND", "127.0.0.1:7003")
	o, err := parse(t, "--config", cfg, "--broker-addr", "127.0.0.1:7100")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"data-dir from the file", o.DataDir, "/from/yaml"},
		{"a flag beats the file", o.BrokerAddr, "127.0.0.1:7100"},
		{"the environment beats the file", o.MetricsAddr, "127.0.0.1:7003"},
		{"a default where nobody says", o.ControlPlaneAddr, "127.0.0.1:5080"},
		{"the file's env section fills the gaps", o.env("FELIX_SUB_QUEUE_POLICY"), "block"},
		{"the process environment beats the file's env", o.env("FELIX_LOG_LEVEL"), "warn"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	if o.ShutdownTimeout != 3*time.Second {
		t.Errorf("shutdown-timeout from the file: %v", o.ShutdownTimeout)
	}
}

func TestOptionsRefuseUnknownYAMLKeys(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "felix.yaml")
	if err := os.WriteFile(cfg, []byte("brokr-addr: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := parse(t, "--config", cfg)
	if err == nil || !strings.Contains(err.Error(), "brokr-addr") {
		t.Fatalf("unknown key: %v, want an error naming it", err)
	}
}

func TestOptionsRefuseBadValues(t *testing.T) {
	_, err := parse(t, "--shutdown-timeout", "0s", "--data-dir", "")
	if err == nil || !strings.Contains(err.Error(), "--shutdown-timeout") || !strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("bad values: %v, want both reported", err)
	}
}

func TestRaftOptions(t *testing.T) {
	parseRaft := func(args ...string) (raftOptions, error) {
		t.Helper()
		var ro raftOptions
		var err error
		app := &cli.App{Name: "t", Flags: append(serverFlags(), raftFlags()...), Action: func(c *cli.Context) error {
			o, oerr := loadOptions(c)
			if oerr != nil {
				return oerr
			}
			ro, err = loadRaftOptions(c, o)
			return nil
		}}
		if rerr := app.Run(append([]string{"t"}, args...)); rerr != nil {
			t.Fatal(rerr)
		}
		return ro, err
	}
	ro, err := parseRaft("--data-dir", "/d")
	if err != nil || ro.NodeID != 1 || ro.Peers != nil || ro.DataDir != "/d/raft" {
		t.Fatalf("defaults: %+v %v", ro, err)
	}
	t.Setenv("FELIX_RAFT_TICK_MS", "50")
	ro, err = parseRaft("--raft-node-id", "2", "--raft-peers", "1=https://a:7001, 2=https://b:7001,3=https://c:7001", "--raft-data-dir", "/r")
	if err != nil || ro.NodeID != 2 || len(ro.Peers) != 3 || ro.Peers[2] != "https://b:7001" || ro.DataDir != "/r" || ro.Tick != 50*time.Millisecond {
		t.Fatalf("group member: %+v %v", ro, err)
	}
	t.Setenv("FELIX_RAFT_TICK_MS", "0")
	_, err = parseRaft("--raft-node-id", "4", "--raft-peers", "1=https://a:7001,1=https://b:7001")
	for _, want := range []string{"FELIX_RAFT_TICK_MS", "appears twice"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("bad settings: %v, want %q", err, want)
		}
	}
	t.Setenv("FELIX_RAFT_TICK_MS", "")
	if _, err = parseRaft("--raft-peers", "1=https://a:7001"); err == nil || !strings.Contains(err.Error(), "--raft-node-id") {
		t.Fatalf("peers without an id: %v", err)
	}
	if _, err = parseRaft("--raft-node-id", "3", "--raft-peers", "1=https://a:7001"); err == nil || !strings.Contains(err.Error(), "no entry") {
		t.Fatalf("id not among the peers: %v", err)
	}
}
