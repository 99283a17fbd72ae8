package main

import (
	"context"
	"strconv"
	"time"
)

// The cache workloads of issue #17: Felix's cache (`felix bench cache`)
// against NATS KV on file storage and etcd. Felix's broker runs with its
// storage directory, so a build whose caches are log-backed measures them
// there (the probe in cachestorage.go says which storage was used).

// Cache workload shape.
const (
	cacheValueBytes = 256
	cacheInflight   = 256
	cacheKeys       = 10000
	cacheEtcdKey    = "cache" // one single-member etcd per workload
)

// Peer names of the cache cases.
const (
	natsKVAlways   = "NATS KV, file storage, sync_interval always (TLS)"
	natsKVPeriodic = "NATS KV, file storage, default sync_interval (TLS)"
	etcdOneMember  = "etcd, 1 member"
)

const cacheNote = "256 B values. Felix: one `felix serve` with its storage directory. " +
	"NATS KV: a JetStream bucket on file storage (history 1, 1 GiB), one connection. " +
	"etcd: one member (Felix's cache is not replicated yet), which fsyncs its WAL before acknowledging, one client."

func cacheWorkloads() []workload {
	return []workload{
		{name: "cache-put", peer: natsKVAlways,
			note: "Acked puts, 256 in flight (each caller waits for its put's acknowledgement), random keys of 10,000. " + cacheNote +
				" Felix's periodic fsync runs every 250 ms, JetStream's default sync interval is 2 min.",
			cases: func(o *options) []caseSpec {
				d := o.duration
				return []caseSpec{
					cachePutCase(d, "always", "fsync always / sync_interval always", natsKVAlways, natsPeer(true, func(ctx context.Context, n *natsNode) (figures, error) {
						return natsKVPuts(ctx, n, cacheInflight, cacheKeys, cacheValueBytes, d)
					})),
					cachePutCase(d, "periodic", "fsync periodic / default sync_interval", natsKVPeriodic, natsPeer(false, func(ctx context.Context, n *natsNode) (figures, error) {
						return natsKVPuts(ctx, n, cacheInflight, cacheKeys, cacheValueBytes, d)
					})),
					cachePutCase(d, "always", "fsync always / etcd", etcdOneMember, etcdPeer(func(ctx context.Context, ec *etcdCluster) (figures, error) {
						return etcdCachePuts(ctx, ec, cacheInflight, cacheKeys, cacheValueBytes, d)
					})),
				}
			}},
		{name: "cache-latency", peer: natsKVAlways,
			note: "One acked put at a time, the keys of 10,000 taken in turn. " + cacheNote,
			cases: func(o *options) []caseSpec {
				d := o.duration
				return []caseSpec{
					cacheLatencyCase(d, "sync_interval always", natsKVAlways, natsPeer(true, func(ctx context.Context, n *natsNode) (figures, error) {
						return natsKVLatency(ctx, n, cacheKeys, cacheValueBytes, d)
					})),
					cacheLatencyCase(d, "etcd", etcdOneMember, etcdPeer(func(ctx context.Context, ec *etcdCluster) (figures, error) {
						return etcdCacheLatency(ctx, ec, cacheKeys, cacheValueBytes, d)
					})),
				}
			}},
		{name: "cache-cas", peer: natsKVAlways,
			note: "C callers in a read-modify-write loop on one key: read it with its version, add one to a counter in the value, " +
				"write it back on condition of that version (Felix CacheGetVersioned + CachePutIf(IfVersion); NATS kv.Get + kv.Update " +
				"with the revision read; etcd Get + Txn If(ModRevision == r) Then(Put)), read again when refused. update p50: from an " +
				"update's first read to its applied write, retries included. Every run checks the final counter against the updates " +
				"applied. " + cacheNote,
			cases: func(o *options) []caseSpec {
				d, c := o.duration, o.casCallers
				return []caseSpec{
					cacheCASCase(d, c, "sync_interval always", natsKVAlways, natsPeer(true, func(ctx context.Context, n *natsNode) (figures, error) {
						return natsKVCAS(ctx, n, c, cacheValueBytes, d)
					})),
					cacheCASCase(d, c, "etcd", etcdOneMember, etcdPeer(func(ctx context.Context, ec *etcdCluster) (figures, error) {
						return etcdCAS(ctx, ec, c, cacheValueBytes, d)
					})),
				}
			}},
	}
}

type peerRun func(ctx context.Context, e *env) (figures, error)

// natsPeer runs f against the JetStream server with file sync always or
// by its default interval.
func natsPeer(syncAlways bool, f func(context.Context, *natsNode) (figures, error)) peerRun {
	key := "js-default"
	if syncAlways {
		key = "js-always"
	}
	return func(ctx context.Context, e *env) (figures, error) {
		n, err := e.nats(ctx, key, natsConfig{jetstream: true, syncAlways: syncAlways})
		if err != nil {
			return nil, err
		}
		return f(ctx, n)
	}
}

// etcdPeer runs f against the workload's single-member etcd.
func etcdPeer(f func(context.Context, *etcdCluster) (figures, error)) peerRun {
	return func(ctx context.Context, e *env) (figures, error) {
		ec, err := e.etcdMembers(ctx, cacheEtcdKey, 1)
		if err != nil {
			return nil, err
		}
		return f(ctx, ec)
	}
}

// felixCache runs `felix bench cache args` on the broker with fsync policy.
func felixCache(workload, fsync string, d time.Duration, args ...string) felixRun {
	return func(ctx context.Context, e *env, tr string) (figures, error) {
		n, err := e.felix(ctx, "cache-"+fsync, "FELIX_DURABLE_FSYNC="+fsync)
		if err != nil {
			return nil, err
		}
		return e.felixCacheBench(ctx, workload, n, d, tr, append(args, "--value", strconv.Itoa(cacheValueBytes), "--duration", secs(d))...)
	}
}

func cachePutCase(d time.Duration, fsync, name, peerName string, peer peerRun) caseSpec {
	return caseSpec{
		name:     "256 B, 256 in flight; " + name,
		metrics:  []metric{{"acked puts", "puts/s", false, "puts_per_s", "puts_per_s"}, {"put p50", "ms", true, "put_p50", "p50_ms"}},
		felix:    felixCache("cache-put", fsync, d, "--mode", "put", "--inflight", strconv.Itoa(cacheInflight), "--keys", strconv.Itoa(cacheKeys)),
		peer:     peer,
		peerName: peerName,
	}
}

func cacheLatencyCase(d time.Duration, versus, peerName string, peer peerRun) caseSpec {
	return caseSpec{
		name:     "256 B, one put at a time; fsync always / " + versus,
		metrics:  latencyMetrics("put")[:2],
		felix:    felixCache("cache-latency", "always", d, "--mode", "latency", "--keys", strconv.Itoa(cacheKeys)),
		peer:     peer,
		peerName: peerName,
	}
}

func cacheCASCase(d time.Duration, callers int, versus, peerName string, peer peerRun) caseSpec {
	return caseSpec{
		name: "C=" + strconv.Itoa(callers) + " on one key; fsync always / " + versus,
		metrics: []metric{{"applied", "updates/s", false, "applied_per_s", "applied_per_s"},
			{"refused", "writes/s", false, "refused_per_s", "refused_per_s"},
			{"update p50", "ms", true, "update_p50", "update_p50_ms"}},
		felix:    felixCache("cache-cas", "always", d, "--mode", "cas", "--callers", strconv.Itoa(callers)),
		peer:     peer,
		peerName: peerName,
	}
}
