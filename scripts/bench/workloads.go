package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// metric is one figure a case reports, under its name in Felix's JSON and
// in the peer's figures (peerKey "" when the peer has no such figure).
type metric struct {
	label, unit       string
	lower             bool
	felixKey, peerKey string
}

// felixRun runs a case's Felix side once over transport tr (quic or tcp,
// "" for a case with no TCP variant).
type felixRun func(ctx context.Context, e *env, tr string) (figures, error)

// caseSpec is one comparison inside a workload; in each round felix runs
// once per selected transport (QUIC, then TCP) and then the peer once.
type caseSpec struct {
	name    string
	metrics []metric
	felix   felixRun
	peer    func(ctx context.Context, e *env) (figures, error) // nil: no peer
	// peerName names this case's peer when it is not the workload's.
	peerName string
	// noTCP, when set, says why the case has no TCP variant: it runs once
	// a round, without --transport, when QUIC is selected.
	noTCP string
}

// workload is one row group of the table.
type workload struct {
	name    string
	peer    string // what the peer is, "" for none
	note    string
	pending string // set when Felix has nothing to measure yet
	// onlyNamed, when set, says why the workload runs only when
	// --workloads names it (not under "all").
	onlyNamed string
	// noWarmup, when set, says why the workload runs no warm-up round.
	noWarmup string
	cases    func(o *options) []caseSpec
}

var (
	mbps     = func(felixKey, peerKey string) metric { return metric{"delivered", "MB/s", false, felixKey, peerKey} }
	lostMsgs = metric{"lost", "msgs", true, "lost", "lost"}
)

func latencyMetrics(felixPrefix string) []metric {
	return []metric{
		{"p50", "ms", true, felixPrefix + "_p50", "p50_ms"},
		{"p99", "ms", true, felixPrefix + "_p99", "p99_ms"},
		{"p99.9", "ms", true, felixPrefix + "_p999", "p999_ms"},
	}
}

func pubsubArgs(extra ...string) []string {
	return append([]string{"--payload", "4096", "--policy", "block"}, extra...)
}

