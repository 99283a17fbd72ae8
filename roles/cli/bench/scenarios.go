package bench

import (
	"context"
	"encoding/binary"
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
	cfg   felix.Config
	ns    string
	admin *adminAPI
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
	duration time.Duration
	policy   string
}

// runPubSub publishes for p.duration from one client to one subscriber on
// another connection, then waits for delivery to settle.
func runPubSub(ctx context.Context, t *target, p pubsubParams) (*result, error) {
	stream, err := t.admin.createStream(ctx, t.ns, "bench-pubsub", p.policy, 1)
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

	var delivered, deliveredBytes atomic.Int64
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
			delivered.Add(1)
			deliveredBytes.Add(int64(len(ev.Payload)))
		}
	}()

	ack := felix.AckNone
	if p.acked {
		ack = felix.AckPerBatch
	}
	payloads := make([][]byte, p.batch)
	for i := range payloads {
		payloads[i] = make([]byte, p.payload)
	}
	var published int64
	var pubErrs int64
	start := time.Now()
	for time.Since(start) < p.duration && ctx.Err() == nil {
		// The SDK may keep the slices until they are written: give it
		// fresh headers over the same bytes.
		batch := append([][]byte(nil), payloads...)
		if err := pubC.PublishBatch(ctx, t.ns, stream, batch, ack); err != nil {
			pubErrs++
			continue
		}
		published += int64(p.batch)
	}
	if err := pubC.Finish(ctx); err != nil {
		return nil, fmt.Errorf("finish: %w", err)
	}
	pubElapsed := time.Since(start)
	// Wait until delivery stops moving or everything arrived.
	last, idleSince := delivered.Load(), time.Now()
	for delivered.Load() < published && time.Since(idleSince) < 2*time.Second && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		if d := delivered.Load(); d != last {
			last, idleSince = d, time.Now()
		}
	}
	elapsed := time.Since(start)
	stopRecv()
	<-recvDone

	r := &result{Scenario: "pubsub", Params: map[string]any{
		"payload_bytes": p.payload, "batch": p.batch, "acked": p.acked, "duration": p.duration.String(), "policy": p.policy,
	}}
	mb := func(n int64, d time.Duration) float64 { return float64(n) / d.Seconds() / 1e6 }
	r.add("published_msgs_per_s", float64(published)/pubElapsed.Seconds(), "msg/s")
	r.add("published_mb_per_s", mb(published*int64(p.payload), pubElapsed), "MB/s")
	r.add("delivered_msgs_per_s", float64(delivered.Load())/elapsed.Seconds(), "msg/s")
	r.add("delivered_mb_per_s", mb(deliveredBytes.Load(), elapsed), "MB/s")
	r.add("published", float64(published), "msgs")
	r.add("delivered", float64(delivered.Load()), "msgs")
	r.add("lost", float64(published-delivered.Load()), "msgs")
	r.add("publish_errors", float64(pubErrs), "calls")
	return r, nil
}

type fanoutParams struct {
	subscribers int
	connections int
	rate        int // messages per second
	payload     int
	duration    time.Duration
	policy      string
}

