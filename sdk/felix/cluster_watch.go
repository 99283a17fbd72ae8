package felix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/felixmq/felix/wire"
)

// WatchCache watches a cache (see Client.WatchCache): a key on its key's
// owner, a prefix of a one-shard cache on that shard's owner, a prefix of
// a multi-shard cache with one watch per shard, each on its shard's owner
// and each resuming on its own, merged into one Next (items carry their
// Shard; see ClusterCacheWatch). A not_leader answer is followed to the
// broker it names. The ClusterCacheWatch it returns watches again by
// itself, on another broker if need be, when a watch is lost, lags or its
// shard moves.
func (cc *ClusterClient) WatchCache(ctx context.Context, namespace, cache string, filter CacheWatchFilter, opts ...WatchOption) (*ClusterCacheWatch, error) {
	if filter.Prefix {
		k := ownerKey{kind: KindCache, namespace: namespace, name: cache}
		if n := cc.shardCount(ctx, k); n > 1 {
			return cc.watchSharded(ctx, k, filter, n, opts)
		}
		w, err := cc.watchOne(ctx, route{k: k}, filter, opts)
		if n, ok := needsShards(err); ok && n > 1 {
			return cc.watchSharded(ctx, k, filter, n, opts)
		}
		return w, err
	}
	return cc.watchOne(ctx, cacheRoute(namespace, cache, filter.Key), filter, opts)
}

// reasonWatchNeedsShard is the refusal of a prefix watch naming no shard
// by a broker that does not own every shard of the cache.
const reasonWatchNeedsShard = "watch_needs_shard"

// needsShards reports a prefix watch refused with reason
// watch_needs_shard, and the shard count the refusal names.
func needsShards(err error) (uint32, bool) {
	var be *BrokerError
	if !errors.As(err, &be) || be.Code != wire.CodeInvalidRequest || be.Detail[wire.DetailReason] != reasonWatchNeedsShard {
		return 0, false
	}
	switch n := be.Detail[wire.DetailShards].(type) {
	case float64:
		if n >= 1 && n <= math.MaxUint32 && n == math.Trunc(n) {
			return uint32(n), true
		}
	case json.Number:
		if v, err := strconv.ParseUint(string(n), 10, 32); err == nil {
			return uint32(v), true
		}
	case uint32:
		return n, true
	}
	return 0, false
}

// shardCount returns the shard count of k the owner cache knows, or 0.
func (cc *ClusterClient) shardCount(ctx context.Context, k ownerKey) uint32 {
	if cc.owners == nil {
		return 0
	}
	return cc.owners.lookup(ctx, k).shards
}

// watchOne opens one watch on r's owner.
func (cc *ClusterClient) watchOne(ctx context.Context, r route, filter CacheWatchFilter, opts []WatchOption) (*ClusterCacheWatch, error) {
	ns, cache := r.k.namespace, r.k.name
	w, err := openRetried(ctx, cc, r, func(c *Client) (*CacheWatch, error) {
		return c.WatchCache(ctx, ns, cache, filter, opts...)
	})
	if err != nil {
		return nil, err
	}
	cw := newClusterCacheWatch(cc, w, ns, cache, filter, opts)
	cw.route = r
	cw.r.via = cw.via
	return cw, nil
}

// watchSharded opens one watch per shard of k and merges them.
func (cc *ClusterClient) watchSharded(ctx context.Context, k ownerKey, filter CacheWatchFilter, n uint32, opts []WatchOption) (*ClusterCacheWatch, error) {
	var o watchOptions
	for _, opt := range opts {
		opt(&o)
	}
	children := make([]*ClusterCacheWatch, 0, n)
	for shard := range n {
		own := append(slices.Clip(opts), WatchShard(shard))
		if from, ok := o.fromShards[shard]; ok {
			own = append(own, WatchFrom(from))
		}
		w, err := cc.watchOne(ctx, route{k: k, shard: shard}, filter, own)
		if err != nil {
			for _, c := range children {
				_ = c.Close()
			}
			return nil, fmt.Errorf("felix: watch shard %d: %w", shard, err)
		}
		children = append(children, w)
	}
	cw := &ClusterCacheWatch{namespace: k.namespace, cache: k.name, filter: filter, opts: slices.Clone(opts),
		merged: &merge[CacheWatchItem]{}}
	pos := map[uint32]uint64{}
	for shard, c := range children {
		cw.merged.children = append(cw.merged.children, c)
		pos[uint32(shard)] = c.ResumeOffset()
	}
	cw.merged.admit = func(shard uint32, it *CacheWatchItem) (uint64, bool) {
		it.Shard = shard
		return children[shard].ResumeOffset(), true
	}
	cw.merged.start(pos)
	return cw, nil
}

