package log

import "fmt"

// Kind says what a record means to its owner. The log stores and returns
// it and interprets none: every kind is framed, checked, indexed, retained
// and truncated alike. Kinds are grouped by owner in blocks of 16 so each
// owner can grow without renumbering another's; the numbering is part of
// the on-disk format (docs/storage.md).
type Kind uint8

const (
	// KindData is a stream record (an event). Every record written before
	// records had kinds (layout version 0) reads back as KindData.
	KindData Kind = 0x00
	// KindGenerationStart is written by a shard's new leader as the first
	// record of its generation; it takes an offset and is never delivered.
	KindGenerationStart Kind = 0x01

	// KindCachePut sets a key of a log-backed cache.
	KindCachePut Kind = 0x10
	// KindCacheTombstone deletes a key of a log-backed cache.
	KindCacheTombstone Kind = 0x11
	// KindCacheExpiry records that a key's TTL ran out.
	KindCacheExpiry Kind = 0x12
	// KindCacheCopy is a live cache value that compaction copied forward
	// from an old segment, carrying the version (offset) of the put that
	// wrote it; it is not a write.
	KindCacheCopy Kind = 0x13
	// KindCounterDelta adds a signed delta to a counter of a log-backed
	// cache (its own counter log, beside the cache's).
	KindCounterDelta Kind = 0x14
	// KindCounterCheckpoint sets a counter to the sum it had when
	// compaction wrote it; the deltas before it may then be dropped.
	KindCounterCheckpoint Kind = 0x15
	// KindCounterRemove forgets a counter (its placement shard left the
	// broker): it reads as never written until an add writes it again.
	KindCounterRemove Kind = 0x16

	// 0x02–0x0f: more stream and replication kinds.
	// 0x17–0x1f: more cache kinds.
	// 0x20–0x2f: reserved for idempotent-producer state.
	// 0x30–0x3f: reserved for consumer groups (cursors, dead letters).
	// 0x40–0xff: unassigned.
)

// String names a kind: "data", "generation-start", "cache-put",
// "cache-tombstone", "cache-expiry", "cache-copy", "counter-delta",
// "counter-checkpoint", "counter-remove", or "kind(0xNN)" for one this build
// has no name for.
func (k Kind) String() string {
	switch k {
	case KindData:
		return "data"
	case KindGenerationStart:
		return "generation-start"
	case KindCachePut:
		return "cache-put"
	case KindCacheTombstone:
		return "cache-tombstone"
	case KindCacheExpiry:
		return "cache-expiry"
	case KindCacheCopy:
		return "cache-copy"
	case KindCounterDelta:
		return "counter-delta"
	case KindCounterCheckpoint:
		return "counter-checkpoint"
	case KindCounterRemove:
		return "counter-remove"
	}
	return fmt.Sprintf("kind(0x%02x)", uint8(k))
}
