package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/felixmq/felix/sdk/felix"
)

const (
	watchFanoutKey  = "k"     // the one key every watcher watches and the writer puts
	maxWatchUpdates = 1 << 20 // updates one run tracks; the writer stops there
)

type watchFanoutParams struct {
	watchers    int
	connections int
	rate        int // updates per second
	duration    time.Duration
}

// updateSeen tracks one update: how many watchers saw it and when the
// last of them did. Written by every watcher's reader, read at the end.
type updateSeen struct {
	watchers atomic.Int32
	lastNano atomic.Int64 // the latest arrival, Unix ns
	sentNano atomic.Int64 // the update's intended send time, Unix ns
}

// seenBy records one arrival at time now.
func (u *updateSeen) seenBy(now int64) {
	u.watchers.Add(1)
	for {
		last := u.lastNano.Load()
		if now <= last || u.lastNano.CompareAndSwap(last, now) {
			return
		}
	}
}

// watchFanoutRig is one cache, its watchers and a writer.
type watchFanoutRig struct {
	t     *target
	p     watchFanoutParams
	cache string
	receivers
	writer  *felix.Client
	updates []updateSeen // by sequence number; bounded by rate × duration
}

// newWatchFanoutRig creates the cache, connects, opens every watch (each
// connection's share concurrently) and starts one reader per watch.
func newWatchFanoutRig(ctx context.Context, t *target, p watchFanoutParams) (*watchFanoutRig, error) {
	if p.connections <= 0 {
		p.connections = min(p.watchers, 100)
	}
	p.connections = min(p.connections, p.watchers)
	g := &watchFanoutRig{t: t, p: p, updates: make([]updateSeen, min(p.rate*int(p.duration/time.Second+1)+1, maxWatchUpdates))}
	var err error
	if g.cache, err = t.admin.createCache(ctx, t.ns, "bench-watch"); err != nil {
		return nil, err
	}
	recvCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	g.stopRecv = stop
	if err := g.connect(ctx, t, p.connections); err != nil {
		g.close()
		return nil, err
	}
	if g.writer, err = t.connect(ctx); err != nil {
		g.close()
		return nil, err
	}
	// A first put makes the cache known to the broker before anyone watches.
	if err := whenReady(ctx, func() error { return g.writer.CachePut(ctx, t.ns, g.cache, "warm", nil, 0) }); err != nil {
		g.close()
		return nil, err
	}
	if err := g.openWatches(ctx, recvCtx); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

// openWatches opens the watchers, connection i taking watchers i, i+C, ...
func (g *watchFanoutRig) openWatches(ctx, recvCtx context.Context) error {
	eg, ectx := errgroup.WithContext(ctx)
	for ci, c := range g.clients {
		eg.Go(func() error {
			for i := ci; i < g.p.watchers; i += len(g.clients) {
				var w *felix.CacheWatch
				err := whenReady(ectx, func() (err error) {
					w, err = c.WatchCache(ectx, g.t.ns, g.cache, felix.WatchKey(watchFanoutKey))
					return err
				})
				if err != nil {
					return fmt.Errorf("watcher %d: %w", i, err)
				}
				g.wg.Add(1)
				go g.read(recvCtx, w)
			}
			return nil
		})
	}
	return eg.Wait()
}

// read counts every put the watch delivers against its update.
func (g *watchFanoutRig) read(ctx context.Context, w *felix.CacheWatch) {
	defer g.wg.Done()
	defer w.Close()
	for {
		it, err := w.Next(ctx)
		if err != nil {
			g.readEnded(ctx)
			return
		}
		now := time.Now().UnixNano()
		if it.Op != "put" || len(it.Value) < 16 {
			continue
		}
		seq := binary.BigEndian.Uint64(it.Value)
		if seq < uint64(len(g.updates)) {
			g.updates[seq].seenBy(now)
			g.deliveries.Add(1)
		}
	}
}

// close stops the readers, closes every connection and deletes the cache.
func (g *watchFanoutRig) close() {
	g.receivers.close(g.writer)
	g.t.admin.deleteCache(context.Background(), g.t.ns, g.cache)
}

// write puts the key at the fixed rate for d, each value carrying its
// sequence number and intended send time, and returns how many updates it
// made and how far it fell behind its schedule.
func (g *watchFanoutRig) write(ctx context.Context, d time.Duration) (sent int, lagMax time.Duration) {
	return paced(ctx, g.p.rate, d, len(g.updates), func(seq int, due time.Time) {
		var v [16]byte
		binary.BigEndian.PutUint64(v[:8], uint64(seq))
		binary.BigEndian.PutUint64(v[8:], uint64(due.UnixNano()))
		g.updates[seq].sentNano.Store(due.UnixNano())
		if err := g.writer.CachePut(ctx, g.t.ns, g.cache, watchFanoutKey, v[:], 0); err != nil {
			g.errs.Add(1)
		}
	})
}

// allSeen returns, over the first sent updates, the time from each
// update's intended send until the last watcher saw it (only updates every
// watcher saw) and how many updates some watcher never saw.
func (g *watchFanoutRig) allSeen(sent int) (lat *latencies, maxLat time.Duration, skipped int) {
	lat = newLatencies(100000)
	for i := range sent {
		u := &g.updates[i]
		if int(u.watchers.Load()) < g.p.watchers {
			skipped++
			continue
		}
		d := time.Duration(u.lastNano.Load() - u.sentNano.Load())
		lat.add(d)
		maxLat = max(maxLat, d)
	}
	return lat, maxLat, skipped
}

// runWatchFanout has one writer put one key at a fixed rate while W
// watchers of that key, over C connections, record when they see each
// update. Latency runs from each update's intended send time (no
// coordinated omission) to the moment the last watcher saw it.
func runWatchFanout(ctx context.Context, t *target, p watchFanoutParams) (*result, error) {
	g, err := newWatchFanoutRig(ctx, t, p)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	sent, lagMax := g.write(ctx, p.duration)
	g.settle(ctx, 0, int64(sent)*int64(p.watchers)) // every watcher saw every update
	elapsed := time.Since(start)
	g.close()
	lat, maxLat, skipped := g.allSeen(sent)
	r := &result{Scenario: "watch-fanout", Params: map[string]any{
		"watchers": p.watchers, "connections": g.p.connections, "rate": p.rate, "duration": p.duration.String(),
	}}
	r.add("updates", float64(sent), "updates")
	r.add("all_seen_p50", ms(lat.quantile(0.50)), "ms")
	r.add("all_seen_p99", ms(lat.quantile(0.99)), "ms")
	r.add("all_seen_max", ms(maxLat), "ms")
	r.add("deliveries_per_s", float64(g.deliveries.Load())/elapsed.Seconds(), "deliveries/s")
	r.add("deliveries", float64(g.deliveries.Load()), "deliveries")
	r.add("skipped", float64(skipped), "updates")
	r.add("errors", float64(g.errs.Load()), "errors")
	r.add("writer_lag_max", ms(lagMax), "ms")
	return r, nil
}
