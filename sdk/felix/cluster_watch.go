package felix

import "context"

// WatchCache watches a cache over the current connection, replacing a dead
// one first (see Client.WatchCache). The watch does not move to another
// seed by itself: when it ends with ErrSubscriptionLost, watch again with
// WatchFrom(w.ResumeOffset()), which misses nothing (an offset the new
// broker's history does not hold is answered with a resnapshot).
func (cc *ClusterClient) WatchCache(ctx context.Context, namespace, cache string, filter CacheWatchFilter, opts ...WatchOption) (w *CacheWatch, err error) {
	err = cc.do(ctx, always, func(c *Client) error {
		var werr error
		w, werr = c.WatchCache(ctx, namespace, cache, filter, opts...)
		return werr
	})
	return w, err
}
