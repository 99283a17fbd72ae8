package wire

// Frame flag bits (u16). The same bit space is used by client_flags and
// server_flags in auth.
const (
	FlagBinaryPublishBatch      uint16 = 0x0001
	FlagBinaryPublishAcked      uint16 = 0x0002
	FlagBinaryEventBatch        uint16 = 0x0004
	FlagBinaryEventBatchShared  uint16 = 0x0008
	FlagEventBatchOffsets       uint16 = 0x0010
	FlagEventBatchSkipped       uint16 = 0x0020
	FlagBinaryPublishAckOffset  uint16 = 0x0040
	FlagBinaryPublishKeyed      uint16 = 0x0080
	FlagBinaryPublishIdempotent uint16 = 0x0100
	FlagEventBatchPublisher     uint16 = 0x2000
	FlagEventBatchTimestamps    uint16 = 0x4000
)

// Feature bits (u64) for features / server_features in auth.
const (
	FeatureErrorCodes         uint64 = 1 << 0
	FeatureUnsupported        uint64 = 1 << 1
	FeaturePublishPipeline    uint64 = 1 << 2
	FeatureAckOnCommit        uint64 = 1 << 3
	FeatureCacheDelete        uint64 = 1 << 4
	FeatureCacheConditional   uint64 = 1 << 5
	FeatureCacheWatch         uint64 = 1 << 6
	FeatureCacheWatchRetained uint64 = 1 << 7
	FeatureCounters           uint64 = 1 << 8
	FeatureStreamRead         uint64 = 1 << 9
	FeatureRecordTimestamps   uint64 = 1 << 10
	FeatureSubscribeQueue     uint64 = 1 << 11
	FeatureSubscriptionLagged uint64 = 1 << 12
	FeatureStreamDeleted      uint64 = 1 << 13
	FeatureConsumerGroup      uint64 = 1 << 14
	FeatureGroupDeadLetters   uint64 = 1 << 15
	FeatureGroupAdmin         uint64 = 1 << 16
	FeatureGroupClaimControl  uint64 = 1 << 17
	FeatureGroupPublisher     uint64 = 1 << 18
	FeatureIdempotentProducer uint64 = 1 << 19
	FeaturePublishConditional uint64 = 1 << 20
	FeatureExplicitShard      uint64 = 1 << 21
	FeatureAtomicCommit       uint64 = 1 << 22
	FeaturePublishWidth       uint64 = 1 << 23
	FeatureTopology           uint64 = 1 << 24
	FeatureRedirect           uint64 = 1 << 25
	FeatureStreamShards       uint64 = 1 << 26
	FeatureCacheShards        uint64 = 1 << 27
	FeatureShardOwners        uint64 = 1 << 28
	FeatureShardMoved         uint64 = 1 << 29
)

// FlagNames maps each flag bit to its specification name.
var FlagNames = map[uint16]string{
	FlagBinaryPublishBatch:      "FLAG_BINARY_PUBLISH_BATCH",
	FlagBinaryPublishAcked:      "FLAG_BINARY_PUBLISH_ACKED",
	FlagBinaryEventBatch:        "FLAG_BINARY_EVENT_BATCH",
	FlagBinaryEventBatchShared:  "FLAG_BINARY_EVENT_BATCH_SHARED",
	FlagEventBatchOffsets:       "FLAG_EVENT_BATCH_OFFSETS",
	FlagEventBatchSkipped:       "FLAG_EVENT_BATCH_SKIPPED",
	FlagBinaryPublishAckOffset:  "FLAG_BINARY_PUBLISH_ACK_OFFSET",
	FlagBinaryPublishKeyed:      "FLAG_BINARY_PUBLISH_KEYED",
	FlagBinaryPublishIdempotent: "FLAG_BINARY_PUBLISH_IDEMPOTENT",
	FlagEventBatchPublisher:     "FLAG_EVENT_BATCH_PUBLISHER",
	FlagEventBatchTimestamps:    "FLAG_EVENT_BATCH_TIMESTAMPS",
}

// FeatureNames maps each feature bit number to its specification name.
var FeatureNames = [...]string{
	"FEATURE_ERROR_CODES", "FEATURE_UNSUPPORTED", "FEATURE_PUBLISH_PIPELINE",
	"FEATURE_ACK_ON_COMMIT", "FEATURE_CACHE_DELETE", "FEATURE_CACHE_CONDITIONAL",
	"FEATURE_CACHE_WATCH", "FEATURE_CACHE_WATCH_RETAINED", "FEATURE_COUNTERS",
	"FEATURE_STREAM_READ", "FEATURE_RECORD_TIMESTAMPS", "FEATURE_SUBSCRIBE_QUEUE",
	"FEATURE_SUBSCRIPTION_LAGGED", "FEATURE_STREAM_DELETED", "FEATURE_CONSUMER_GROUP",
	"FEATURE_GROUP_DEAD_LETTERS", "FEATURE_GROUP_ADMIN", "FEATURE_GROUP_CLAIM_CONTROL",
	"FEATURE_GROUP_PUBLISHER", "FEATURE_IDEMPOTENT_PRODUCER", "FEATURE_PUBLISH_CONDITIONAL",
	"FEATURE_EXPLICIT_SHARD", "FEATURE_ATOMIC_COMMIT", "FEATURE_PUBLISH_WIDTH",
	"FEATURE_TOPOLOGY", "FEATURE_REDIRECT", "FEATURE_STREAM_SHARDS",
	"FEATURE_CACHE_SHARDS", "FEATURE_SHARD_OWNERS", "FEATURE_SHARD_MOVED",
}
