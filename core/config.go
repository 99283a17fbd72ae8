package core

import (
	"fmt"

	"github.com/felixmq/felix/wire"
)

// Defaults applied by NewBroker to zero Config fields.
const (
	DefaultSubQueueCapacity     = 512
	DefaultSubQueueMaxBytes     = 64 << 20
	DefaultReplayRingMaxBytes   = 8 << 20
	DefaultReplayRingMaxBatches = 1024
	DefaultCacheMaxEntries      = 1_000_000
	DefaultCacheMaxBytes        = 256 << 20
	DefaultCacheShards          = 16
	DefaultCacheWatchHistory    = 4 << 20
	DefaultCacheWatchMaxBytes   = 1 << 20
	DefaultCacheWatchMaxTotal   = 256 << 20
	DefaultCacheWatchHistTotal  = 256 << 20

	// MaxSubQueueCapacity caps the item capacity a subscriber may ask for.
	MaxSubQueueCapacity = 1 << 20
	// MaxStreamShards caps the shard count of one stream.
	MaxStreamShards = 1 << 16
)

// Config tunes the broker core. Zero fields take the defaults above.
type Config struct {
	// SubQueueCapacity is the item (batch) bound of one subscriber queue
	// (FELIX_SUBSCRIBER_QUEUE_CAPACITY, default 512).
	SubQueueCapacity int
	// SubQueueMaxBytes is the payload-byte bound of one subscriber queue
	// (FELIX_SUB_QUEUE_MAX_BYTES, default 64 MiB). One envelope larger than
	// the bound is still admitted into an empty queue.
	SubQueueMaxBytes int64
	// ReplayRingMaxBytes bounds the payload bytes a shard's replay ring
	// retains (FELIX_REPLAY_RING_MAX_BYTES, default 8 MiB).
	ReplayRingMaxBytes int64
	// ReplayRingMaxBatches bounds the batches a shard's replay ring retains
	// (default 1024).
	ReplayRingMaxBatches int
	// DefaultPolicy is the overflow policy of streams whose spec names none
	// (default DropNew).
	DefaultPolicy QueuePolicy
	// CacheMaxEntries is the per-cache entry bound when the spec sets none
	// (default 1,000,000).
	CacheMaxEntries int64
	// CacheMaxBytes is the per-cache bound on key plus value bytes when the
	// spec sets none (default 256 MiB).
	CacheMaxBytes int64
	// CacheShards is the number of lock shards per cache, rounded up to a
	// power of two (default 16).
	CacheShards int
	// CacheWatchHistoryBytes bounds the recent changes each watched cache
	// keeps for resumes (FELIX_CACHE_WATCH_HISTORY_BYTES, default 4 MiB);
	// negative keeps none. A cache keeps history only once watched.
	CacheWatchHistoryBytes int64
	// CacheWatchHistoryBytesTotal bounds the history of every watched
	// cache together (FELIX_CACHE_WATCH_HISTORY_BYTES_TOTAL, default 256
	// MiB): past it, a cache's next change pushes out its own oldest ones,
	// so resumes from there become resnapshots.
	CacheWatchHistoryBytesTotal int64
	// CacheWatchMaxBytes bounds one watch's queue of changes, counting key,
	// value and 64 bytes per change (FELIX_CACHE_WATCH_MAX_BYTES, default
	// 1 MiB); past it the watch ends lagged.
	CacheWatchMaxBytes int64
	// CacheWatchMaxBytesTotal bounds the queued bytes of every watch
	// together (FELIX_CACHE_WATCH_MAX_BYTES_TOTAL, default 256 MiB); the
	// watch whose change would pass it ends lagged.
	CacheWatchMaxBytesTotal int64
	// Storage, when set, makes durable streams write segment logs; nil
	// serves them from memory.
	Storage *StorageConfig
	// PlacedShards makes a stream open only the shards this broker is
	// placed on: ApplyStream opens none, OpenStreamShard opens one and
	// CloseStreamShard closes it (a broker in a cluster). False (the
	// default, standalone) opens every shard at ApplyStream.
	PlacedShards bool
	// ReplicationFor, when set, gives each durable shard this broker
	// opens as its leader what it consults about its followers: a nil
	// Replication means none (a shard acknowledged after its own write,
	// whose log nobody copies).
	ReplicationFor func(k StreamKey, shard uint32) Replication
	// ProducersPerShard bounds the idempotent producers each shard
	// remembers (FELIX_IDEMPOTENT_PRODUCERS_PER_SHARD, default 1024); past
	// it the least recently used is forgotten.
	ProducersPerShard int
	// ProducerScanRecords bounds how many of a durable shard's newest
	// records are read at open to rebuild its producer table (default
	// 262,144; negative reads none).
	ProducerScanRecords int
	// CommitStateMaxBytes bounds each durable shard's atomic-commit state
	// (FELIX_COMMIT_STATE_MAX_BYTES, default 64 MiB, bytes): a commit that
	// would pass it is refused overloaded, reason commit_state_full.
	CommitStateMaxBytes int64
	// Groups tunes consumer groups (group.go).
	Groups GroupConfig

	// metrics are the broker's own metrics, set by NewBroker (whatever the
	// caller's Config held); streams, shards and the watch environment
	// reach them through their copy of the Config.
	metrics *coreMetrics
	// promises is the broker's promises file (replica_damage.go), set by
	// NewBroker.
	promises *promiseStore
}

