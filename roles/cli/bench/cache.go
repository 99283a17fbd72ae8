package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// cacheParams are `felix bench cache`'s settings.
type cacheParams struct {
	mode     string // mix (the default), put, latency or cas
	inflight int    // mix and put: callers, each with one request outstanding
	callers  int    // cas: callers updating the one key
	value    int    // value size in bytes
	keys     int    // mix, put and latency: distinct keys
	duration time.Duration
}

// Cache scenario modes.
const (
	cacheModeMix     = "mix"
	cacheModePut     = "put"
	cacheModeLatency = "latency"
	cacheModeCAS     = "cas"
)

// runCacheMode runs the cache scenario p.mode names.
func runCacheMode(ctx context.Context, t *target, p cacheParams) (*result, error) {
	var run func(context.Context, *target, *felix.Client, string, cacheParams) (*result, error)
	switch p.mode {
	case "", cacheModeMix:
		p.mode, run = cacheModeMix, runCacheMix
	case cacheModePut:
		run = runCachePuts
	case cacheModeLatency:
		run = runCacheLatency
	case cacheModeCAS:
		p.value = max(p.value, casCounterBytes)
		run = runCacheCAS
	default:
		return nil, fmt.Errorf("unknown --mode %q: want mix, put, latency or cas", p.mode)
	}
	cache, err := t.admin.createCache(ctx, t.ns, "bench-cache")
	if err != nil {
		return nil, err
	}
	defer t.admin.deleteCache(context.Background(), t.ns, cache)
	c, err := t.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// The cache reaches the broker on its next catalog sync.
	if err := whenReady(ctx, func() error { return c.CachePut(ctx, t.ns, cache, "warm", make([]byte, p.value), 0) }); err != nil {
		return nil, err
	}
	r, err := run(ctx, t, c, cache, p)
	if err != nil {
		return nil, err
	}
	r.Scenario = "cache"
	r.Params["mode"] = p.mode
	r.Params["value_bytes"] = p.value
	r.Params["duration"] = p.duration.String()
	return r, nil
}

// runCacheMix keeps p.inflight get/put requests going, half of each, on
// random keys of p.keys.
func runCacheMix(ctx context.Context, t *target, c *felix.Client, cache string, p cacheParams) (*result, error) {
	val := make([]byte, p.value)
	gets, puts := t.progress.counter("gets"), t.progress.counter("puts")
	var errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(p.duration)
	for w := 0; w < p.inflight; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, seed*7+1))
			for time.Now().Before(stop) && ctx.Err() == nil {
				key := fmt.Sprintf("k%d", rng.IntN(p.keys))
				if rng.IntN(2) == 0 {
					if err := c.CachePut(ctx, t.ns, cache, key, val, time.Minute); err != nil {
						errs.Add(1)
					}
					puts.Add(1)
				} else {
					if _, _, err := c.CacheGet(ctx, t.ns, cache, key); err != nil {
						errs.Add(1)
					}
					gets.Add(1)
				}
			}
		}(uint64(w + 1))
	}
	wg.Wait()
	secs := time.Since(start).Seconds() // measured, not planned: the last requests end after d
	r := &result{Params: map[string]any{"inflight": p.inflight, "keys": p.keys}}
	r.add("measured_s", secs, "s")
	r.add("ops_per_s", float64(gets.Load()+puts.Load())/secs, "ops/s")
	r.add("gets_per_s", float64(gets.Load())/secs, "ops/s")
	r.add("puts_per_s", float64(puts.Load())/secs, "ops/s")
	r.add("errors", float64(errs.Load()), "errors")
	return r, nil
}

// runCachePuts keeps p.inflight acknowledged puts going (each caller waits
// for its put's answer before the next) on random keys of p.keys, without
// a TTL. Only acknowledged puts count.
func runCachePuts(ctx context.Context, t *target, c *felix.Client, cache string, p cacheParams) (*result, error) {
	val := make([]byte, p.value)
	puts := t.progress.counter("puts")
	var errs atomic.Int64
	lats := make([]*latencies, p.inflight)
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(p.duration)
	for w := range p.inflight {
		lat := newLatencies(max(100, 100000/p.inflight))
		lats[w] = lat
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, seed*7+1))
			for time.Now().Before(stop) && ctx.Err() == nil {
				key := fmt.Sprintf("k%d", rng.IntN(p.keys))
				t0 := time.Now()
				if err := c.CachePut(ctx, t.ns, cache, key, val, 0); err != nil {
					errs.Add(1)
					continue
				}
				lat.add(time.Since(t0))
				puts.Add(1)
			}
		}(uint64(w + 1))
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	all := newLatencies(100000)
	for _, l := range lats {
		all.merge(l)
	}
	n := float64(puts.Load())
	r := &result{Params: map[string]any{"inflight": p.inflight, "keys": p.keys}}
	r.add("measured_s", secs, "s")
	r.add("puts", n, "puts")
	r.add("puts_per_s", n/secs, "puts/s")
	r.add("put_mb_per_s", n*float64(p.value)/secs/1e6, "MB/s")
	r.add("errors", float64(errs.Load()), "errors")
	r.addLatency("put", all)
	return r, nil
}

// runCacheLatency sends one acknowledged put at a time, the keys taken in
// turn; the first failure ends the run.
func runCacheLatency(ctx context.Context, t *target, c *felix.Client, cache string, p cacheParams) (*result, error) {
	val := make([]byte, p.value)
	puts := t.progress.counter("puts")
	lat := newLatencies(100000)
	start := time.Now()
	for n := 0; time.Since(start) < p.duration && ctx.Err() == nil; n++ {
		t0 := time.Now()
		if err := c.CachePut(ctx, t.ns, cache, fmt.Sprintf("k%d", n%p.keys), val, 0); err != nil {
			return nil, err
		}
		lat.add(time.Since(t0))
		puts.Add(1)
	}
	secs := time.Since(start).Seconds()
	r := &result{Params: map[string]any{"keys": p.keys}}
	r.add("measured_s", secs, "s")
	r.add("puts", float64(puts.Load()), "puts")
	r.add("puts_per_s", float64(puts.Load())/secs, "puts/s")
	r.addLatency("put", lat)
	return r, nil
}
