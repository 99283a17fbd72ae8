package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	felixcli "github.com/felixmq/felix/roles/cli"
	"github.com/felixmq/felix/sdk/felix"
)

// Command returns `felix bench` with one subcommand per scenario.
func Command() *cli.Command {
	dur := &cli.DurationFlag{Name: "duration", Usage: "how long to run the load (bounded to 10 minutes)", Value: 5 * time.Second}
	payload := &cli.IntFlag{Name: "payload", Usage: "payload size in bytes", Value: 4096}
	policy := &cli.StringFlag{Name: "policy", Usage: "the benchmark stream's subscriber queue policy: drop_new, block or drop_old", Value: "block"}
	profile := &cli.StringFlag{Name: "cpuprofile", Usage: "write the benchmark client's CPU profile to `FILE`"}
	withClient := func(fs ...cli.Flag) []cli.Flag {
		return append(append(fs, felixcli.OutputFlag(), profile), felixcli.ClientFlags()...)
	}
	return &cli.Command{
		Name:  "bench",
		Usage: "measure a running broker (pubsub, durable, group, fanout, watch-fanout, latency, cache, subs-idle, meta) or the QUIC transport itself (quic-raw)",
		Description: "Each scenario creates its own uniquely named stream or cache through the control plane, drives\n" +
			"load for --duration, deletes what it created and prints its figures (-o json for machines).\n" +
			"For lossless pub/sub figures start the broker with FELIX_PUB_INGRESS_WAIT=true; for more than\n" +
			"256 connections raise FELIX_MAX_CONNECTIONS_PER_SOURCE.\n\n" +
			"On a cluster (felix dev writes a client.json naming every broker), pubsub, durable and latency\n" +
			"take --route direct (a ClusterClient publishes straight to each shard's owner) or --route entry\n" +
			"[--via ADDR] (a plain client pinned to one broker, which forwards what it does not own), and\n" +
			"--shards N (keyed publishes, the keys taking the N shards in turn; also on one broker, for a\n" +
			"baseline). --metrics HOST:PORT,... adds the forwarded publishes the run caused; with --route\n" +
			"entry, latency also reports forwarded and local publishes apart. scripts/bench-cluster runs\n" +
			"them all against one node and a three-node felix dev.\n\n" +
			"   felix bench quic-raw --duration 5s\n" +
			"   felix bench pubsub --payload 4096 --batch 64 --duration 10s\n" +
			"   felix bench fanout --subscribers 1000 --rate 100\n" +
			"   felix bench watch-fanout --watchers 1000 --rate 10\n" +
			"   felix bench durable --mode acked --inflight 256 --payload 4096\n" +
			"   felix bench group --consumers 1..4 --max 100\n" +
			"   felix bench pubsub --data-dir ./felix-dev --route direct --shards 3\n" +
			"   felix bench latency --data-dir ./felix-dev --route entry --shards 3",
		Subcommands: []*cli.Command{
			{
				Name:  "pubsub",
				Usage: "one publisher and one subscriber: MB/s and msgs/s published and delivered, and loss",
				Description: "Publishes for --duration on one connection to a subscriber on another, then waits (up to\n" +
					"2 s of silence) for the last deliveries. published counts the payloads the broker took\n" +
					"(acknowledged with --acked, else sent and flushed); delivered the payloads the subscriber\n" +
					"received; lost the difference. Every rate is its count over measured_s, from the first\n" +
					"publish to the later of the publisher finishing and the last delivery, so published /\n" +
					"measured_s is published_msgs_per_s. On a terminal a live line shows progress. Example:\n\n" +
					"   felix bench pubsub --payload 4096 --batch 64 --duration 10s",
				Flags: withClient(append([]cli.Flag{dur, payload, policy,
					&cli.IntFlag{Name: "batch", Usage: "payloads per publish batch", Value: 64},
					&cli.BoolFlag{Name: "acked", Usage: "wait for an acknowledgement of every batch"},
					inflightFlag(1), durableFlag()}, routingFlags()...)...),
				Action: func(c *cli.Context) error {
					return run(c, func(ctx context.Context, t *target) (*result, error) {
						return runPubSub(ctx, t, pubsubParams{payload: c.Int("payload"), batch: max(1, c.Int("batch")),
							acked: c.Bool("acked"), inflight: c.Int("inflight"), durable: c.Bool("durable"),
							duration: bounded(c.Duration("duration")), policy: c.String("policy")})
					})
				},
			},
			durableCommand(withClient, dur, policy),
			groupCommand(withClient, dur),
			{
				Name:  "fanout",
				Usage: "one publisher at a fixed rate to N subscribers: deliveries/s and publish-to-delivery p50/p99",
				Flags: withClient(dur, policy,
					&cli.IntFlag{Name: "subscribers", Value: 100, Usage: "number of subscribers"},
					&cli.IntFlag{Name: "connections", Usage: "connections the subscribers share (default: one each)"},
					&cli.IntFlag{Name: "rate", Value: 100, Usage: "messages per second"},
					&cli.IntFlag{Name: "payload", Value: 256, Usage: "payload size in bytes (at least 16)"},
					&cli.BoolFlag{Name: "max", Usage: "search for the highest rate delivered without loss, starting at --rate; --duration is each step's length"},
					&cli.IntFlag{Name: "max-rate", Value: 1 << 20, Usage: "with --max, never offer more than this many messages per second"},
					&cli.IntFlag{Name: "max-steps", Value: 12, Usage: "with --max, stop after this many steps"}),
				Action: func(c *cli.Context) error {
					return run(c, func(ctx context.Context, t *target) (*result, error) {
						p := fanoutParams{subscribers: max(1, c.Int("subscribers")), connections: c.Int("connections"),
							rate: max(1, c.Int("rate")), payload: c.Int("payload"), duration: bounded(c.Duration("duration")), policy: c.String("policy")}
						if c.Bool("max") {
							return runFanoutMax(ctx, t, p, max(1, c.Int("max-rate")), max(1, c.Int("max-steps")))
						}
						return runFanout(ctx, t, p)
					})
				},
			},
			{
				Name:  "watch-fanout",
				Usage: "one writer puts a key at a fixed rate to W watchers of it: time until every watcher saw each update p50/p99/max, and updates skipped",
				Description: "Creates a cache, opens --watchers watches of one key spread over --connections connections,\n" +
					"then puts the key --rate times a second for --duration (one writer, one more connection). Each\n" +
					"value carries its sequence number and intended send time, so a stalled writer cannot hide\n" +
					"its own delay. Reports, per update, the time until the last watcher saw it, deliveries/s,\n" +
					"and skipped: updates some watcher never saw (0 unless the broker coalesced or dropped).\n" +
					"Needs a broker with FEATURE_CACHE_WATCH. Example:\n\n" +
					"   felix bench watch-fanout --watchers 1000 --rate 10 --duration 10s -o json",
				Flags: withClient(dur,
					&cli.IntFlag{Name: "watchers", Value: 1000, Usage: "number of watches of the key"},
					&cli.IntFlag{Name: "connections", Usage: "connections the watchers share (default: min(watchers, 100))"},
					&cli.IntFlag{Name: "rate", Value: 10, Usage: "updates per second"}),
				Action: func(c *cli.Context) error {
					return run(c, func(ctx context.Context, t *target) (*result, error) {
						return runWatchFanout(ctx, t, watchFanoutParams{watchers: max(1, c.Int("watchers")),
							connections: c.Int("connections"), rate: max(1, c.Int("rate")), duration: bounded(c.Duration("duration"))})
					})
				},
			},
			{
				Name:  "subs-idle",
				Usage: "open N subscriptions that receive nothing and hold them; with --broker-pid, the broker's RSS growth per subscription",
				Flags: withClient(&cli.IntFlag{Name: "count", Value: 10000, Usage: "subscriptions to open"},
					&cli.IntFlag{Name: "connections", Value: 100, Usage: "connections the subscriptions share"},
					&cli.DurationFlag{Name: "hold", Usage: "keep them open this long after measuring"},
					&cli.DurationFlag{Name: "settle", Value: 2 * time.Second, Usage: "wait this long after opening before reading the broker's RSS"},
					&cli.IntFlag{Name: "broker-pid", Usage: "the broker's process id on this machine (reads /proc/PID/status)"}),
				Action: func(c *cli.Context) error {
					return run(c, func(ctx context.Context, t *target) (*result, error) {
						return runSubsIdle(ctx, t, idleParams{count: max(1, c.Int("count")), connections: c.Int("connections"),
							hold: min(c.Duration("hold"), 10*time.Minute), settle: min(c.Duration("settle"), time.Minute), brokerPID: c.Int("broker-pid")})
					})
				},
			},
			{
				Name:  "meta",
				Usage: "create uniquely named streams through the control plane with C callers, then delete them: creates/s and p50/p99",
				Flags: withClient(dur, &cli.IntFlag{Name: "concurrency", Aliases: []string{"c"}, Value: 16, Usage: "concurrent callers"}),
				Action: func(c *cli.Context) error {
					return runControlPlane(c, func(ctx context.Context, t *target) (*result, error) {
						return runMeta(ctx, t, c.Int("concurrency"), bounded(c.Duration("duration")))
					})
				},
			},
			{
				Name:  "latency",
				Usage: "one acknowledged publish at a time: p50/p99/p999",
				Flags: withClient(append([]cli.Flag{dur, &cli.IntFlag{Name: "payload", Value: 256, Usage: "payload size in bytes"},
					&cli.IntFlag{Name: "count", Value: 100000, Usage: "stop after this many publishes"}, durableFlag()}, routingFlags()...)...),
				Action: func(c *cli.Context) error {
					return run(c, func(ctx context.Context, t *target) (*result, error) {
						return runLatency(ctx, t, c.Int("payload"), c.Int("count"), bounded(c.Duration("duration")), c.Bool("durable"))
					})
				},
			},
			cacheCommand(withClient, dur),
			{
				Name:  "quic-raw",
				Usage: "bulk bytes on one QUIC stream between two endpoints on loopback: the transport's ceiling",
				Flags: []cli.Flag{dur, &cli.IntFlag{Name: "chunk", Value: 256 << 10, Usage: "bytes per write"},
					&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"}},
				Action: func(c *cli.Context) error {
					ctx, cancel := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
					defer cancel()
					prog := newProgress(errWriter(c), bounded(c.Duration("duration")))
					prog.run()
					r, err := runQUICRaw(ctx, bounded(c.Duration("duration")), max(1024, c.Int("chunk")))
					prog.stop()
					if err != nil {
						return err
					}
					return report(c, r)
				},
			},
		},
	}
}

func bounded(d time.Duration) time.Duration {
	if d <= 0 {
		return 5 * time.Second
	}
	return min(d, 10*time.Minute)
}

func run(c *cli.Context, f func(context.Context, *target) (*result, error)) error {
	return runWith(c, true, f)
}

// runControlPlane is run for a scenario that talks only to the control
// plane (no broker address needed).
func runControlPlane(c *cli.Context, f func(context.Context, *target) (*result, error)) error {
	return runWith(c, false, f)
}

func runWith(c *cli.Context, broker bool, f func(context.Context, *target) (*result, error)) error {
	var rt routing
	if hasFlag(c, "route") {
		var err error
		if rt, err = parseRouting(c); err != nil {
			return cli.Exit("error: "+err.Error(), 2)
		}
	}
	var repl replication
	if hasFlag(c, "replication-factor") {
		var err error
		if repl, err = parseReplication(c); err != nil {
			return cli.Exit("error: "+err.Error(), 2)
		}
	}
	ctx, cancel := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	s, err := felixcli.LoadClientSettings(c)
	if err != nil {
		return err
	}
	cfg := felix.Config{Tenant: s.Tenant, Token: s.Token}
	if broker {
		if cfg, err = s.SDKConfig(); err != nil {
			return err
		}
	} else if s.ControlPlane == "" || s.Token == "" {
		return cli.Exit("error: the meta scenario needs --controlplane and a token (--token-file), or --data-dir with a client.json", 2)
	}
	if path := c.String("cpuprofile"); path != "" {
		stop, err := startProfile(path)
		if err != nil {
			return err
		}
		defer stop()
	}
	// Keep a connection per caller: the default transport keeps two idle
	// per host and closes the rest, which costs the server a connection
	// set-up every time more than two callers finish at once.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	t := &target{cfg: cfg, ns: s.Namespace, brokers: append([]string{s.Broker}, s.MoreBrokers...), routing: rt, repl: repl, admin: &adminAPI{base: s.ControlPlane, tenant: s.Tenant, token: cfg.Token, http: &http.Client{Transport: tr, Timeout: 10 * time.Second}},
		progress: newProgress(errWriter(c), plannedLength(c))}
	t.progress.run()
	r, err := f(ctx, t)
	t.progress.stop()
	if err != nil {
		return err
	}
	return report(c, r)
}

// errWriter is where the progress line goes: the app's standard error.
func errWriter(c *cli.Context) io.Writer {
	if c.App.ErrWriter != nil {
		return c.App.ErrWriter
	}
	return os.Stderr
}

// plannedLength is how long the scenario means to run, for the progress
// line: --duration, unless the scenario has none or --max makes it the
// length of each of several steps (0: unknown).
func plannedLength(c *cli.Context) time.Duration {
	if c.Bool("max") || !hasFlag(c, "duration") {
		return 0
	}
	return bounded(c.Duration("duration"))
}

// hasFlag says whether the command in c has the flag called name.
func hasFlag(c *cli.Context, name string) bool {
	return c.Command != nil && slices.ContainsFunc(c.Command.Flags, func(f cli.Flag) bool {
		return slices.Contains(f.Names(), name)
	})
}

func report(c *cli.Context, r *result) error {
	if c.String("output") == "json" {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		fmt.Fprintln(c.App.Writer, string(b))
		return nil
	}
	fmt.Fprint(c.App.Writer, r.text())
	return nil
}

// startProfile writes a CPU profile of this process to path until stop.
func startProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
