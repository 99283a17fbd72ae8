package dev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// Defaults of the flags.
const (
	defaultDataDir     = "./felix-dev"
	defaultNodes       = 3
	maxNodes           = 15
	defaultStopTimeout = 20 * time.Second
)

// Command is `felix dev`.
func Command() *cli.Command {
	return &cli.Command{
		Name:      "dev",
		Usage:     "run a three-node cluster on this machine (three felix serve processes)",
		UsageText: "felix dev [--data-dir DIR] [--nodes N] [--base-port PORT] [--stop-timeout DURATION]",
		Description: "Starts N `felix serve` child processes (--nodes, 3 by default) as one cluster on 127.0.0.1:\n" +
			"each is a voter of the control plane's Raft group and a broker (broker-1, broker-2, ...), with\n" +
			"its state in DIR/node1, DIR/node2, ... Ports are picked free, so two felix dev with different\n" +
			"--data-dir run side by side. DIR/tls/ca.pem is the development CA every node's certificates\n" +
			"come from. DIR/client.json names every node, so client commands given --data-dir DIR reach\n" +
			"the cluster:\n\n" +
			"   felix dev &\n" +
			"   felix admin brokers list --data-dir ./felix-dev\n" +
			"   felix admin stream create orders --shards 6 --data-dir ./felix-dev\n" +
			"   felix admin placement show orders --data-dir ./felix-dev\n\n" +
			"DIR/dev.json records, for each node, its PID, addresses, data directory and the argv and env\n" +
			"that start it again: kill one node (kill -9 PID) and bring it back with that command line.\n" +
			"Each node's output is prefixed \"node1 | \". Ctrl-C (SIGINT) or SIGTERM stops every node\n" +
			"gracefully (SIGTERM, then SIGKILL after --stop-timeout); a node that exits is reported and the\n" +
			"others keep running. Run felix dev again on the same DIR to bring the same cluster back.\n" +
			"Streams created without --replication-factor get min(3, N) copies: felix dev sets\n" +
			"FELIX_DEFAULT_REPLICATION_FACTOR for its nodes unless it is set in its environment, so a\n" +
			"durable stream's shards each have a leader and up to two followers on other nodes.\n" +
			"FELIX_* variables in felix dev's environment are passed to every node (those naming one node,\n" +
			"such as FELIX_NODE_ID, are not); FELIX_DEV_NODE<i>_<NAME>=VALUE gives node i alone\n" +
			"FELIX_<NAME>=VALUE (FELIX_DEV_NODE2_NODE_PEER_ADVERTISE_ADDR=127.0.0.1:7000), recorded in its\n" +
			"dev.json env; FELIX_DEV_RAFT_VIA<j>=HOST:PORT makes the other nodes reach member j's Raft\n" +
			"listener at HOST:PORT (in their --raft-peers). The nodes share this machine's cores: each runs with\n" +
			"GOMAXPROCS set to the cores felix dev may use divided by N (at least 1), unless GOMAXPROCS\n" +
			"is set, which every node then inherits as it is.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data-dir", Value: defaultDataDir, Usage: "`DIR` holding every node's state, client.json and dev.json"},
			&cli.IntFlag{Name: "nodes", Value: defaultNodes, DefaultText: "3, or dev.json's count on a restart", Usage: fmt.Sprintf("how many nodes, `N` in 1..%d", maxNodes)},
			&cli.IntFlag{Name: "base-port", DefaultText: "free ports picked at random below the ephemeral range, or dev.json's on a restart", Usage: "take every node's ports upwards from `PORT`"},
			&cli.DurationFlag{Name: "stop-timeout", Value: defaultStopTimeout, Usage: "how long the nodes may take to stop gracefully (`DURATION`) before they are killed"},
		},
		Action: run,
	}
}

