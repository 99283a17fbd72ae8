package broker

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/roles/broker/sched"
	"github.com/felixmq/felix/wire"
)

// Config is the broker's network-service configuration. Every field names
// the FELIX_* variable ConfigFromEnv reads it from; DefaultConfig holds the
// defaults. Durations are whole milliseconds in the environment.
type Config struct {
	// ListenAddr is the UDP address of the QUIC listener
	// (FELIX_BROKER_ADDR or FELIX_QUIC_BIND, default "0.0.0.0:5000").
	ListenAddr string
	// TCPListenAddr is the TCP address of the TLS-over-TCP listener, the
	// same protocol for networks that drop UDP (FELIX_TCP_LISTEN):
	// default "", the QUIC listener's host and port number (UDP and TCP
	// ports are separate); "off" binds none.
	TCPListenAddr string

	// KeepAlive is the QUIC keep-alive period (FELIX_KEEPALIVE_MS, default 2000).
	KeepAlive time.Duration
	// MaxIdleTimeout closes a silent connection (FELIX_MAX_IDLE_TIMEOUT_MS, default 6000).
	MaxIdleTimeout time.Duration
	// StreamReceiveWindow is the maximum per-stream flow-control window in
	// bytes (FELIX_QUIC_STREAM_WINDOW_BYTES, default 16 MiB).
	StreamReceiveWindow uint64
	// ConnReceiveWindow is the maximum per-connection flow-control window in
	// bytes (FELIX_QUIC_CONN_WINDOW_BYTES, default 64 MiB).
	ConnReceiveWindow uint64
	// MaxIncomingStreams bounds concurrent client-opened bidirectional
	// streams per connection (FELIX_QUIC_MAX_STREAMS, default 1024).
	MaxIncomingStreams int64
	// MaxIncomingUniStreams bounds concurrent client-opened unidirectional
	// streams per connection (FELIX_QUIC_MAX_UNI_STREAMS, default 256).
	MaxIncomingUniStreams int64

	// MaxFrameBytes refuses longer frames (FELIX_MAX_FRAME_BYTES, default 16 MiB).
	MaxFrameBytes uint32
	// MaxConnectionsPerSource bounds connections from one IP address
	// (FELIX_MAX_CONNECTIONS_PER_SOURCE, default 256); more are closed.
	MaxConnectionsPerSource int
	// MaxSubscriptionsPerConn bounds subscriptions on one connection
	// (FELIX_MAX_SUBSCRIPTIONS_PER_CONN_TOTAL, default 4096); more are
	// refused with overloaded.
	MaxSubscriptionsPerConn int

	// PublishConnInflightBytes is the per-connection publish byte budget
	// (FELIX_BROKER_PUBLISH_CONN_TOTAL_INFLIGHT_BYTES, default 64 MiB).
	PublishConnInflightBytes int64
	// PublishTotalInflightBytes is the process-wide publish byte budget
	// (FELIX_BROKER_PUBLISH_TOTAL_INFLIGHT_BYTES, default 512 MiB).
	PublishTotalInflightBytes int64
	// PublishLaneDepth bounds the publishes of one stream shard that were
	// admitted but have not finished fanning out
	// (FELIX_PUB_LANE_DEPTH, default 512). Past it a publish is refused
	// (acked) or dropped (fire-and-forget) as publish_queue_full.
	PublishLaneDepth int
	// QuorumTimeout bounds how long an acked publish to a Quorum shard
	// waits for a majority of its replicas before it is answered
	// quorum_timeout, outcome unknown (FELIX_PUBLISH_QUORUM_TIMEOUT_MS,
	// default 5000).
	QuorumTimeout time.Duration
	// HandoffTimeout bounds the planned handoff a shutdown starts with:
	// each durable shard this broker leads with a follower is handed to a
	// caught-up follower first (handoff.go); what is still led when it
	// runs out is left to fail over (FELIX_SHUTDOWN_HANDOFF_TIMEOUT_MS,
	// default 30000; 0 turns the handoff off).
	HandoffTimeout time.Duration
	// PubIngressWait makes fire-and-forget publishes wait for room instead
	// of being dropped, pushing back through QUIC flow control
	// (FELIX_PUB_INGRESS_WAIT, default false).
	PubIngressWait bool
	// AckOnCommit sends publish_ok only after the publish has been
	// appended and fanned out, for every client (FELIX_ACK_ON_COMMIT=true).
	// Unset, durable streams ack after the write and in-memory streams on
	// enqueue.
	AckOnCommit bool
	// AckOnEnqueue makes durable streams ack on enqueue too, before the
	// write (FELIX_ACK_ON_COMMIT=false or 0): faster, and an ack no longer
	// survives a crash.
	AckOnEnqueue bool
	// MaxOwedAcks bounds the acked publishes one control stream may have
	// waiting for an answer (FELIX_BROKER_MAX_OWED_ACKS, default 1024);
	// past it the stream stops reading.
	MaxOwedAcks int
	// PublishWindow is the publish_window granted to a stream whose client
	// offers FEATURE_PUBLISH_PIPELINE (FELIX_BROKER_PUBLISH_WINDOW,
	// default 256; 0 turns pipelining off and the feature is not
	// advertised): its acked publishes are answered in the order they
	// were read, and at most this many wait for an answer before the
	// stream stops reading (pipeline.go).
	PublishWindow int

	// EventBatchMaxEvents bounds the envelopes written in one event write
	// (FELIX_EVENT_BATCH_MAX_EVENTS, default 64).
	EventBatchMaxEvents int
	// EventBatchMaxBytes bounds the bytes written in one event write
	// (FELIX_EVENT_BATCH_MAX_BYTES, default 64 KiB; one envelope is always written).
	EventBatchMaxBytes int

	// CatalogSyncInterval is the catalog poll period
	// (FELIX_CATALOG_SYNC_INTERVAL_MS, default 500).
	CatalogSyncInterval time.Duration
	// CacheSweepInterval is the expired-entry sweep period
	// (FELIX_CACHE_SWEEP_INTERVAL_MS, default 5000).
	CacheSweepInterval time.Duration

	// Durable is the durable-stream storage. Without a Dir
	// (FELIX_DURABLE_STORAGE_DIR) durable streams are served from memory.
	Durable DurableConfig

	// Node is this broker's identity in a cluster (registration.go).
	Node NodeConfig
	// ClusterViewInterval is how often a broker in a cluster polls the
	// control plane's cluster view (FELIX_CLUSTER_VIEW_INTERVAL_MS,
	// default 500, 10 to 60000; cluster_view.go).
	ClusterViewInterval time.Duration
	// Peer is its listener for other brokers (peer_config.go).
	Peer PeerConfig
	// MaxRecordsPerRead caps the records of one stream_read page and of one
	// log page a catching-up subscription reads
	// (FELIX_DURABLE_MAX_RECORDS_PER_READ, default 1000).
	MaxRecordsPerRead int
	// GroupMaxWait caps how long a group_poll may wait for work
	// (FELIX_GROUP_MAX_WAIT_MS, default 30000).
	GroupMaxWait time.Duration
	// GroupMaxWaitingPolls bounds the group polls waiting for work at once
	// on the broker (default 4096); past it a poll is answered at once.
	GroupMaxWaitingPolls int
	// RetentionInterval is how often age-based retention runs
	// (FELIX_DURABLE_RETENTION_CHECK_MS, default 10000).
	RetentionInterval time.Duration

	// Core configures the broker core: FELIX_SUBSCRIBER_QUEUE_CAPACITY
	// (512), FELIX_SUB_QUEUE_MAX_BYTES (64 MiB), FELIX_REPLAY_RING_MAX_BYTES
	// (8 MiB), FELIX_SUB_QUEUE_POLICY (drop_new),
	// FELIX_CACHE_WATCH_HISTORY_BYTES (4 MiB of recent changes per watched
	// cache; 0 keeps none), FELIX_CACHE_WATCH_HISTORY_BYTES_TOTAL (256 MiB
	// over every watched cache), FELIX_CACHE_WATCH_MAX_BYTES (1 MiB queued
	// per cache watch), FELIX_CACHE_WATCH_MAX_BYTES_TOTAL (256 MiB queued
	// over every cache watch), FELIX_IDEMPOTENT_PRODUCERS_PER_SHARD (1024
	// producers remembered per shard), FELIX_IDEMPOTENT_SCAN_RECORDS
	// (262,144 newest records read to rebuild a durable shard's producers),
	// FELIX_GROUP_VISIBILITY_TIMEOUT_MS (30000), FELIX_GROUP_MAX_VISIBILITY_MS
	// (12 h), FELIX_GROUP_MAX_IN_FLIGHT (1000 per group),
	// FELIX_GROUP_MAX_ATTEMPTS (5), FELIX_GROUP_MAX_DEAD_LETTERS (10,000 per
	// group), FELIX_GROUP_IDLE_EVICT_MS (600000).
	Core core.Config
	// Sched configures the publish scheduler: FELIX_PUB_QUEUE_DEPTH (512
	// slots per tenant), FELIX_PUB_MAX_QUEUED (8192), FELIX_PUB_WORKERS
	// (2×GOMAXPROCS).
	Sched sched.Config
}

