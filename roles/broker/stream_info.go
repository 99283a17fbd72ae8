package broker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// handleStreamInfo answers stream_info: every shard's offsets, what its
// log holds, its subscribers and its publish and delivery counters on
// this broker.
func (cs *controlStream) handleStreamInfo(m *wire.StreamInfo) {
	rid := m.RequestID
	if err := m.Validate(); err != nil {
		cs.sendError(asWireError(err), &rid)
		return
	}
	if e := cs.authorize(m.TenantID, auth.ActionStreamSubscribe, auth.StreamResource(m.TenantID, m.Namespace, m.Stream)); e != nil {
		cs.sendError(e, &rid)
		return
	}
	st, e := cs.srv.resolveStream(m.TenantID, m.Namespace, m.Stream)
	if e != nil {
		cs.sendError(e, &rid)
		return
	}
	ans := &wire.StreamInfoOK{Durable: st.Durable(), AtMicros: uint64(time.Now().UnixMicro()), RequestID: rid}
	for _, in := range st.Info() {
		ans.Shards = append(ans.Shards, cs.srv.shardInfoJSON(st, in))
	}
	cs.sendMsg(ans)
}

// shardInfoJSON puts a shard's information in its wire shape.
func (s *Server) shardInfoJSON(st *core.Stream, in core.ShardInfo) wire.ShardInfoJSON {
	out := wire.ShardInfoJSON{Shard: in.Index, NextOffset: in.NextOffset, Subscribers: in.Subscribers,
		PublishedTotal: in.NextOffset, Unavailable: in.Unavailable}
	if sh, err := st.Shard(in.Index); err == nil {
		out.DeliveredTotal = s.metrics.deliveries.count(sh)
	}
	if in.Durable && in.Unavailable == "" {
		records, bytes := in.Records, in.Bytes
		out.Records, out.Bytes = &records, &bytes
		if in.Records > 0 {
			first, last := in.FirstOffset, in.NextOffset-1
			out.FirstOffset, out.LastOffset = &first, &last
		}
	}
	return out
}

// handleCacheKeys answers cache_keys with one page of keys. Listing a
// prefix needs cache.read over every key under it (the resource
// "<prefix>*").
func (cs *controlStream) handleCacheKeys(m *wire.CacheKeys) {
	c, ok := cs.cacheFor(m, auth.ActionCacheRead, m.TenantID, m.Namespace, m.Cache, m.Prefix+"*", m.RequestID)
	if !ok {
		return
	}
	limit := m.Limit
	if limit == 0 {
		limit = defaultCacheKeysLimit
	}
	if cs.srv.cluster != nil {
		cs.clusterCacheKeys(m, c, limit) // cache_keys_cluster.go
		return
	}
	keys, more := c.Keys(m.Prefix, m.After, limit, time.Now())
	page := &wire.CacheKeysPage{Keys: keys, RequestID: m.RequestID}
	if page.Keys == nil {
		page.Keys = []string{}
	}
	if more {
		next := keys[len(keys)-1]
		page.Next = &next
	}
	cs.sendMsg(page)
}

// defaultCacheKeysLimit is the page a cache_keys without a limit gets.
const defaultCacheKeysLimit = 100

// shardDeliveries counts, per shard, the events this broker wrote to the
// shard's subscribers. A shard has an entry while it has a subscription
// here (acquire/release), so the map holds no shard that went away; the
// count starts again when a shard's last subscription on this broker
// ends, which is why stream_info calls it delivered since then.
type shardDeliveries struct {
	mu sync.Mutex
	// m holds one entry per shard with subscriptions. Guarded by mu.
	// Invariant: every entry has refs > 0.
	m map[*core.Shard]*deliveryCount
}

// deliveryCount is one shard's delivered events; refs is guarded by
// shardDeliveries.mu.
type deliveryCount struct {
	n    atomic.Uint64
	refs int
}

// acquire returns sh's count for a new subscription.
func (d *shardDeliveries) acquire(sh *core.Shard) *deliveryCount {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[*core.Shard]*deliveryCount{}
	}
	dc := d.m[sh]
	if dc == nil {
		dc = &deliveryCount{}
		d.m[sh] = dc
	}
	dc.refs++
	return dc
}

// release gives back what acquire returned for sh.
func (d *shardDeliveries) release(sh *core.Shard) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dc := d.m[sh]
	if dc == nil {
		return
	}
	if dc.refs--; dc.refs == 0 {
		delete(d.m, sh)
	}
}

// count returns sh's delivered events (0 without subscriptions).
func (d *shardDeliveries) count(sh *core.Shard) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if dc := d.m[sh]; dc != nil {
		return dc.n.Load()
	}
	return 0
}