// allWorkloads is every workload in the order they run.
func allWorkloads() []workload {
	ws := []workload{
		{name: "pubsub-4k", peer: "NATS core (TLS)", cases: func(o *options) []caseSpec {
			d := o.pubsubDuration
			return []caseSpec{{
				name:    "1 pub, 1 sub, 4 KiB, fire-and-forget",
				metrics: []metric{mbps("delivered_mb_per_s", "delivered_mb_per_s"), lostMsgs, cpuMetric},
				felix: func(ctx context.Context, e *env, tr string) (figures, error) {
					n, err := e.felix(ctx, "main")
					if err != nil {
						return nil, err
					}
					return withServerCPU(n.proc.pid(), func() (figures, error) {
						return e.felixBench(ctx, n, d, tr, append([]string{"pubsub"}, pubsubArgs("--batch", "64", "--duration", secs(d))...)...)
					})
				},
				peer: func(ctx context.Context, e *env) (figures, error) {
					n, err := e.nats(ctx, "core", natsConfig{})
					if err != nil {
						return nil, err
					}
					return withServerCPU(n.proc.pid(), func() (figures, error) { return natsPubSub(ctx, n, 4096, d) })
				},
			}}
		}},
		{name: "pubsub-acked", peer: "JetStream, memory storage (TLS)", cases: func(o *options) []caseSpec {
			d := o.duration
			return []caseSpec{{
				name: "4 KiB, 256 in flight",
				metrics: []metric{{"acked", "MB/s", false, "published_mb_per_s", "acked_mb_per_s"},
					mbps("delivered_mb_per_s", "delivered_mb_per_s")},
				felix: func(ctx context.Context, e *env, tr string) (figures, error) {
					n, err := e.felix(ctx, "main")
					if err != nil {
						return nil, err
					}
					return e.felixBench(ctx, n, d, tr, append([]string{"pubsub"}, pubsubArgs("--acked", "--inflight", "256", "--batch", "1", "--duration", secs(d))...)...)
				},
				peer: func(ctx context.Context, e *env) (figures, error) {
					n, err := e.nats(ctx, "js", natsConfig{jetstream: true})
					if err != nil {
						return nil, err
					}
					return natsAcked(ctx, n, jetstream.MemoryStorage, 4096, 256, d)
				},
			}}
		}},
		{name: "durable-acked", peer: "JetStream, file storage (TLS)",
			note: "4 KiB, 256 in flight. Felix's periodic fsync runs every 250 ms (its default), JetStream's default sync interval is 2 min; " +
				"both bounded to 1 GiB.",
			cases: func(o *options) []caseSpec {
				return []caseSpec{durableAcked(o, "always", "fsync always / sync_interval always", true),
					durableAcked(o, "periodic", "fsync periodic / default sync_interval", false)}
			}},
		durableAckedR3Workload(),
		failoverWorkload(),
		{name: "durable-latency", peer: "JetStream, file storage, sync_interval always (TLS)", cases: func(o *options) []caseSpec {
			d := o.duration
			return []caseSpec{{
				name:    "4 KiB, one acked publish at a time",
				metrics: latencyMetrics("acked_publish"),
				felix: func(ctx context.Context, e *env, tr string) (figures, error) {
					n, err := e.felix(ctx, "always", durableEnv("always")...)
					if err != nil {
						return nil, err
					}
					f, err := e.felixBench(ctx, n, d, tr, "durable", "--mode", "one-at-a-time", "--payload", "4096", "--duration", secs(d))
					e.checkOnDisk("durable-latency", n)
					return f, err
				},
				peer: func(ctx context.Context, e *env) (figures, error) {
					n, err := e.nats(ctx, "js-always", natsConfig{jetstream: true, syncAlways: true})
					if err != nil {
						return nil, err
					}
					return natsSyncLatency(ctx, n, jetstream.FileStorage, 4096, d)
				},
			}}
		}},
		durableIdempotentWorkload(),
		{name: "fanout", peer: "NATS core (TLS)", note: "256 B at a fixed rate, one connection per subscriber; latency from each message's intended send time.",
			cases: func(o *options) []caseSpec {
				var cs []caseSpec
				for _, n := range o.fanoutNs {
					cs = append(cs, fanoutCase(o, n))
				}
				return cs
			}},
		{name: "fanout-max", peer: "NATS core (TLS)",
			note: "Highest rate (msgs/s to 100 subscribers, 256 B) with every delivery made and the sender on schedule; Felix's stream uses Block.",
			cases: func(o *options) []caseSpec {
				step := o.fanoutMaxStep
				return []caseSpec{{
					name:    "N=100",
					metrics: []metric{{"max rate", "msgs/s", false, "max_rate", "max_rate"}},
					felix: func(ctx context.Context, e *env, tr string) (figures, error) {
						n, err := e.felix(ctx, "main")
						if err != nil {
							return nil, err
						}
						return e.felixBench(ctx, n, 14*(step+3*time.Second), tr, "fanout", "--max", "--subscribers", "100", "--rate", "100",
							"--payload", "256", "--policy", "block", "--duration", secs(step), "--max-steps", "12")
					},
					peer: func(ctx context.Context, e *env) (figures, error) {
						n, err := e.nats(ctx, "core", natsConfig{})
						if err != nil {
							return nil, err
						}
						return natsFanoutMax(ctx, n, 100, 100, 1<<20, 12, 256, step)
					},
				}}
			}},
		{name: "sub-memory", peer: "NATS core subscriptions (TLS)",
			note: "A fresh broker each round; growth of the broker's VmRSS divided by the subscriptions, over 100 connections.",
			cases: func(o *options) []caseSpec {
				count := strconv.Itoa(o.subs)
				return []caseSpec{{
					name:    count + " idle subscriptions",
					metrics: []metric{{"RSS per subscription", "bytes", true, "broker_rss_per_subscription", "rss_per_sub_bytes"}},
					felix: func(ctx context.Context, e *env, tr string) (figures, error) {
						defer e.stop("submem")
						n, err := e.felix(ctx, "submem")
						if err != nil {
							return nil, err
						}
						f, err := e.felixBench(ctx, n, time.Minute, tr, "subs-idle", "--count", count, "--connections", "100",
							"--settle", "2s", "--broker-pid", strconv.Itoa(n.proc.pid()))
						if err == nil && f["opened"] < float64(o.subs) {
							err = fmt.Errorf("opened %v of %d subscriptions", f["opened"], o.subs)
						}
						return f, err
					},
					peer: func(ctx context.Context, e *env) (figures, error) {
						defer e.stop("submem")
						n, err := e.nats(ctx, "submem", natsConfig{})
						if err != nil {
							return nil, err
						}
						return natsSubMemory(ctx, n, o.subs, 100, 2*time.Second)
					},
				}}
			}},
		{name: "meta", peer: "etcd puts, 3 members",
			note: "Felix: stream creates through the REST API of a three-member Raft group (felix controlplane, each member its own process), sent to a follower, which hands them to the leader; etcd: 3 members, ~200 B values, its client balancing over them.",
			cases: func(o *options) []caseSpec {
				d, c := o.duration, strconv.Itoa(o.metaConcurrency)
				return []caseSpec{{
					name: "3 members each; " + c + " callers",
					metrics: append([]metric{{"creates", "creates/s", false, "creates_per_s", "creates_per_s"}},
						latencyMetrics("create")[:2]...),
					felix: func(ctx context.Context, e *env, tr string) (figures, error) {
						g, err := e.felixGroup(ctx, "meta")
						if err != nil {
							return nil, err
						}
						target, err := g.benchArgs(ctx)
						if err != nil {
							return nil, err
						}
						args := append([]string{"meta", "--duration", secs(d), "--concurrency", c}, target...)
						return e.felixBench(ctx, nil, d+time.Minute, "", args...)
					},
					noTCP: "REST to the control plane",
					peer: func(ctx context.Context, e *env) (figures, error) {
						ec, err := e.etcd(ctx, "meta")
						if err != nil {
							return nil, err
						}
						return etcdPuts(ctx, ec, o.metaConcurrency, d)
					},
				}}
			}},
		{name: "quic-raw", note: "Bulk bytes on one QUIC stream in one process: the transport's ceiling on this machine.",
			cases: func(o *options) []caseSpec {
				d := o.duration
				return []caseSpec{{
					name:    "one stream",
					metrics: []metric{{"received", "MB/s", false, "received_mb_per_s", ""}},
					felix: func(ctx context.Context, e *env, tr string) (figures, error) {
						return e.felixBench(ctx, nil, d, "", "quic-raw", "--duration", secs(d))
					},
					noTCP: "QUIC alone",
				}}
			}},
		{name: "watch-fanout", peer: "etcd watch, 3 members", note: watchFanoutNote,
			cases: func(o *options) []caseSpec { return watchFanoutCases(o, etcdWatchPeer) }},
		{name: "watch-fanout-nats", peer: "NATS KV watch, memory storage (TLS)", note: watchFanoutNote,
			cases: func(o *options) []caseSpec { return watchFanoutCases(o, natsWatchPeer) }},
	}
	ws = append(ws, groupWorkloads()...)
	return append(ws, cacheWorkloads()...)
}