// DefaultConfig returns the configuration with every default filled in.
func DefaultConfig() Config {
	return Config{
		ListenAddr:                "0.0.0.0:5000",
		KeepAlive:                 2 * time.Second,
		MaxIdleTimeout:            6 * time.Second,
		StreamReceiveWindow:       16 << 20,
		ConnReceiveWindow:         64 << 20,
		MaxIncomingStreams:        1024,
		MaxIncomingUniStreams:     256,
		MaxFrameBytes:             wire.DefaultMaxFrameBytes,
		MaxConnectionsPerSource:   256,
		MaxSubscriptionsPerConn:   4096,
		PublishConnInflightBytes:  64 << 20,
		PublishTotalInflightBytes: 512 << 20,
		PublishLaneDepth:          512,
		QuorumTimeout:             5 * time.Second,
		HandoffTimeout:            30 * time.Second,
		MaxOwedAcks:               1024,
		PublishWindow:             256,
		EventBatchMaxEvents:       64,
		EventBatchMaxBytes:        64 << 10,
		CatalogSyncInterval:       500 * time.Millisecond,
		ClusterViewInterval:       DefaultClusterViewInterval,
		CacheSweepInterval:        5 * time.Second,
		Durable: DurableConfig{
			SegmentBytes:         64 << 20,
			Fsync:                "periodic",
			FsyncInterval:        250 * time.Millisecond,
			CacheIndexBytes:      core.DefaultCacheIndexBytes,
			CacheCompactInterval: core.DefaultCacheCompactInterval,
		},
		MaxRecordsPerRead:    1000,
		GroupMaxWait:         30 * time.Second,
		GroupMaxWaitingPolls: 4096,
		RetentionInterval:    10 * time.Second,
		Core: core.Config{
			SubQueueCapacity:   512,
			SubQueueMaxBytes:   64 << 20,
			ReplayRingMaxBytes: 8 << 20,
			DefaultPolicy:      core.DropNew,
		},
		Sched: sched.Config{
			Executors:  2 * runtime.GOMAXPROCS(0),
			QueueDepth: 512,
			MaxQueued:  8192,
		},
	}
}

