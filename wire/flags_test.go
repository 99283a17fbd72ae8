package wire

import (
	"math/bits"
	"testing"
)

// The flag and feature tables of spec/protocol-pins.md, hard-coded here so
// that a change to a constant cannot pass unnoticed.
var pinnedFlags = map[string]uint16{
	"FLAG_BINARY_PUBLISH_BATCH":      0x0001,
	"FLAG_BINARY_PUBLISH_ACKED":      0x0002,
	"FLAG_BINARY_EVENT_BATCH":        0x0004,
	"FLAG_BINARY_EVENT_BATCH_SHARED": 0x0008,
	"FLAG_EVENT_BATCH_OFFSETS":       0x0010,
	"FLAG_EVENT_BATCH_SKIPPED":       0x0020,
	"FLAG_BINARY_PUBLISH_ACK_OFFSET": 0x0040,
	"FLAG_BINARY_PUBLISH_KEYED":      0x0080,
	"FLAG_BINARY_PUBLISH_IDEMPOTENT": 0x0100,
	"FLAG_EVENT_BATCH_PUBLISHER":     0x2000,
	"FLAG_EVENT_BATCH_TIMESTAMPS":    0x4000,
}

var pinnedFeatureBits = map[string]int{
	"FEATURE_ERROR_CODES": 0, "FEATURE_UNSUPPORTED": 1, "FEATURE_PUBLISH_PIPELINE": 2,
	"FEATURE_ACK_ON_COMMIT": 3, "FEATURE_CACHE_DELETE": 4, "FEATURE_CACHE_CONDITIONAL": 5,
	"FEATURE_CACHE_WATCH": 6, "FEATURE_CACHE_WATCH_RETAINED": 7, "FEATURE_COUNTERS": 8,
	"FEATURE_STREAM_READ": 9, "FEATURE_RECORD_TIMESTAMPS": 10, "FEATURE_SUBSCRIBE_QUEUE": 11,
	"FEATURE_SUBSCRIPTION_LAGGED": 12, "FEATURE_STREAM_DELETED": 13, "FEATURE_CONSUMER_GROUP": 14,
	"FEATURE_GROUP_DEAD_LETTERS": 15, "FEATURE_GROUP_ADMIN": 16, "FEATURE_GROUP_CLAIM_CONTROL": 17,
	"FEATURE_GROUP_PUBLISHER": 18, "FEATURE_IDEMPOTENT_PRODUCER": 19, "FEATURE_PUBLISH_CONDITIONAL": 20,
	"FEATURE_EXPLICIT_SHARD": 21, "FEATURE_ATOMIC_COMMIT": 22, "FEATURE_PUBLISH_WIDTH": 23,
	"FEATURE_TOPOLOGY": 24, "FEATURE_REDIRECT": 25, "FEATURE_STREAM_SHARDS": 26,
	"FEATURE_CACHE_SHARDS": 27, "FEATURE_SHARD_OWNERS": 28, "FEATURE_SHARD_MOVED": 29,
}

func TestFlagValues(t *testing.T) {
	consts := map[string]uint16{
		"FLAG_BINARY_PUBLISH_BATCH":      FlagBinaryPublishBatch,
		"FLAG_BINARY_PUBLISH_ACKED":      FlagBinaryPublishAcked,
		"FLAG_BINARY_EVENT_BATCH":        FlagBinaryEventBatch,
		"FLAG_BINARY_EVENT_BATCH_SHARED": FlagBinaryEventBatchShared,
		"FLAG_EVENT_BATCH_OFFSETS":       FlagEventBatchOffsets,
		"FLAG_EVENT_BATCH_SKIPPED":       FlagEventBatchSkipped,
		"FLAG_BINARY_PUBLISH_ACK_OFFSET": FlagBinaryPublishAckOffset,
		"FLAG_BINARY_PUBLISH_KEYED":      FlagBinaryPublishKeyed,
		"FLAG_BINARY_PUBLISH_IDEMPOTENT": FlagBinaryPublishIdempotent,
		"FLAG_EVENT_BATCH_PUBLISHER":     FlagEventBatchPublisher,
		"FLAG_EVENT_BATCH_TIMESTAMPS":    FlagEventBatchTimestamps,
	}
	if len(consts) != len(pinnedFlags) || len(FlagNames) != len(pinnedFlags) {
		t.Fatalf("%d constants, %d names, %d pinned", len(consts), len(FlagNames), len(pinnedFlags))
	}
	for name, want := range pinnedFlags {
		if got := consts[name]; got != want {
			t.Errorf("%s = %#04x, pinned %#04x", name, got, want)
		}
		if FlagNames[want] != name {
			t.Errorf("FlagNames[%#04x] = %q, want %s", want, FlagNames[want], name)
		}
		if bits.OnesCount16(want) != 1 {
			t.Errorf("%s is not a single bit", name)
		}
	}
}

func TestFeatureValues(t *testing.T) {
	consts := []uint64{
		FeatureErrorCodes, FeatureUnsupported, FeaturePublishPipeline, FeatureAckOnCommit,
		FeatureCacheDelete, FeatureCacheConditional, FeatureCacheWatch, FeatureCacheWatchRetained,
		FeatureCounters, FeatureStreamRead, FeatureRecordTimestamps, FeatureSubscribeQueue,
		FeatureSubscriptionLagged, FeatureStreamDeleted, FeatureConsumerGroup, FeatureGroupDeadLetters,
		FeatureGroupAdmin, FeatureGroupClaimControl, FeatureGroupPublisher, FeatureIdempotentProducer,
		FeaturePublishConditional, FeatureExplicitShard, FeatureAtomicCommit, FeaturePublishWidth,
		FeatureTopology, FeatureRedirect, FeatureStreamShards, FeatureCacheShards,
		FeatureShardOwners, FeatureShardMoved,
	}
	if len(consts) != len(pinnedFeatureBits) || len(FeatureNames) != len(pinnedFeatureBits) {
		t.Fatalf("%d constants, %d names, %d pinned", len(consts), len(FeatureNames), len(pinnedFeatureBits))
	}
	for name, bit := range pinnedFeatureBits {
		if FeatureNames[bit] != name {
			t.Errorf("FeatureNames[%d] = %q, pinned %s", bit, FeatureNames[bit], name)
		}
		if consts[bit] != 1<<bit {
			t.Errorf("%s = %#x, pinned 1<<%d", name, consts[bit], bit)
		}
	}
	// Spot checks that do not go through the lists above.
	if FeatureErrorCodes != 1 || FeatureCacheDelete != 16 || FeatureShardMoved != 1<<29 {
		t.Error("feature constants moved")
	}
}