// ClusterCacheWatch is a cache watch opened through a ClusterClient. It
// survives what would end a plain CacheWatch: when the broker ends it with
// *CacheWatchLagged it watches again from the lag's ResumeFrom, and when
// its connection or stream is lost it watches again (on a fresh
// connection, possibly another seed) from the ResumeOffset of the watch
// that ended. A retained watch resumes the same way, with WatchFrom, once
// its current values are complete; one lost before its StateComplete
// item (or lost in the middle of a resnapshot's values) is watched again
// retained, so the values start over and end with a StateComplete item.
// Refusals that retrying cannot cure,
// and resumes that keep failing, are returned by Next, as a
// ClusterSubscription returns them.
//
// No change is delivered twice. A change can be missed only in the way a
// resnapshot says: a broker that no longer holds the history from the
// resume offset (it restarted, or its history moved on) starts the
// resumed watch with the current values, Retained items, and then a
// StateComplete item. Next passes them through unchanged, and the
// contract is: when a StateComplete item arrives, the Retained items
// delivered since the previous StateComplete item or change are the
// complete current state of the watched keys, and the caller replaces
// what it held for them (a key it held that is not among them is gone).
//
// Next is safe to call from one goroutine at a time; ResumeOffset,
// Resumes and Close from any.
type ClusterCacheWatch struct {
	r resumable[CacheWatchItem, *CacheWatch]

	namespace, cache string
	filter           CacheWatchFilter
	opts             []WatchOption // of the first watch

	// stateDue is set while current values are being delivered and their
	// StateComplete item has not come: a resume then watches retained.
	// Owned by the goroutine calling Next.
	stateDue bool

	// resume is what ResumeOffset returns: the first watch's
	// ResumeOffset, then moved as CacheWatch moves it by every item Next
	// returns, and forward to where a resume watches from.
	resume atomic.Uint64

	route route  // where the watch belongs: its key's or shard's owner
	hint  string // the new owner a shard_moved named, for the next resume

	// merged, on a prefix watch of a multi-shard cache, is the merge of
	// one ClusterCacheWatch per shard; r is then unused.
	merged *merge[CacheWatchItem]
}

func newClusterCacheWatch(cc *ClusterClient, w *CacheWatch, namespace, cache string, filter CacheWatchFilter, opts []WatchOption) *ClusterCacheWatch {
	cw := &ClusterCacheWatch{namespace: namespace, cache: cache, filter: filter, opts: slices.Clone(opts)}
	var o watchOptions
	for _, opt := range opts {
		opt(&o)
	}
	cw.stateDue = o.retained || w.Resnapshot()
	cw.resume.Store(w.ResumeOffset())
	cw.r.init(cc, w)
	cw.r.what, cw.r.metric = "cache watch", cacheWatchResumes
	cw.r.open, cw.r.point, cw.r.admit, cw.r.resumed = cw.watchAt, cw.resumePoint, cw.admit, cw.resumedAt
	return cw
}

// ResumeOffset is the offset to pass to WatchFrom to carry on after the
// last item Next returned, as CacheWatch.ResumeOffset. A watch of several
// shards has one per shard: it returns 0, and ResumeOffsets tells them.
func (cw *ClusterCacheWatch) ResumeOffset() uint64 {
	if cw.merged != nil {
		return 0
	}
	return cw.resume.Load()
}

// ResumeOffsets is ResumeOffset per shard: pass it to WatchFromShards to
// carry on a watch of several shards. A one-shard watch reports its shard.
func (cw *ClusterCacheWatch) ResumeOffsets() map[uint32]uint64 {
	if cw.merged != nil {
		return cw.merged.positions()
	}
	return map[uint32]uint64{cw.route.shard: cw.resume.Load()}
}