// envReader collects every bad value so ConfigFromEnv can report them all.
type envReader struct {
	get  func(string) string
	errs []error
}

func (r *envReader) bad(name, v, want string) {
	r.errs = append(r.errs, fmt.Errorf("%s=%q: %s", name, v, want))
}

func (r *envReader) str(dst *string, names ...string) {
	for _, n := range names {
		if v := strings.TrimSpace(r.get(n)); v != "" {
			*dst = v
			return
		}
	}
}

func (r *envReader) int64(dst *int64, name string, min, max int64) {
	v := strings.TrimSpace(r.get(name))
	if v == "" {
		return
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min || n > max {
		r.bad(name, v, fmt.Sprintf("want an integer from %d to %d", min, max))
		return
	}
	*dst = n
}

func (r *envReader) int(dst *int, name string, min, max int64) {
	n := int64(*dst)
	r.int64(&n, name, min, max)
	*dst = int(n)
}

func (r *envReader) uint64(dst *uint64, name string, min, max int64) {
	n := int64(*dst)
	r.int64(&n, name, min, max)
	*dst = uint64(n)
}

func (r *envReader) millis(dst *time.Duration, name string, min int64) {
	n := int64(*dst / time.Millisecond)
	r.int64(&n, name, min, math.MaxInt64/int64(time.Millisecond))
	*dst = time.Duration(n) * time.Millisecond
}

// millisIn reads whole milliseconds between lo and hi.
func (r *envReader) millisIn(dst *time.Duration, name string, lo, hi time.Duration) {
	n := int64(*dst / time.Millisecond)
	r.int64(&n, name, lo.Milliseconds(), hi.Milliseconds())
	*dst = time.Duration(n) * time.Millisecond
}

func (r *envReader) bool(dst *bool, name string) {
	v := strings.TrimSpace(r.get(name))
	if v == "" {
		return
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.bad(name, v, "want true or false")
		return
	}
	*dst = b
}

// ConfigFromEnv starts from DefaultConfig and applies the FELIX_* variables
// getenv returns. Every bad value is reported in one error, each naming its
// variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := DefaultConfig()
	r := &envReader{get: getenv}
	r.str(&c.ListenAddr, "FELIX_BROKER_ADDR", "FELIX_QUIC_BIND")
	r.str(&c.TCPListenAddr, "FELIX_TCP_LISTEN")
	r.millis(&c.KeepAlive, "FELIX_KEEPALIVE_MS", 1)
	r.millis(&c.MaxIdleTimeout, "FELIX_MAX_IDLE_TIMEOUT_MS", 1)
	r.uint64(&c.StreamReceiveWindow, "FELIX_QUIC_STREAM_WINDOW_BYTES", 1<<10, 1<<40)
	r.uint64(&c.ConnReceiveWindow, "FELIX_QUIC_CONN_WINDOW_BYTES", 1<<10, 1<<40)
	r.int64(&c.MaxIncomingStreams, "FELIX_QUIC_MAX_STREAMS", 1, 1<<20)
	r.int64(&c.MaxIncomingUniStreams, "FELIX_QUIC_MAX_UNI_STREAMS", 1, 1<<20)
	maxFrame := int64(c.MaxFrameBytes)
	r.int64(&maxFrame, "FELIX_MAX_FRAME_BYTES", 1<<10, math.MaxUint32)
	c.MaxFrameBytes = uint32(maxFrame)
	r.int(&c.MaxConnectionsPerSource, "FELIX_MAX_CONNECTIONS_PER_SOURCE", 1, math.MaxInt32)
	r.int(&c.MaxSubscriptionsPerConn, "FELIX_MAX_SUBSCRIPTIONS_PER_CONN_TOTAL", 1, math.MaxInt32)
	r.int64(&c.PublishConnInflightBytes, "FELIX_BROKER_PUBLISH_CONN_TOTAL_INFLIGHT_BYTES", 1<<10, math.MaxInt64)
	r.int64(&c.PublishTotalInflightBytes, "FELIX_BROKER_PUBLISH_TOTAL_INFLIGHT_BYTES", 1<<10, math.MaxInt64)
	r.int(&c.PublishLaneDepth, "FELIX_PUB_LANE_DEPTH", 1, math.MaxInt32)
	r.millis(&c.QuorumTimeout, "FELIX_PUBLISH_QUORUM_TIMEOUT_MS", 1)
	r.millis(&c.HandoffTimeout, "FELIX_SHUTDOWN_HANDOFF_TIMEOUT_MS", 0)
	r.bool(&c.PubIngressWait, "FELIX_PUB_INGRESS_WAIT")
	r.bool(&c.AckOnCommit, "FELIX_ACK_ON_COMMIT")
	c.AckOnEnqueue = !c.AckOnCommit && strings.TrimSpace(getenv("FELIX_ACK_ON_COMMIT")) != ""
	r.durable(&c.Durable)
	r.node(&c.Node)
	r.millisIn(&c.ClusterViewInterval, "FELIX_CLUSTER_VIEW_INTERVAL_MS", minClusterViewInterval, maxClusterViewInterval)
	r.peer(&c.Peer)
	r.int(&c.MaxRecordsPerRead, "FELIX_DURABLE_MAX_RECORDS_PER_READ", 1, 1<<20)
	r.millis(&c.RetentionInterval, "FELIX_DURABLE_RETENTION_CHECK_MS", 1)
	r.millis(&c.GroupMaxWait, "FELIX_GROUP_MAX_WAIT_MS", 0)
	r.int(&c.MaxOwedAcks, "FELIX_BROKER_MAX_OWED_ACKS", 1, 1<<20)
	r.int(&c.PublishWindow, "FELIX_BROKER_PUBLISH_WINDOW", 0, 1<<16)
	r.int(&c.EventBatchMaxEvents, "FELIX_EVENT_BATCH_MAX_EVENTS", 1, 1<<16)
	r.int(&c.EventBatchMaxBytes, "FELIX_EVENT_BATCH_MAX_BYTES", 1, math.MaxInt32)
	r.millis(&c.CatalogSyncInterval, "FELIX_CATALOG_SYNC_INTERVAL_MS", 1)
	r.millis(&c.CacheSweepInterval, "FELIX_CACHE_SWEEP_INTERVAL_MS", 1)
	r.coreConfig(&c.Core)
	r.int(&c.Sched.QueueDepth, "FELIX_PUB_QUEUE_DEPTH", 1, math.MaxInt32)
	r.int(&c.Sched.MaxQueued, "FELIX_PUB_MAX_QUEUED", 1, math.MaxInt32)
	r.int(&c.Sched.Executors, "FELIX_PUB_WORKERS", 1, 1<<16)
	if err := errors.Join(r.errs...); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func (r *envReader) coreConfig(c *core.Config) {
	r.int(&c.SubQueueCapacity, "FELIX_SUBSCRIBER_QUEUE_CAPACITY", 1, math.MaxInt32)
	r.int64(&c.SubQueueMaxBytes, "FELIX_SUB_QUEUE_MAX_BYTES", 1, math.MaxInt64)
	r.int64(&c.ReplayRingMaxBytes, "FELIX_REPLAY_RING_MAX_BYTES", 0, math.MaxInt64)
	r.int(&c.ProducersPerShard, "FELIX_IDEMPOTENT_PRODUCERS_PER_SHARD", 1, math.MaxInt32)
	r.int(&c.ProducerScanRecords, "FELIX_IDEMPOTENT_SCAN_RECORDS", 1, math.MaxInt32)
	r.int64(&c.CommitStateMaxBytes, "FELIX_COMMIT_STATE_MAX_BYTES", 1, math.MaxInt64)
	r.int64(&c.CacheWatchHistoryBytes, "FELIX_CACHE_WATCH_HISTORY_BYTES", 0, math.MaxInt64)
	if c.CacheWatchHistoryBytes == 0 && strings.TrimSpace(r.get("FELIX_CACHE_WATCH_HISTORY_BYTES")) != "" {
		c.CacheWatchHistoryBytes = -1 // 0 disables; core reads 0 as the default
	}
	r.int64(&c.CacheWatchHistoryBytesTotal, "FELIX_CACHE_WATCH_HISTORY_BYTES_TOTAL", 1, math.MaxInt64)
	r.int64(&c.CacheWatchMaxBytes, "FELIX_CACHE_WATCH_MAX_BYTES", 1, math.MaxInt64)
	r.int64(&c.CacheWatchMaxBytesTotal, "FELIX_CACHE_WATCH_MAX_BYTES_TOTAL", 1, math.MaxInt64)
	r.millis(&c.Groups.Visibility, "FELIX_GROUP_VISIBILITY_TIMEOUT_MS", 1)
	r.millis(&c.Groups.MaxVisibility, "FELIX_GROUP_MAX_VISIBILITY_MS", 1)
	r.int(&c.Groups.MaxInFlight, "FELIX_GROUP_MAX_IN_FLIGHT", 1, 1<<20)
	r.int(&c.Groups.MaxAttempts, "FELIX_GROUP_MAX_ATTEMPTS", 1, 1<<20)
	r.int(&c.Groups.MaxDeadLetters, "FELIX_GROUP_MAX_DEAD_LETTERS", 1, 1<<24)
	r.millis(&c.Groups.IdleEvict, "FELIX_GROUP_IDLE_EVICT_MS", 1)
	if v := strings.TrimSpace(r.get("FELIX_SUB_QUEUE_POLICY")); v != "" {
		p, err := core.ParseQueuePolicy(v)
		if err != nil {
			r.bad("FELIX_SUB_QUEUE_POLICY", v, "want drop_new, block or drop_old")
		} else {
			c.DefaultPolicy = p
		}
	}
}

// Validate checks the values that must be positive; it names each field.
func (c *Config) Validate() error {
	var errs []error
	check := func(ok bool, name string) {
		if !ok {
			errs = append(errs, fmt.Errorf("broker config: %s must be positive", name))
		}
	}
	check(c.ListenAddr != "", "ListenAddr (FELIX_BROKER_ADDR)")
	check(c.KeepAlive > 0, "KeepAlive (FELIX_KEEPALIVE_MS)")
	check(c.MaxIdleTimeout > 0, "MaxIdleTimeout (FELIX_MAX_IDLE_TIMEOUT_MS)")
	check(c.MaxFrameBytes > 0, "MaxFrameBytes (FELIX_MAX_FRAME_BYTES)")
	check(c.MaxConnectionsPerSource > 0, "MaxConnectionsPerSource (FELIX_MAX_CONNECTIONS_PER_SOURCE)")
	check(c.MaxSubscriptionsPerConn > 0, "MaxSubscriptionsPerConn (FELIX_MAX_SUBSCRIPTIONS_PER_CONN_TOTAL)")
	check(c.PublishConnInflightBytes > 0, "PublishConnInflightBytes (FELIX_BROKER_PUBLISH_CONN_TOTAL_INFLIGHT_BYTES)")
	check(c.PublishTotalInflightBytes > 0, "PublishTotalInflightBytes (FELIX_BROKER_PUBLISH_TOTAL_INFLIGHT_BYTES)")
	check(c.PublishLaneDepth > 0, "PublishLaneDepth (FELIX_PUB_LANE_DEPTH)")
	check(c.QuorumTimeout > 0, "QuorumTimeout (FELIX_PUBLISH_QUORUM_TIMEOUT_MS)")
	check(c.HandoffTimeout >= 0, "HandoffTimeout (FELIX_SHUTDOWN_HANDOFF_TIMEOUT_MS)")
	check(c.MaxOwedAcks > 0, "MaxOwedAcks (FELIX_BROKER_MAX_OWED_ACKS)")
	check(c.EventBatchMaxEvents > 0, "EventBatchMaxEvents (FELIX_EVENT_BATCH_MAX_EVENTS)")
	check(c.EventBatchMaxBytes > 0, "EventBatchMaxBytes (FELIX_EVENT_BATCH_MAX_BYTES)")
	check(c.CatalogSyncInterval > 0, "CatalogSyncInterval (FELIX_CATALOG_SYNC_INTERVAL_MS)")
	check(c.CacheSweepInterval > 0, "CacheSweepInterval (FELIX_CACHE_SWEEP_INTERVAL_MS)")
	if c.ClusterViewInterval < minClusterViewInterval || c.ClusterViewInterval > maxClusterViewInterval {
		errs = append(errs, fmt.Errorf("broker config: ClusterViewInterval (FELIX_CLUSTER_VIEW_INTERVAL_MS) is %v; want %v to %v",
			c.ClusterViewInterval, minClusterViewInterval, maxClusterViewInterval))
	}
	check(c.MaxRecordsPerRead > 0, "MaxRecordsPerRead (FELIX_DURABLE_MAX_RECORDS_PER_READ)")
	check(c.RetentionInterval > 0, "RetentionInterval (FELIX_DURABLE_RETENTION_CHECK_MS)")
	if err := c.Durable.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Peer.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
