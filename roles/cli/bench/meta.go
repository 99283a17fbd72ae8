package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// runMeta creates uniquely named streams through the control plane with
// concurrency callers for d, then deletes every stream it created.
func runMeta(ctx context.Context, t *target, concurrency int, d time.Duration) (*result, error) {
	concurrency = max(1, concurrency)
	prefix := uniqueName("bench-meta")
	var created []string
	var mu sync.Mutex
	var errs atomic.Int64
	var firstErr atomic.Value
	lats := make([]*latencies, concurrency)
	var seq atomic.Int64
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range concurrency {
		lats[w] = newLatencies(100000)
		wg.Add(1)
		go func(lat *latencies) {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				name := fmt.Sprintf("%s-%d", prefix, seq.Add(1))
				t0 := time.Now()
				if err := t.admin.createNamedStream(ctx, t.ns, name, streamSpec{shards: 1}); err != nil {
					if errs.Add(1) == 1 {
						firstErr.Store(err)
					}
					continue
				}
				lat.add(time.Since(t0))
				mu.Lock()
				created = append(created, name)
				mu.Unlock()
			}
		}(lats[w])
	}
	wg.Wait()
	elapsed := time.Since(start)
	deleteAll(t, created, concurrency)
	if len(created) == 0 {
		if err, ok := firstErr.Load().(error); ok {
			return nil, err
		}
		return nil, ctx.Err()
	}
	all := newLatencies(200000)
	for _, l := range lats {
		all.merge(l)
	}
	r := &result{Scenario: "meta", Params: map[string]any{"concurrency": concurrency, "duration": d.String()}}
	r.add("creates_per_s", float64(len(created))/elapsed.Seconds(), "creates/s")
	r.add("created", float64(len(created)), "streams")
	r.add("errors", float64(errs.Load()), "calls")
	r.addLatency("create", all)
	return r, nil
}

// deleteAll removes the named streams with a few callers; failures are left
// for the operator (names carry the run's unique prefix).
func deleteAll(t *target, names []string, callers int) {
	work := make(chan string)
	var wg sync.WaitGroup
	for range max(1, min(callers, 8)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				t.admin.deleteStream(context.Background(), t.ns, n)
			}
		}()
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
}