// Shards returns how many shards the watch reads: one per merged watch.
func (cw *ClusterCacheWatch) Shards() int {
	if cw.merged != nil {
		return len(cw.merged.children)
	}
	return 1
}

// Resumes returns how many times the watch (every shard's, when merged)
// watched again.
func (cw *ClusterCacheWatch) Resumes() int {
	if cw.merged != nil {
		return cw.merged.resumes()
	}
	return int(cw.r.resumes.Load())
}

// via opens the watch again on its owner: the one a shard_moved named,
// else the one the client knows.
func (cw *ClusterCacheWatch) via(ctx context.Context, open func(*Client) (*CacheWatch, error)) (*CacheWatch, error) {
	hint := cw.hint
	cw.hint = ""
	return openRouted(ctx, cw.r.cc, cw.route, hint, open)
}

// Next returns the next item, watching again when the watch ends for a
// reason a resume cures (see the type's doc). It is cancel-safe like
// CacheWatch.Next; a ctx that ends during a resume returns ctx's error,
// and the next call resumes again. After Close it returns ErrClosed.
//
// A watch of several shards returns each shard's items in that shard's
// order, with their Shard set; each shard delivers its own current values
// and StateComplete item. When one shard's watch resumes or ends for
// good, Next returns a *ShardNotice as its error (the other shards carry
// on; call Next again), and ErrSubscriptionLost once every shard ended.
func (cw *ClusterCacheWatch) Next(ctx context.Context) (CacheWatchItem, error) {
	if cw.merged != nil {
		return cw.merged.next(ctx, func(it CacheWatchItem) uint32 { return it.Shard })
	}
	return cw.r.next(ctx)
}

// admit moves the resume offset past an item, and drops a change below it:
// one delivered before a resume.
func (cw *ClusterCacheWatch) admit(it CacheWatchItem) (deliver, progress bool) {
	switch {
	case it.StateComplete:
		cw.stateDue = false
		cw.resume.Store(it.Offset)
	case it.Retained:
		cw.stateDue = true
		return true, false
	case it.Offset < cw.resume.Load():
		return false, false
	default:
		cw.resume.Store(it.Offset + 1)
	}
	return true, true
}

// resumePoint says where to watch again after w ended with err: the lag's
// ResumeFrom, or w's ResumeOffset when the watch was lost.
func (cw *ClusterCacheWatch) resumePoint(w *CacheWatch, err error) (uint64, bool) {
	if moved, ok := errors.AsType[*ShardMovedError](err); ok {
		cw.hint = moved.Addr
		if oc := cw.r.cc.owners; oc != nil {
			oc.drop(cw.route.k, cw.route.shard)
		}
		if moved.ResumeFrom != nil {
			return max(w.ResumeOffset(), *moved.ResumeFrom), true
		}
		return w.ResumeOffset(), true
	}
	if lagged, ok := errors.AsType[*CacheWatchLagged](err); ok {
		return lagged.ResumeFrom, true
	}
	if errors.Is(err, ErrSubscriptionLost) || errors.Is(err, ErrConnectionLost) {
		return w.ResumeOffset(), true
	}
	return 0, false
}

// watchAt watches again from from on c with the first watch's options:
// retained (from all current values) while a StateComplete item is due,
// else from from.
func (cw *ClusterCacheWatch) watchAt(ctx context.Context, c *Client, from uint64) (*CacheWatch, error) {
	again := func(o *watchOptions) { o.retained, o.from = false, &from }
	if cw.stateDue {
		again = func(o *watchOptions) { o.retained, o.from = true, nil }
	}
	w, err := c.WatchCache(ctx, cw.namespace, cw.cache, cw.filter, append(slices.Clip(cw.opts), again)...)
	if err == nil && w.Resnapshot() {
		cw.stateDue = true
	}
	return w, err
}

// resumedAt moves the resume offset forward to where the new watch starts.
func (cw *ClusterCacheWatch) resumedAt(from uint64) {
	if from > cw.resume.Load() {
		cw.resume.Store(from)
	}
}

// Close ends the watch; Next returns ErrClosed afterwards.
func (cw *ClusterCacheWatch) Close() error {
	if cw.merged != nil {
		return cw.merged.close()
	}
	return cw.r.close()
}

func (cw *ClusterCacheWatch) notifyResumes(f func(from uint64, cause error)) { cw.r.notify = f }