// runFanout publishes at a fixed rate to many subscribers and measures
// publish-to-delivery latency from each message's intended send time, so a
// stalled sender cannot hide its own delay (no coordinated omission).
func runFanout(ctx context.Context, t *target, p fanoutParams) (*result, error) {
	if p.connections <= 0 || p.connections > p.subscribers {
		p.connections = p.subscribers
	}
	if p.payload < 16 {
		p.payload = 16
	}
	stream, err := t.admin.createStream(ctx, t.ns, "bench-fanout", p.policy, 1)
	if err != nil {
		return nil, err
	}
	defer t.admin.deleteStream(context.Background(), t.ns, stream)
	clients := make([]*felix.Client, p.connections)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range clients {
		if clients[i], err = t.connect(ctx); err != nil {
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
	}
	subs := make([]*felix.Subscription, p.subscribers)
	for i := range subs {
		if subs[i], err = subscribeWhenReady(ctx, clients[i%len(clients)], t.ns, stream); err != nil {
			return nil, fmt.Errorf("subscriber %d: %w", i, err)
		}
	}
	recvCtx, stopRecv := context.WithCancel(ctx)
	defer stopRecv()
	var wg sync.WaitGroup
	var deliveries, errs atomic.Int64
	lats := make([]*latencies, len(subs))
	for i, sub := range subs {
		lats[i] = newLatencies(20000)
		wg.Add(1)
		go func(sub *felix.Subscription, lat *latencies) {
			defer wg.Done()
			defer sub.Close()
			for {
				ev, err := sub.Next(recvCtx)
				if err != nil {
					if recvCtx.Err() == nil {
						errs.Add(1)
					}
					return
				}
				if len(ev.Payload) >= 8 {
					sent := int64(binary.BigEndian.Uint64(ev.Payload))
					lat.add(time.Duration(time.Now().UnixNano() - sent))
				}
				deliveries.Add(1)
			}
		}(sub, lats[i])
	}

	pubC, err := t.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer pubC.Close()
	interval := time.Second / time.Duration(p.rate)
	start := time.Now()
	var sent int64
	payload := make([]byte, p.payload)
	for ctx.Err() == nil {
		due := start.Add(time.Duration(sent) * interval)
		if due.Sub(start) >= p.duration {
			break
		}
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		}
		msg := append([]byte(nil), payload...)
		binary.BigEndian.PutUint64(msg, uint64(due.UnixNano()))
		if err := pubC.Publish(ctx, t.ns, stream, msg, felix.AckNone); err != nil {
			errs.Add(1)
		}
		sent++
	}
	pubC.Finish(ctx)
	want := sent * int64(p.subscribers)
	last, idleSince := deliveries.Load(), time.Now()
	for deliveries.Load() < want && time.Since(idleSince) < 2*time.Second && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		if d := deliveries.Load(); d != last {
			last, idleSince = d, time.Now()
		}
	}
	elapsed := time.Since(start)
	stopRecv()
	wg.Wait()
	all := newLatencies(200000)
	for _, l := range lats {
		all.merge(l)
	}
	r := &result{Scenario: "fanout", Params: map[string]any{
		"subscribers": p.subscribers, "connections": p.connections, "rate": p.rate,
		"payload_bytes": p.payload, "duration": p.duration.String(), "policy": p.policy,
	}}
	r.add("deliveries_per_s", float64(deliveries.Load())/elapsed.Seconds(), "deliveries/s")
	r.add("published", float64(sent), "msgs")
	r.add("delivered", float64(deliveries.Load()), "deliveries")
	r.add("lost", float64(want-deliveries.Load()), "deliveries")
	r.add("errors", float64(errs.Load()), "errors")
	r.addLatency("publish_to_delivery", all)
	return r, nil
}

// runLatency sends one acknowledged publish at a time.
func runLatency(ctx context.Context, t *target, payload int, count int, d time.Duration) (*result, error) {
	stream, err := t.admin.createStream(ctx, t.ns, "bench-latency", "", 1)
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
	r := &result{Scenario: "latency", Params: map[string]any{"payload_bytes": payload, "count": n}}
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
	var gets, puts, errs atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
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
	r := &result{Scenario: "cache", Params: map[string]any{"inflight": inflight, "value_bytes": value, "keys": keys, "duration": d.String()}}
	r.add("ops_per_s", float64(gets.Load()+puts.Load())/d.Seconds(), "ops/s")
	r.add("gets_per_s", float64(gets.Load())/d.Seconds(), "ops/s")
	r.add("puts_per_s", float64(puts.Load())/d.Seconds(), "ops/s")
	r.add("errors", float64(errs.Load()), "errors")
	return r, nil
}