// onlyNamed lists the workloads that run only when --workloads names them.
func onlyNamed() []string {
	var out []string
	for _, w := range allWorkloads() {
		if w.onlyNamed != "" {
			out = append(out, w.name)
		}
	}
	return out
}

func durableAcked(o *options, fsync, name string, syncAlways bool) caseSpec {
	d := o.duration
	return caseSpec{
		name: name,
		metrics: []metric{{"acked", "MB/s", false, "published_mb_per_s", "acked_mb_per_s"},
			{"acked", "msgs/s", false, "published_msgs_per_s", "acked_msgs_per_s"}},
		felix: func(ctx context.Context, e *env, tr string) (figures, error) {
			n, err := e.felix(ctx, fsync, durableEnv(fsync)...)
			if err != nil {
				return nil, err
			}
			f, err := e.felixBench(ctx, n, d, tr, "durable", "--mode", "acked", "--inflight", "256", "--payload", "4096",
				"--policy", "block", "--duration", secs(d))
			e.checkOnDisk("durable-acked", n)
			return f, err
		},
		peer: func(ctx context.Context, e *env) (figures, error) {
			n, err := e.nats(ctx, "js-"+fsync, natsConfig{jetstream: true, syncAlways: syncAlways})
			if err != nil {
				return nil, err
			}
			return natsAcked(ctx, n, jetstream.FileStorage, 4096, 256, d)
		},
	}
}

