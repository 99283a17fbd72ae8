package felix

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/wire"
)

// CacheWatchFilter chooses what a watch sees: one key, or with Prefix
// every key starting with Key (an empty Key with Prefix is the whole
// cache).
type CacheWatchFilter struct {
	Key    string
	Prefix bool
}

// WatchKey watches one key.
func WatchKey(key string) CacheWatchFilter { return CacheWatchFilter{Key: key} }

// WatchPrefix watches every key starting with prefix ("" is every key).
func WatchPrefix(prefix string) CacheWatchFilter { return CacheWatchFilter{Key: prefix, Prefix: true} }

// WatchOption shapes a WatchCache call.
type WatchOption func(*watchOptions)

type watchOptions struct {
	from       *uint64
	retained   bool
	shard      *uint32
	fromShards map[uint32]uint64
}

// WatchShard has a prefix watch read one shard of a multi-shard cache
// (the cache_watch's shard). A ClusterClient sets it by itself.
func WatchShard(shard uint32) WatchOption {
	return func(o *watchOptions) { o.shard = &shard }
}

// WatchFromShards resumes a ClusterClient's prefix watch of a multi-shard
// cache: each shard named carries on from its offset (use
// ClusterCacheWatch.ResumeOffsets of the watch that ended), as WatchFrom
// does for one. A Client's watch ignores it.
func WatchFromShards(offsets map[uint32]uint64) WatchOption {
	return func(o *watchOptions) { o.fromShards = offsets }
}

// WatchFrom resumes a watch: the first change delivered is the first at or
// after offset (use CacheWatch.ResumeOffset of the watch that ended). An
// offset older than the broker's history is answered with a resnapshot:
// current values first (see CacheWatch.Resnapshot).
func WatchFrom(offset uint64) WatchOption {
	return func(o *watchOptions) { o.from = &offset }
}

// WatchRetained starts the watch with each matching key's current value,
// then an item with StateComplete, then the changes. It needs a broker
// that advertised FEATURE_CACHE_WATCH_RETAINED, and excludes WatchFrom.
func WatchRetained() WatchOption {
	return func(o *watchOptions) { o.retained = true }
}

// CacheWatchItem is one change a watch delivered, or the marker that ends
// the current values of a retained start or a resnapshot.
type CacheWatchItem struct {
	// Offset is the write that made the change. For a Retained item it is
	// the write that set the current value; for a StateComplete item, the
	// offset every later change is at or after.
	Offset uint64
	Op     string // "put", "delete" or "expire"; "" on a StateComplete item
	Key    string
	// Value is a put's value (non-nil, possibly empty); nil otherwise.
	Value []byte
	// ExpiresAt is a put's expiry; zero when it has none.
	ExpiresAt time.Time
	// Retained marks a current value sent before the changes.
	Retained bool
	// StateComplete marks the end of the current values: Count of them
	// were sent, and what follows are changes.
	StateComplete bool
	Count         uint64
	// Shard is the shard of a ClusterClient's prefix watch of a
	// multi-shard cache the item came from; 0 otherwise.
	Shard uint32
}

// CacheWatchLagged ends a watch that fell behind: its queue on the broker
// passed its bound. ResumeFrom is the first offset it was not sent, so
// WatchFrom(ResumeFrom) misses nothing (CacheWatch.ResumeOffset, once
// every item is read, is as good). Find it with errors.As.
type CacheWatchLagged struct {
	WatchID    uint64
	ResumeFrom uint64
}

// Error implements error.
func (e *CacheWatchLagged) Error() string {
	return fmt.Sprintf("felix: cache watch %d fell behind and was ended by the broker; resume from offset %d",
		e.WatchID, e.ResumeFrom)
}

// SupportsCacheWatch reports whether the broker advertised
// FEATURE_CACHE_WATCH.
func (c *Client) SupportsCacheWatch() bool { return c.serverFeatures&wire.FeatureCacheWatch != 0 }

