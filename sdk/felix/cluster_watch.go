package felix

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
)

// WatchCache watches a cache over the current connection, replacing a dead
// one first (see Client.WatchCache). The ClusterCacheWatch it returns
// watches again by itself, on another seed if need be, when the watch is
// lost or lags (see ClusterCacheWatch).
func (cc *ClusterClient) WatchCache(ctx context.Context, namespace, cache string, filter CacheWatchFilter, opts ...WatchOption) (*ClusterCacheWatch, error) {
	var w *CacheWatch
	err := cc.do(ctx, always, func(c *Client) error {
		var werr error
		w, werr = c.WatchCache(ctx, namespace, cache, filter, opts...)
		return werr
	})
	if err != nil {
		return nil, err
	}
	return newClusterCacheWatch(cc, w, namespace, cache, filter, opts), nil
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
// last item Next returned, as CacheWatch.ResumeOffset.
func (cw *ClusterCacheWatch) ResumeOffset() uint64 { return cw.resume.Load() }

// Resumes returns how many times the watch watched again.
func (cw *ClusterCacheWatch) Resumes() int { return int(cw.r.resumes.Load()) }

// Next returns the next item, watching again when the watch ends for a
// reason a resume cures (see the type's doc). It is cancel-safe like
// CacheWatch.Next; a ctx that ends during a resume returns ctx's error,
// and the next call resumes again. After Close it returns ErrClosed.
func (cw *ClusterCacheWatch) Next(ctx context.Context) (CacheWatchItem, error) { return cw.r.next(ctx) }

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
func (cw *ClusterCacheWatch) Close() error { return cw.r.close() }