// durableEnv is the broker environment of a durable run: the fsync
// policy and the same 1 GiB bound the JetStream streams get.
func durableEnv(fsync string) []string {
	return []string{"FELIX_DURABLE_FSYNC=" + fsync, "FELIX_DURABLE_RETENTION_BYTES=" + strconv.Itoa(1<<30)}
}

// fanoutRate is the fixed offered rate for n subscribers: 1,000 msgs/s, or
// less so the deliveries stay near 50,000/s.
func fanoutRate(o *options, n int) int {
	if o.fanoutRate > 0 {
		return o.fanoutRate
	}
	return max(1, min(1000, 50000/max(1, n)))
}

func fanoutCase(o *options, subs int) caseSpec {
	d, rate := o.duration, fanoutRate(o, subs)
	return caseSpec{
		name: fmt.Sprintf("N=%d at %d msgs/s", subs, rate),
		metrics: append([]metric{{"deliveries", "deliveries/s", false, "deliveries_per_s", "deliveries_per_s"},
			{"lost", "deliveries", true, "lost", "lost"}}, append(latencyMetrics("publish_to_delivery"), cpuMetric)...),
		felix: func(ctx context.Context, e *env, tr string) (figures, error) {
			n, err := e.felix(ctx, "main")
			if err != nil {
				return nil, err
			}
			return withServerCPU(n.proc.pid(), func() (figures, error) {
				return e.felixBench(ctx, n, d+time.Duration(subs)*20*time.Millisecond, tr, "fanout", "--subscribers", strconv.Itoa(subs),
					"--rate", strconv.Itoa(rate), "--payload", "256", "--policy", "block", "--duration", secs(d))
			})
		},
		peer: func(ctx context.Context, e *env) (figures, error) {
			n, err := e.nats(ctx, "core", natsConfig{})
			if err != nil {
				return nil, err
			}
			return withServerCPU(n.proc.pid(), func() (figures, error) { return natsFanoutRun(ctx, n, subs, rate, 256, d) })
		},
	}
}

// watchFanoutNote describes both watch-fanout workloads.
const watchFanoutNote = "W watchers of one key over 100 connections (etcd: 100 clients; NATS: 100 connections, a KV bucket " +
	"with its default history of 1), one writer putting the key at 10 updates/s; latency from each update's intended send " +
	"time until the last watcher saw it. skipped: updates some watcher never saw."

// watchPeer runs the watch-fanout peer for w watchers at rate for d.
type watchPeer func(ctx context.Context, e *env, w, rate int, d time.Duration) (figures, error)

func etcdWatchPeer(ctx context.Context, e *env, w, rate int, d time.Duration) (figures, error) {
	ec, err := e.etcd(ctx, "watch")
	if err != nil {
		return nil, err
	}
	return etcdWatchFanout(ctx, ec, w, watchConnections, rate, d)
}

func natsWatchPeer(ctx context.Context, e *env, w, rate int, d time.Duration) (figures, error) {
	n, err := e.nats(ctx, "js", natsConfig{jetstream: true})
	if err != nil {
		return nil, err
	}
	return natsWatchFanout(ctx, n, w, watchConnections, rate, d)
}

// Watch-fanout shape: every W runs over this many connections at this rate.
const (
	watchConnections = 100
	watchRate        = 10
)

func watchFanoutCases(o *options, peer watchPeer) []caseSpec {
	d := o.watchDuration
	var cs []caseSpec
	for _, w := range o.watchNs {
		cs = append(cs, caseSpec{
			name: fmt.Sprintf("W=%d at %d updates/s", w, watchRate),
			metrics: []metric{{"all seen p50", "ms", true, "all_seen_p50", "all_seen_p50_ms"},
				{"all seen p99", "ms", true, "all_seen_p99", "all_seen_p99_ms"},
				{"skipped", "updates", true, "skipped", "skipped"}},
			felix: func(ctx context.Context, e *env, tr string) (figures, error) {
				n, err := e.felix(ctx, "main")
				if err != nil {
					return nil, err
				}
				return e.felixBench(ctx, n, d+time.Duration(w)*5*time.Millisecond, tr, "watch-fanout",
					"--watchers", strconv.Itoa(w), "--connections", strconv.Itoa(watchConnections),
					"--rate", strconv.Itoa(watchRate), "--duration", secs(d))
			},
			peer: func(ctx context.Context, e *env) (figures, error) { return peer(ctx, e, w, watchRate, d) },
		})
	}
	return cs
}