// WatchCache watches one key, or a prefix, of namespace/cache. A refusal
// is a *BrokerError; a broker that did not advertise FEATURE_CACHE_WATCH
// (or FEATURE_CACHE_WATCH_RETAINED for WatchRetained) fails it with code
// unsupported before anything is sent.
func (c *Client) WatchCache(ctx context.Context, namespace, cache string, filter CacheWatchFilter, opts ...WatchOption) (*CacheWatch, error) {
	var o watchOptions
	for _, opt := range opts {
		opt(&o)
	}
	if c.serverFeatures&wire.FeatureCacheWatch == 0 {
		return nil, notSent(unsupported("FEATURE_CACHE_WATCH, so it does not serve cache_watch"))
	}
	if o.retained && c.serverFeatures&wire.FeatureCacheWatchRetained == 0 {
		return nil, notSent(unsupported("FEATURE_CACHE_WATCH_RETAINED, so it does not serve retained watches"))
	}
	msg := &wire.CacheWatch{TenantID: c.cfg.Tenant, Namespace: namespace, Cache: cache, Key: filter.Key,
		Prefix: filter.Prefix, FromOffset: o.from, Retained: o.retained, RequestID: c.newRequestID()}
	if filter.Prefix {
		msg.Shard = o.shard
	}
	cs, ok, err := request[*wire.CacheWatchOK](ctx, c, msg)
	if err != nil {
		return nil, err
	}
	w := c.newCacheWatch(ok, cs, o)
	if err := w.life.start(); err != nil {
		return nil, err
	}
	return w, nil
}

// CacheWatch is one live watch. Next is safe to call from one goroutine at
// a time; ResumeOffset, Resnapshot and Close from any.
type CacheWatch struct {
	life       streamLife[CacheWatchItem]
	resnapshot bool

	// resume is what ResumeOffset returns. Invariant: it only moves
	// forward, and only when Next returns a change or a StateComplete.
	resume atomic.Uint64
}

func (c *Client) newCacheWatch(ok *wire.CacheWatchOK, cs *ctrlStream, o watchOptions) *CacheWatch {
	w := &CacheWatch{resnapshot: ok.Resnapshot}
	w.life.init(c, ok.WatchID, cs)
	w.life.readFrame, w.life.eofReason = w.readFrame, "the broker ended the cache watch stream without a reason"
	w.resume.Store(ok.Offset)
	if o.from != nil {
		w.resume.Store(*o.from)
	}
	return w
}

// ID returns the watch id the broker assigned.
func (w *CacheWatch) ID() uint64 { return w.life.id }

// Resnapshot reports whether the broker could not serve the WatchFrom
// offset from its history and starts with current values instead: the
// caller must replace, not merge, what it held for the watched keys.
func (w *CacheWatch) Resnapshot() bool { return w.resnapshot }

// ResumeOffset is the offset to pass to WatchFrom to carry on after the
// last item Next returned: that change's offset + 1, the offset of a
// StateComplete item, or before any such item the WatchFrom offset or, for
// a fresh watch, the offset the next write to the cache took when the
// watch began. Retained items do not move it.
func (w *CacheWatch) ResumeOffset() uint64 { return w.resume.Load() }

// Next returns the next item. It is cancel-safe. When the watch ends it
// returns the items already read, then why: *CacheWatchLagged when
// the broker's queue overflowed, the *BrokerError of an error frame
// (revoked, cache deleted), ErrSubscriptionLost when the connection or
// the stream died, ErrClosed after Close.
func (w *CacheWatch) Next(ctx context.Context) (CacheWatchItem, error) {
	it, err := w.life.next(ctx)
	if err == nil {
		w.advance(&it)
	}
	return it, err
}

// advance moves the resume offset past an item Next returns.
func (w *CacheWatch) advance(it *CacheWatchItem) {
	switch {
	case it.StateComplete:
		w.resume.Store(it.Offset)
	case !it.Retained:
		w.resume.Store(it.Offset + 1)
	}
}

// Close ends the watch: its event stream is stopped, so the broker drops
// it. Next returns ErrClosed afterwards.
func (w *CacheWatch) Close() error { return w.life.close() }
