// Package core is Felix's transport-independent broker core: the registry
// of streams and caches, shards with ordered publish and fanout, bounded
// subscriber queues, the per-shard replay ring, and the cache (in memory,
// or on a segment log with durable storage). Apart from the logs of
// durable streams and caches (each log's flusher, each cache store's
// maintenance loop, all stopped by Broker.Close) it does no I/O and starts
// no goroutines; roles/broker drives it.
//
// # Registry
//
// A Broker maps StreamKey to *Stream and CacheKey to *Cache under one
// mutex that only the registry operations (Apply*, Remove*, lookups)
// take. Callers look a stream or cache up once and then work on it
// directly. ApplyStream on an existing stream changes its overflow policy
// in place; a different shard count replaces the stream and ends the old
// one's subscribers with ErrStreamDeleted. RemoveTenant and
// RemoveNamespace remove everything below them.
//
// # Durable data
//
// A durable stream's files are written for one StreamIdentity (the
// cluster set with SetCluster and the spec's incarnation), recorded in
// its directory. RemoveStream, RemoveTenant and RemoveNamespace stop
// serving and keep the files; only DeleteStream, naming the identity,
// deletes them. Applying a stream whose directory holds another
// identity's files moves them aside (never deletes them) and brings back
// files of its own identity set aside earlier. HeldStreams reports what
// is kept without being served.
//
// # Placed shards
//
// A broker in a cluster serves only the shards placed on it
// (Config.PlacedShards). Its ApplyStream opens no shard: OpenStreamShard
// opens one (a durable shard claims the stream's directory on the first
// open and continues its log's offsets; an in-memory one starts empty)
// and CloseStreamShard closes it, ending its subscribers with the cause
// given (a *ShardMovedError naming the new owner) and closing its log;
// the files stay. A shard not open here answers Stream.Shard with
// shard_unavailable, reason not_ready. An update keeps open shards open;
// a replaced stream opens none. Without PlacedShards every shard opens
// with its stream, as on a standalone broker. A cache holds every key it
// is given; Cache.DropShard forgets the keys of one shard (and ends the
// watches reading it) when the broker loses that shard.
//
// # Publishing
//
// A keyed publish picks its shard with Stream.ShardForKey: the jump
// consistent hash of FNV-1a-64 of the key, computed by wire.ShardForKey so
// clients that route keys get the same answer. Shard.Publish then runs two
// steps under the shard's commit turn:
//
//  1. claim: check the shard is live and take the batch's offsets (a
//     durable log will append here);
//  2. complete: append the batch to the replay ring and enqueue one shared
//     *Envelope to every subscriber in the registry snapshot.
//
// Because the turn is held through fanout, every subscriber sees batches
// in offset order, and offsets are contiguous from 0 in each shard. The
// publish path reads subscribers from an atomically swapped immutable
// snapshot and never takes the registry mutex.
//
// # Overflow
//
// Each subscriber queue is bounded by items (Config.SubQueueCapacity or
// SubscribeOptions.Capacity) and payload bytes (Config.SubQueueMaxBytes);
// an empty queue admits one envelope of any size so nothing is
// undeliverable. The stream's QueuePolicy decides what a full queue does:
// DropNew drops the arriving batch for that subscriber only (counted in
// Subscriber.Dropped and felix_sub_queue_dropped_total); DropOld does the
// same and is also counted in felix_sub_queue_drop_old_emulated_total;
// Block queues the batch to everyone with room first and then waits,
// bounded by the publisher's context, on the full ones. Under Block one
// stalled subscriber therefore stalls every publisher of its shard; a
// subscriber that ends releases the waiter.
//
// # Subscribing
//
// Shard.Subscribe takes the replay backlog its start position asks for
// and registers the subscriber under the commit turn, so between backlog
// and live batches there is no gap and no duplicate. The backlog is queued
// above the queue's bounds and is never dropped; the ring's own bounds
// (Config.ReplayRingMaxBatches, ReplayRingMaxBytes) limit it. A consumer
// reads with Next, or waits on Ready and drains with TryNext. Done closes
// when the subscriber ends; after a stream deletion the envelopes already
// queued remain readable before Next reports ErrStreamDeleted.
//
// # Encoding once
//
// An Envelope is shared by every subscriber and the ring. Envelope.Frame
// encodes the event frame for a given flags value at most once and hands
// the same bytes to every caller; felix_event_frames_encoded_total, in the
// broker's Metrics set, counts encodes.
//
// # Consumer groups
//
// Shard.Groups (group*.go) serves a durable shard's consumer groups; an
// in-memory shard refuses them. The contract:
//
//  1. Poll claims owed records first (nacked, lapsed, past their delay),
//     then new ones, each for its visibility; one offset is claimed by
//     one poll at a time. Payloads are read from the log after the claim,
//     outside the groups' mutex.
//  2. The cursor advances only over contiguous finished offsets (acked,
//     dead-lettered, not events) and is written to the state file
//     (GroupStateFile, beside the segments) before the call returns, as
//     are dead letters and redrives; claims, delays and extensions are
//     memory only.
//  3. A state made at open (a restart) takes acks for offsets below the
//     tail it first saw that it has not handed out; past that, and after
//     a seek, an offset it never handed out is stale_claim.
//  4. Bounds: GroupConfig.MaxGroups per shard, MaxInFlight claims per
//     group, 16 × MaxInFlight remembered offsets above the cursor.
//  5. WaitC is closed when the shard's tail advances or a record is handed
//     back, so a waiting poll needs no timer per record.
//
// # Caches
//
// A Cache holds values copied on Put, with an optional TTL stored as an
// absolute expiry. Expired entries are absent to Get and Delete and are
// removed by them or by Sweep; the caller passes "now" explicitly.
// MaxEntries and MaxBytes bound each cache; a write past them is refused
// with overloaded / reason "cache_full".
//
// Every applied write (put, delete, expiry) takes the cache's next offset;
// the first is the cache's creation time in Unix nanoseconds, so offsets
// of an earlier cache of the name read as older than any history. A
// value's version is the offset of the put that wrote it (GetVersioned).
// PutIf (the key absent, or at a version) and DeleteIf (at a version)
// check and write under the key's shard lock, so they are atomic against
// every other write to the key; a refused condition writes nothing and
// takes no offset, and an expired entry is absent to a condition. Watch
// follows a key or prefix: a retained start gets the current values, then
// a state item, then every later change; a resume gets the changes from
// its offset out of a byte-bounded history (created at the first Watch),
// or a resnapshot when the history no longer reaches back. Each watch's
// queue is bounded by bytes (and all of them together); overflow ends the
// watch lagged at the first change it missed. Lock order: shard, then the
// cache's logMu, then a watch's mutex (then, on a log-backed cache, the
// store's mutex, which calls only into its log).
//
// # Log-backed caches
//
// With StorageConfig.Dir every cache keeps a CacheStore (cache_store*.go,
// cache_durable.go): a segment log of put, tombstone, expiry and copy
// records with a bounded key index rebuilt from a snapshot at open. The
// contract on top of the above:
//
//  1. Every applied write is appended to the log under logMu and takes
//     the log's offset (plus the cache's offset base), so offsets,
//     versions and watch resumes survive a restart. A write the log
//     refuses changes nothing and is returned (Put, Delete, PutIf,
//     DeleteIf); a refused expiry leaves the entry for a later sweep.
//  2. Put, Delete, PutIf and DeleteIf return once their record is durable
//     under the fsync policy; Get, GetVersioned and a refused condition
//     return once every write appended before them is, so no answer
//     reflects a write a crash could still take back.
//  3. A change reaches the history and the watches only once the log's
//     durable offset passes it (cache_log.go: after its fsync under
//     FsyncAlways, once written under FsyncPeriodic and FsyncNone), in
//     offset order, released by the log's flusher (OnDurable), by
//     WaitStaged, or by the append itself; a retained start's values wait
//     for its state offset likewise. A resume older than the in-memory
//     history is read from the log up to the released offset; one below
//     what compaction kept (or too far back for the watch's bound) is a
//     resnapshot. A log that fails ends the cache's watches.
//  4. Compaction copies cold values forward (records carrying their
//     versions, which are not changes: offsets may skip them) and drops
//     whole segments; it never rewrites or renumbers a record.
//  5. RemoveCache and Close keep the files; DeleteCache deletes them.
//  6. Counters live only on log-backed caches, in a CounterStore of their
//     own beside the cache's log (counter_store*.go, cache_counters.go):
//     CounterAddStaged appends a signed delta and returns the sum
//     including it, refusing an int64 overflow without appending;
//     CounterGetStaged returns the sum or "never written". Both are
//     answered after WaitStaged, which also waits for the counter log.
//     Open folds the log into the sums; compaction appends a checkpoint
//     per counter and drops whole segments below the point it took,
//     never renumbering. A cache without a log refuses counters
//     (unsupported).
package core
