package felix

import (
	"context"
	"fmt"
	"time"

	"github.com/felixmq/felix/wire"
)

// StreamInfo is a stream's information on the broker that answered
// (Client.StreamInfo): every shard, in shard order.
type StreamInfo struct {
	Namespace, Stream string
	Durable           bool
	// At is when the broker took the figures (its clock).
	At     time.Time
	Shards []ShardInfo
}

// ShardInfo is one shard of a StreamInfo.
type ShardInfo struct {
	Shard uint32
	// HasRecords says a durable shard holds records, FirstOffset to
	// LastOffset; both offsets are 0 without.
	HasRecords              bool
	FirstOffset, LastOffset uint64
	// NextOffset is the offset the next record gets.
	NextOffset uint64
	// Records and Bytes are what a durable shard's log holds (0 on an
	// in-memory stream).
	Records uint64
	Bytes   int64
	// Subscribers registered on this broker.
	Subscribers int
	// PublishedTotal counts the records published to the shard;
	// DeliveredTotal the events the broker wrote to its subscribers since
	// the shard's first subscription there began. Rates come from two
	// StreamInfo calls: Rate does the arithmetic.
	PublishedTotal, DeliveredTotal uint64
	// Unavailable says why a durable shard's log did not open.
	Unavailable string
}

// StreamInfo asks the broker for a stream's per-shard information: for a
// durable stream the first and last offsets, record count and bytes its
// log holds, and for every stream the subscribers and the published and
// delivered counters. It needs stream.subscribe on the stream. A broker
// that does not serve stream_info answers with a *BrokerError of code
// unsupported.
func (c *Client) StreamInfo(ctx context.Context, namespace, stream string) (*StreamInfo, error) {
	m := &wire.StreamInfo{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream}
	res, err := c.requestCall(ctx, m, &m.RequestID)
	if err != nil {
		return nil, err
	}
	ans, ok := res.msg.(*wire.StreamInfoOK)
	if !ok {
		return nil, fmt.Errorf("felix: stream_info answered with %s", typeOf(res.msg))
	}
	out := &StreamInfo{Namespace: namespace, Stream: stream, Durable: ans.Durable,
		At: time.UnixMicro(int64(ans.AtMicros)), Shards: make([]ShardInfo, 0, len(ans.Shards))}
	for _, sh := range ans.Shards {
		in := ShardInfo{Shard: sh.Shard, NextOffset: sh.NextOffset, Subscribers: sh.Subscribers,
			PublishedTotal: sh.PublishedTotal, DeliveredTotal: sh.DeliveredTotal, Unavailable: sh.Unavailable}
		if sh.FirstOffset != nil && sh.LastOffset != nil {
			in.HasRecords, in.FirstOffset, in.LastOffset = true, *sh.FirstOffset, *sh.LastOffset
		}
		in.Records, _ = maybe(sh.Records)
		if sh.Bytes != nil {
			in.Bytes = *sh.Bytes
		}
		out.Shards = append(out.Shards, in)
	}
	return out, nil
}

// Rate returns the publish and delivery rates per second of shard i
// between an earlier StreamInfo of the same stream from the same broker
// and this one. A counter that went down (the broker restarted, or the
// shard's last subscription ended) gives 0.
func (s *StreamInfo) Rate(earlier *StreamInfo, i int) (publish, deliver float64) {
	dt := s.At.Sub(earlier.At).Seconds()
	if dt <= 0 || i >= len(s.Shards) || i >= len(earlier.Shards) {
		return 0, 0
	}
	per := func(now, then uint64) float64 {
		if now < then {
			return 0
		}
		return float64(now-then) / dt
	}
	a, b := earlier.Shards[i], s.Shards[i]
	return per(b.PublishedTotal, a.PublishedTotal), per(b.DeliveredTotal, a.DeliveredTotal)
}

// CacheKeysPage is one page of Client.CacheKeys.
type CacheKeysPage struct {
	Keys []string
	// Next, when More, is the after of the next page.
	Next string
	More bool
}

// CacheKeys lists one page of a cache's keys in byte order: those that
// start with prefix and sort after after ("" for the first page), at most
// limit of them (the broker's default, 100, when 0; at most 1000). Pass
// the page's Next as after while More is true. It needs cache.read over
// every key under prefix.
func (c *Client) CacheKeys(ctx context.Context, namespace, cache, prefix, after string, limit int) (*CacheKeysPage, error) {
	m := &wire.CacheKeys{TenantID: c.cfg.Tenant, Namespace: namespace, Cache: cache, Prefix: prefix, After: after, Limit: limit}
	res, err := c.requestCall(ctx, m, &m.RequestID)
	if err != nil {
		return nil, err
	}
	ans, ok := res.msg.(*wire.CacheKeysPage)
	if !ok {
		return nil, fmt.Errorf("felix: cache_keys answered with %s", typeOf(res.msg))
	}
	page := &CacheKeysPage{Keys: ans.Keys}
	if ans.Next != nil {
		page.Next, page.More = *ans.Next, true
	}
	return page, nil
}
