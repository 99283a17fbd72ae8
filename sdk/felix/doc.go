// Package felix is the Go client for Felix brokers: publish, subscribe,
// read durable streams, consume groups and cache over one QUIC connection
// per broker.
//
// # Connecting
//
// A Client holds one TLS 1.3 QUIC connection (ALPN "felix/1") to one
// broker. The broker is always verified against Config.CAFile or
// Config.RootCAs; there is no way to skip verification. Every stream the
// client opens starts with an auth carrying Config.Tenant and Config.Token;
// Connect authenticates one stream before returning, so a bad token fails
// there with a *BrokerError of code unauthorized. ConfigFromEnv reads the
// FELIX_* variables; bad values are reported by Connect.
//
// ClusterClient has the same methods for a cluster: it learns every
// broker from one of its seeds (topology), keeps one Client per broker,
// replaced when its connection dies, and sends each call to the owner of
// its shard (see its doc for routing and which calls are retried). Its
// Subscribe and SubscribeFrom return a *ClusterSubscription (see Durable
// streams); SubscribeSharded reads every shard of a stream as one
// *ShardedSubscription.
//
// # Publishing
//
// Publishes are spread over Config.PublishStreams streams by (namespace,
// stream): one stream's publishes share a single writer and QUIC stream,
// so they reach the broker in call order. With AckNone a call returns once
// its frame is queued for that writer (bounded: 1024 requests per writer
// and 64 MiB across writers, after which calls wait); Finish waits until
// the broker has read everything queued and reports the failures met. With
// AckPerMessage or AckPerBatch the call waits for the broker's answer; a
// refusal is a *BrokerError carrying the code, retry class and detail.
// Binary frames are used when the broker advertises them, JSON otherwise.
//
// Cancelling a publish's context stops the wait, not the publish: a frame
// already written may still be applied. A refusal of a fire-and-forget
// frame (an error message with no request id) is reported by the next
// Finish. When a publish stream ends or the connection dies, acked
// publishes written on it and not yet answered fail with a *BrokerError of
// code internal and retry class outcome_unknown (errors.Is also matches
// ErrConnectionLost when the connection died); the next call opens a fresh
// stream.
//
// For a re-send that must not land twice, Client.IdempotentProducer (or
// ClusterClient.IdempotentProducer) numbers batches per shard under a
// producer id and sends them from a goroutine of its own: a batch whose
// answer was lost is sent again under the same sequence and answered with
// where its first copy landed, and a refusal is a *PublishRefusedError.
// Keyed batches are numbered by the stream's width as the producer asked
// it and declared by it (publish_width): under a new width the stream
// starts again under a fresh producer id, except while a batch on it is
// in doubt, whose re-send under the width that has gone fails with an
// *InDoubtError until the width comes back or AbandonInDoubt gives it up
// (docs/protocol.md, "Width changes").
//
// # Subscribing
//
// Subscribe opens a stream for the request; the broker answers with the
// subscription id and opens a unidirectional event stream for it. Next
// reads that stream itself, one frame at a time, so no goroutine stands
// between QUIC and the caller: what waits on the client is what QUIC's
// stream window holds (up to 16 MiB) plus the rest of the last batch read.
// A caller that stops calling Next stops reading, and QUIC flow control
// slows the broker, whose stream policy then decides what to drop. Next is
// cancel-safe: a context that ends interrupts the read, and the frame it
// was in is read whole by the next call. When the connection dies or the
// broker ends the event stream, Next returns the events already read and
// then ErrSubscriptionLost; an error the broker sends on the event stream
// ends the subscription with that *BrokerError. Subscription.Close makes
// Next return ErrClosed at once; after Client.Close it returns the rest
// of the batch already read, then ErrClosed.
//
// # Durable streams
//
// The client offers every event-batch option (offsets, skip counts,
// append times, publisher) and uses what the broker sends: Event.Offset,
// SkippedBefore, Timestamp and Publisher. A jump between consecutive
// offsets beyond SkippedBefore is a drop. SubscribeFrom starts at
// Earliest, Latest or AtOffset on one shard; on a durable stream
// StartOffset and LiveOffset say where it joined (events below
// LiveOffset are catch-up). A start the broker cannot serve fails with
// *SubscribeCursorError, whose Available is the nearest offset that would
// work. When the broker's queue for a durable subscription drops, Next
// returns what arrived before the drop and then *SubscriptionLagged.
//
// A ClusterSubscription resumes by itself after a lag or a lost
// connection once it knows a position (an event with an offset, or a
// reported start offset): it subscribes again right after the last event
// it delivered, with backoff between failed attempts (at most 10 in a
// row), and drops anything at or below that offset, so Next sees no gap
// and no duplicate. Resumes counts them. A *SubscribeCursorError met on
// the way is returned. Without offsets it ends with ErrSubscriptionLost.
//
// Read returns one page of committed records of a shard without opening
// a subscription; continue from ReadPage.NextOffset until it is empty or
// reaches the end. OffsetForTime finds the first offset appended at or
// after a time. Both travel on the cache streams (answers matched by
// request_id) and need the broker to advertise them (SupportsRead,
// SupportsOffsetForTime); otherwise they fail with a *BrokerError of code
// unsupported before sending anything. The *Acked publish variants return
// the offset the broker gave the first payload, when it reports one.
//
// # Cache
//
// CachePut, CacheGet and CacheDelete are request/response calls over
// Config.CacheStreams streams; each carries up to 256 requests in flight, matched
// to their answers by request_id.
// CacheGet and CacheDelete return found=false for an absent key and a
// non-nil empty slice for a stored empty value.
//
// CachePutIf (IfAbsent or IfVersion), CacheDeleteIf and CacheGetVersioned
// are the conditional forms (FEATURE_CACHE_CONDITIONAL): a version is the
// offset of the put that wrote a value, and a condition that does not hold
// is a CondResult with Applied false and the key's current version, not an
// error. A conditional write whose answer was lost fails with retry class
// outcome_unknown and is never sent again, by Client or ClusterClient.
//
// # Cache watches
//
// WatchCache follows one key (WatchKey) or every key with a prefix
// (WatchPrefix): each put, delete and expiry in the cache's write order,
// with its offset. WatchRetained starts with each matching key's current
// value and then an item with StateComplete set. To pick up after a stop,
// keep ResumeOffset and watch again with WatchFrom: every change since
// arrives, none twice; if the broker no longer holds that history (or
// restarted) the watch starts over from current values and Resnapshot
// says so, and the caller replaces what it held instead of merging. A
// watch that falls behind ends with a *CacheWatchLagged naming the offset
// to watch again from: a drop is never silent. ClusterClient.WatchCache
// does all this by itself: its ClusterCacheWatch watches again after a lag
// or a lost connection, never delivers a change twice, and passes a
// resnapshot through as Retained items then a StateComplete item, which
// replace what the caller held for the watched keys.
//
//	w, err := client.WatchCache(ctx, "default", "sessions", felix.WatchPrefix("user-"), felix.WatchRetained())
//	for {
//		it, err := w.Next(ctx)
//		if err != nil {
//			break // *CacheWatchLagged: WatchFrom(lagged.ResumeFrom)
//		}
//		apply(it)
//	}
//
// # Consumer groups
//
// A consumer group hands each record of one shard of a durable stream to
// one consumer and takes it back unless it is acked within its
// visibility (at least once). GroupPoll, GroupAck, GroupNack,
// GroupExtend, GroupDeadLetter(s), GroupDiscard, GroupRedrive,
// GroupSeek, GroupCreate (a seek with if_new), GroupDescribe and
// GroupDelete name the shard; Group binds one shard's group with
// Consume. A group lives on one shard and only the shard's leader serves
// it: Client returns a *NotLeaderError, ClusterClient follows it.
//
// ClusterClient.GroupCreateStream, GroupSeekStream, GroupDescribeStream
// and GroupDeleteStream run the call on every shard of a stream (its
// width from stream_shards), each on the shard's owner, and answer in
// shard order; a shard that fails is named in the joined error beside
// the others' answers. ClusterClient.GroupSharded merges the group over
// every shard as one *ShardedGroup: at most one poll out per shard, all
// shards polled concurrently, records handed out one shard in turn, each
// GroupRecord carrying its Shard so Ack, Nack, Extend and DeadLetter go
// to that shard's owner; a shard whose owner is down or moving is polled
// again with backoff while the others carry on. It holds at most one
// poll's worth of claimed records per shard between Polls; Close hands
// them back. Client has the same calls for a broker that leads every
// shard (felix serve).
//
// # Acting for many users
//
// Client.WithIdentity (a TokenProvider, asked once for every stream the
// handle opens) and Client.WithIdentityToken (a fixed token) return a
// *Handle that acts for one user over the Client's connection. Each
// stream it opens authenticates with the user's tenant and token, so the
// broker checks the user's grants, not the gateway's. A handle opens no
// connection: one publish stream and one cache stream when first needed,
// and one stream per subscription. Handle.Close ends only the handle's
// streams; Client.Close ends its handles too. When the broker revokes the
// user (or the user's token expires), the handle's subscriptions end and
// its calls fail with a *BrokerError of code revoked (or unauthorized);
// the gateway and other handles are untouched. ClusterClient.WithIdentity
// returns a ClusterClient that does the same over the gateway's current
// connection and follows it when the gateway moves to another broker.
//
// # Errors
//
// Refusals from the broker are *BrokerError (use errors.As and branch on
// Retry). *SubscribeCursorError and *SubscriptionLagged carry offsets to
// act on. *NotLeaderError names the broker that owns a shard a request
// was refused for, and *ShardMovedError ends a subscription or watch
// whose shard moved (a ClusterClient follows both by itself). ErrConnectionLost wraps failures caused by the connection going
// away, ErrSubscriptionLost ends subscriptions that lost their stream, and
// ErrClosed is returned after Close.
//
// # Metrics
//
// felix_client_publish_total, felix_client_publish_errors_total,
// felix_client_events_received_total, felix_client_reconnects_total and
// felix_client_subscription_resumes_total and
// felix_client_cache_watch_resumes_total are kept in the SDK's own set,
// not in the VictoriaMetrics default set, so that a server in the same
// process never exports them as its own; WriteMetrics writes them.
package felix