// withDefaults returns c with every zero or negative field set to its
// default.
func (c Config) withDefaults() Config {
	if c.SubQueueCapacity <= 0 {
		c.SubQueueCapacity = DefaultSubQueueCapacity
	}
	if c.SubQueueCapacity > MaxSubQueueCapacity {
		c.SubQueueCapacity = MaxSubQueueCapacity
	}
	if c.SubQueueMaxBytes <= 0 {
		c.SubQueueMaxBytes = DefaultSubQueueMaxBytes
	}
	if c.ReplayRingMaxBytes <= 0 {
		c.ReplayRingMaxBytes = DefaultReplayRingMaxBytes
	}
	if c.ReplayRingMaxBatches <= 0 {
		c.ReplayRingMaxBatches = DefaultReplayRingMaxBatches
	}
	if c.DefaultPolicy > DropOld {
		c.DefaultPolicy = DropNew
	}
	if c.ProducersPerShard <= 0 {
		c.ProducersPerShard = DefaultProducersPerShard
	}
	if c.CommitStateMaxBytes <= 0 {
		c.CommitStateMaxBytes = DefaultCommitStateMaxBytes
	}
	if c.ProducerScanRecords == 0 {
		c.ProducerScanRecords = DefaultProducerScanRecords
	}
	if c.CacheMaxEntries <= 0 {
		c.CacheMaxEntries = DefaultCacheMaxEntries
	}
	if c.CacheMaxBytes <= 0 {
		c.CacheMaxBytes = DefaultCacheMaxBytes
	}
	if c.CacheShards <= 0 {
		c.CacheShards = DefaultCacheShards
	}
	c.CacheShards = nextPowerOfTwo(c.CacheShards)
	if c.CacheWatchHistoryBytes == 0 {
		c.CacheWatchHistoryBytes = DefaultCacheWatchHistory
	}
	if c.CacheWatchHistoryBytesTotal <= 0 {
		c.CacheWatchHistoryBytesTotal = DefaultCacheWatchHistTotal
	}
	if c.CacheWatchMaxBytes <= 0 {
		c.CacheWatchMaxBytes = DefaultCacheWatchMaxBytes
	}
	if c.CacheWatchMaxBytesTotal <= 0 {
		c.CacheWatchMaxBytesTotal = DefaultCacheWatchMaxTotal
	}
	return c
}

func newWatchEnv(c Config) *watchEnv {
	e := &watchEnv{historyBytes: c.CacheWatchHistoryBytes, historyTotal: c.CacheWatchHistoryBytesTotal,
		maxBytes: c.CacheWatchMaxBytes, maxTotal: c.CacheWatchMaxBytesTotal, metrics: c.metrics}
	c.metrics.addWatchEnv(e)
	return e
}

func nextPowerOfTwo(n int) int {
	p := 1
	for p < n && p < 1<<16 {
		p <<= 1
	}
	return p
}

// QueuePolicy is what a full subscriber queue does with an arriving batch.
type QueuePolicy uint8

// Queue policies.
const (
	// DropNew drops the arriving batch for the full subscriber and counts it.
	DropNew QueuePolicy = iota
	// Block makes the publisher wait (bounded by its context) for room.
	Block
	// DropOld is accepted for compatibility and behaves as DropNew; its
	// drops are also counted in felix_sub_queue_drop_old_emulated_total.
	DropOld
)

// ParseQueuePolicy parses "drop_new", "block" or "drop_old"; the empty
// string means DropNew.
func ParseQueuePolicy(s string) (QueuePolicy, error) {
	switch s {
	case "", "drop_new":
		return DropNew, nil
	case "block":
		return Block, nil
	case "drop_old":
		return DropOld, nil
	}
	return DropNew, wire.NewError(wire.CodeInvalidRequest, "unknown subscriber queue policy %q", s).
		WithDetail("reason", "bad_queue_policy")
}

// String returns the policy's configuration name.
func (p QueuePolicy) String() string {
	switch p {
	case DropNew:
		return "drop_new"
	case Block:
		return "block"
	case DropOld:
		return "drop_old"
	}
	return fmt.Sprintf("QueuePolicy(%d)", uint8(p))
}
