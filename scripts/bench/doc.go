// Command bench runs Felix side by side with NATS and etcd on this machine
// and reports each system's figures and the per-round Felix/peer ratios.
//
// Run it through the wrapper from anywhere:
//
//	scripts/bench/run --smoke
//	scripts/bench/run --workloads pubsub-4k,fanout --rounds 3
//	scripts/bench/run --transports quic --workloads fanout
//	scripts/bench/run --write-docs
//
// Felix is the binary built from the checkout (or FELIX_BIN), started as
// `felix serve` in a temp directory and loaded by `felix bench ... -o json`
// in its own process. Each peer server is this binary re-executed with a
// hidden subcommand (serve-nats, serve-etcd), so every server is its own
// process; the peers' load runs in the harness process. Everything binds
// 127.0.0.1 on kernel-chosen ports, every run is bounded in time (and the
// whole harness by --timeout), and every child leads its own process group,
// which is stopped at the end, on failure and on SIGINT/SIGTERM; children
// also die with the harness (Pdeathsig). The temp directory is removed.
//
// Felix runs over each of its transports: --transports (or
// BENCH_TRANSPORTS; default quic,tcp) lists them. A case's Felix side is
// the same `felix bench` command run once per transport with --transport
// quic, then --transport tcp, against the same broker, which listens for
// both. The cases that reach no broker, meta (the control plane's REST
// API) and quic-raw (the QUIC transport alone), run once and show n/a
// under TCP; a TCP-only run leaves them out.
//
// Each workload runs --warmup rounds that are not counted and then --rounds
// measured rounds, each round running every case over QUIC, then TCP, then
// on the peer, with the peer's and Felix's servers kept for the workload
// and stopped after it. Tables show Felix's figure per transport, the
// peer's, and one Felix/peer ratio per transport, each ratio taken within a
// round. pubsub-4k and fanout also report broker CPU per delivery: the
// server process's user+system CPU time (from /proc/<pid>/stat) over the
// run, divided by its deliveries, for felix serve and for the NATS server,
// each its own process; the load generators are other processes.
//
// durable-acked-r3 is durable-acked on three copies: Felix is `felix dev
// --nodes 3` (three felix serve processes under one supervisor; the
// harness stops felix dev, which stops its nodes, and kills by PID any
// node left), the bench stream created by `felix bench durable
// --replication-factor 3 --consistency quorum --route direct`; the peer is
// a JetStream stream with Replicas: 3 on three serve-nats children routed
// to each other over TLS on free 127.0.0.1 ports. It reports broker CPU
// per replicated MB: the three servers' CPU together over the acknowledged
// megabytes. It is not part of --smoke (two clusters a side take longer
// than the smoke run's budget).
//
// durable-idempotent (issue #19) runs `felix bench durable --mode
// idempotent` and `--mode acked` one after the other on one broker in
// each Felix run (periodic fsync), the order swapped every round, and
// reports both rates and their ratio (the target is at least 0.9);
// the peer does the same with JetStream async publishes that carry a
// unique Nats-Msg-Id and publishes that carry none, so the Felix/peer
// column of the first row sets idempotent producers against JetStream's
// message-id deduplication. group drains 20,000 pre-published 4 KiB
// records through a new group with one and with four consumers (`felix
// bench group`: polls of 100, each record acked and every ack answered
// before the next poll) against a JetStream durable pull consumer with
// AckExplicit (Fetch 100, Ack() on each message, unanswered, each
// connection flushed before the clock stops). group-latency sends one
// 4 KiB record at a time at 100 a second through a group to one consumer
// (Felix Group.Consume, JetStream's pull consumer in Consume) and reports
// p50/p99/p99.9 from each record's intended send time to the handler.
// None of the three is part of --smoke (each takes well over 10 s).
//
// failover measures a Quorum shard's failover with felix dev's default
// timings, and runs only when --workloads names it ("all" leaves it out),
// without a warm-up round. Each of --failover-kills (BENCH_FAILOVER_KILLS,
// default 20) kills per round and transport starts a fresh `felix dev
// --nodes 3`, creates a one-shard durable stream at replication factor 3
// with quorum consistency (`felix admin stream create`), and runs its load
// in the harness process through the SDK (github.com/felixmq/felix/sdk/felix,
// the checkout's, by a replace directive in go.mod): a ClusterClient
// publishing one acknowledged record at a time, each call bounded by
// --failover-call-timeout (500 ms), and reading the shard from the earliest
// offset. It then sends SIGKILL to the shard's leader (from `felix admin
// placement show -o json` and dev.json's PIDs) and reports p50, p99 and max
// of the time from the kill to the first acknowledgement of a publish sent
// after it, and to the first delivery of such a record; a kill without both
// within 60 s is failed and counts as 60 s. It refuses to run when the
// environment sets a cluster timing (felix dev passes it to its nodes).
//
// --smoke runs both transports (one short round, about 25 s). Results go to --json
// (results/latest.json by default) and, with --write-docs, to the section of
// docs/benchmarks.md between the bench:begin and bench:end markers.
//
// The exit code is non-zero when any workload produced no figure for a
// side it promises, so --smoke guards the harness against rot.
package main
