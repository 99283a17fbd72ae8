package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// target is a running broker and the means to create streams on it.
type target struct {
	cfg      felix.Config
	ns       string
	admin    *adminAPI
	progress *progress // the live line; nil draws nothing
}

func (t *target) connect(ctx context.Context) (*felix.Client, error) {
	return felix.Connect(ctx, t.cfg)
}

// whenReady retries f while the broker answers not_found: a stream or cache
// created a moment ago reaches the broker on its next catalog sync.
func whenReady(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := f()
		var be *felix.BrokerError
		if err == nil || !errors.As(err, &be) || be.Code != wire.CodeNotFound || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func subscribeWhenReady(ctx context.Context, c *felix.Client, ns, stream string) (sub *felix.Subscription, err error) {
	err = whenReady(ctx, func() error {
		sub, err = c.Subscribe(ctx, ns, stream)
		return err
	})
	return sub, err
}

type pubsubParams struct {
	payload  int
	batch    int
	acked    bool
	inflight int // acked batches in flight; 1 waits for each before the next
	durable  bool
	duration time.Duration
	policy   string
}

// runPubSub publishes for p.duration from one client to one subscriber on
// another connection, then waits for delivery to settle.
func runPubSub(ctx context.Context, t *target, p pubsubParams) (*result, error) {
	stream, err := t.admin.createStream(ctx, t.ns, "bench-pubsub", streamSpec{policy: p.policy, shards: 1, durable: p.durable})
	if err != nil {
		return nil, err
	}
	defer t.admin.deleteStream(context.Background(), t.ns, stream)
	subC, err := t.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer subC.Close()
	pubC, err := t.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer pubC.Close()
	sub, err := subscribeWhenReady(ctx, subC, t.ns, stream)
	if err != nil {
		return nil, err
	}
	defer sub.Close()

	published, delivered := t.progress.counter("published"), t.progress.counter("delivered")
	var deliveredBytes, lastDelivery atomic.Int64 // lastDelivery: UnixNano of the latest
	recvCtx, stopRecv := context.WithCancel(ctx)
	defer stopRecv()
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			ev, err := sub.Next(recvCtx)
			if err != nil {
				return
			}
			deliveredBytes.Add(int64(len(ev.Payload)))
			lastDelivery.Store(time.Now().UnixNano())
			delivered.Add(1)
		}
	}()

	start := time.Now()
	_, pubErrs := publishFor(ctx, pubC, t.ns, stream, p, published)
	if err := pubC.Finish(ctx); err != nil {
		return nil, fmt.Errorf("finish: %w", err)
	}
	pubEnd := time.Now()
	// Wait until delivery stops moving or everything arrived.
	last, idleSince := delivered.Load(), time.Now()
	for delivered.Load() < published.Load() && time.Since(idleSince) < 2*time.Second && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		if d := delivered.Load(); d != last {
			last, idleSince = d, time.Now()
		}
	}
	stopRecv()
	<-recvDone
	m := pubsubMeasure{start: start, pubEnd: pubEnd, lastDelivery: time.Unix(0, lastDelivery.Load()),
		published: published.Load(), delivered: delivered.Load(), deliveredBytes: deliveredBytes.Load(),
		payload: p.payload, publishErrors: pubErrs}

	r := &result{Scenario: "pubsub", Params: map[string]any{
		"payload_bytes": p.payload, "batch": p.batch, "acked": p.acked, "inflight": p.inflight,
		"durable": p.durable, "duration": p.duration.String(), "policy": p.policy,
	}}
	m.addTo(r)
	return r, nil
}

// runLatency sends one acknowledged publish at a time.
func runLatency(ctx context.Context, t *target, payload int, count int, d time.Duration, durable bool) (*result, error) {
	stream, err := t.admin.createStream(ctx, t.ns, "bench-latency", streamSpec{shards: 1, durable: durable})
	if err != nil {
		return nil, err
	}
	defer t.admin.deleteStream(context.Background(), t.ns, stream)
	c, err := t.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	msg := make([]byte, payload)
	if err := whenReady(ctx, func() error { return c.Publish(ctx, t.ns, stream, msg, felix.AckPerMessage) }); err != nil {
		return nil, err
	}
	lat := newLatencies(100000)
	start := time.Now()
	n := 0
	for n < count && time.Since(start) < d && ctx.Err() == nil {
		t0 := time.Now()
		if err := c.Publish(ctx, t.ns, stream, msg, felix.AckPerMessage); err != nil {
			return nil, err
		}
		lat.add(time.Since(t0))
		n++
	}
	r := &result{Scenario: "latency", Params: map[string]any{"payload_bytes": payload, "count": n, "durable": durable}}
	r.addLatency("acked_publish", lat)
	r.add("publishes_per_s", float64(n)/time.Since(start).Seconds(), "msg/s")
	return r, nil
}

// runCache keeps inflight get/put requests going against one cache.
func runCache(ctx context.Context, t *target, inflight, value, keys int, d time.Duration) (*result, error) {
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
	val := make([]byte, value)
	if err := whenReady(ctx, func() error { return c.CachePut(ctx, t.ns, cache, "warm", val, 0) }); err != nil {
		return nil, err
	}
	gets, puts := t.progress.counter("gets"), t.progress.counter("puts")
	var errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for w := 0; w < inflight; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, seed*7+1))
			for time.Now().Before(stop) && ctx.Err() == nil {
				key := fmt.Sprintf("k%d", rng.IntN(keys))
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
	r := &result{Scenario: "cache", Params: map[string]any{"inflight": inflight, "value_bytes": value, "keys": keys, "duration": d.String()}}
	r.add("measured_s", secs, "s")
	r.add("ops_per_s", float64(gets.Load()+puts.Load())/secs, "ops/s")
	r.add("gets_per_s", float64(gets.Load())/secs, "ops/s")
	r.add("puts_per_s", float64(puts.Load())/secs, "ops/s")
	r.add("errors", float64(errs.Load()), "errors")
	return r, nil
}