// nodeProcs shares the cores among the nodes: each node's Go runtime is
// given GOMAXPROCS = procs (the cores felix dev may use, cgroup limits
// included) divided by the nodes, at least 1, unless GOMAXPROCS is set in
// felix dev's environment, which every node inherits as it is. Nodes on one
// machine that each take every core for their own keep threads spinning and
// migrating against each other: on the 2-core VM three nodes moved 5-15%
// more messages, at lower latency, each with GOMAXPROCS=1
// (docs/benchmarks.md, Clusters).
func nodeProcs(lookup func(string) (string, bool), procs, nodes int) []string {
	if _, set := lookup("GOMAXPROCS"); set {
		return nil
	}
	return []string{"GOMAXPROCS=" + strconv.Itoa(max(1, procs/nodes))}
}

// nodeReplication sets the control plane's default replication factor to
// min(3, nodes), so a stream created without a factor gets a leader and
// up to two followers, unless FELIX_DEFAULT_REPLICATION_FACTOR is set in
// felix dev's environment (childEnv passes it on as it is).
func nodeReplication(lookup func(string) (string, bool), nodes int) []string {
	const name = "FELIX_DEFAULT_REPLICATION_FACTOR"
	if _, set := lookup(name); set {
		return nil
	}
	return []string{name + "=" + strconv.Itoa(min(3, nodes))}
}

// settings are the checked flags.
type settings struct {
	dataDir     string
	nodes       int
	basePort    int
	stopTimeout time.Duration
}

func loadSettings(c *cli.Context, prev *devFile) (settings, error) {
	s := settings{dataDir: c.String("data-dir"), nodes: c.Int("nodes"), basePort: c.Int("base-port"), stopTimeout: c.Duration("stop-timeout")}
	var errs []error
	if s.dataDir == "" {
		errs = append(errs, errors.New("--data-dir must not be empty"))
	}
	if prev != nil && len(prev.Nodes) > 0 {
		if !c.IsSet("nodes") {
			s.nodes = len(prev.Nodes)
		} else if s.nodes != len(prev.Nodes) {
			errs = append(errs, fmt.Errorf("--nodes %d: %s holds a %d-node cluster (use another --data-dir, or remove it to start afresh)",
				s.nodes, s.dataDir, len(prev.Nodes)))
		}
	}
	if s.nodes < 1 || s.nodes > maxNodes {
		errs = append(errs, fmt.Errorf("--nodes %d: want 1..%d", s.nodes, maxNodes))
	}
	if s.basePort < 0 || s.basePort > 65535-5*maxNodes {
		errs = append(errs, fmt.Errorf("--base-port %d: want 1..%d, or 0 for free ports", s.basePort, 65535-5*maxNodes))
	}
	if s.stopTimeout <= 0 {
		errs = append(errs, errors.New("--stop-timeout must be positive"))
	}
	return s, errors.Join(errs...)
}

func run(c *cli.Context) error {
	dataDir := c.String("data-dir")
	prev, err := readDevFile(dataDir)
	if err != nil {
		return err
	}
	s, err := loadSettings(c, prev)
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	overrides, err1 := nodeOverrides(os.Environ(), s.nodes)
	via, err2 := raftVia(os.Environ(), s.nodes)
	if err := errors.Join(err1, err2); err != nil {
		return cli.Exit(err.Error(), 2)
	}
	if err := os.MkdirAll(s.dataDir, 0o700); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	release, err := lockDataDir(s.dataDir)
	if err != nil {
		return err
	}
	defer release()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the felix executable: %w", err)
	}
	env, dropped := childEnv(os.Environ())
	if len(dropped) > 0 {
		fmt.Fprintf(c.App.ErrWriter, "felix dev: not passing %s to the nodes (each node has its own)\n", strings.Join(dropped, ", "))
	}
	env = append(env, nodeProcs(os.LookupEnv, runtime.GOMAXPROCS(0), s.nodes)...)
	env = append(env, nodeReplication(os.LookupEnv, s.nodes)...)
	p, err := newPlan(exe, s.dataDir, s.nodes, s.basePort, prev, env)
	if err != nil {
		return err
	}
	for i, extra := range overrides {
		p.nodes[i].Env = slices.Concat(p.nodes[i].Env, extra)
	}
	applyRaftVia(p, via)
	created, err := shareCA(p.dataDir, p.nodes)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(c.App.ErrWriter, "felix dev: created the cluster's development CA %s\n", filepath.Join(p.dataDir, caDir, "ca.pem"))
	}
	return newSupervisor(c, p, s).run()
}
