package bench

import (
	"context"
	"errors"
	"fmt"
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
	// brokers are every broker the settings name (a cluster's client.json
	// names several), cfg.Addr first.
	brokers []string
	routing routing // how pubsub, durable and latency publish; zero: one shard, one broker
	// repl is the copies and ack consistency of the bench stream durable
	// creates; zero: the control plane's defaults.
	repl replication
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
	// idempotent publishes through idempotent producers (acked, as many
	// producers as the batches in flight need).
	idempotent bool
}

// runPubSub publishes for p.duration from one client to one subscriber on
// another connection, then waits for delivery to settle.
//
// With t.routing keyed, every publish carries one payload and a key, the
// keys taking the stream's shards in turn, and the subscriber reads every
// shard; on a cluster the publisher connects as the route says.
func runPubSub(ctx context.Context, t *target, p pubsubParams) (*result, error) {
	if t.routing.keyed() {
		p.batch = 1
	}
	stream, err := t.admin.createStream(ctx, t.ns, "bench-pubsub", streamSpec{policy: p.policy, shards: t.routing.shards, durable: p.durable, repl: t.repl})
	if err != nil {
		return nil, err
	}
	defer t.admin.deleteStream(context.Background(), t.ns, stream)
	sub, err := t.subscribeAll(ctx, stream)
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	pubC, err := t.connectPublisher(ctx)
	if err != nil {
		return nil, err
	}
	if p.idempotent {
		if pubC, err = newIdemClient(ctx, pubC, p.inflight); err != nil {
			return nil, err
		}
	}
	defer pubC.Close()

	published, delivered := t.progress.counter("published"), t.progress.counter("delivered")
	var deliveredBytes, lastDelivery atomic.Int64 // lastDelivery: UnixNano of the latest
	recvCtx, stopRecv := context.WithCancel(ctx)
	defer stopRecv()
	var recvWG sync.WaitGroup
	for _, src := range sub.sources {
		recvWG.Add(1)
		go func() {
			defer recvWG.Done()
			for {
				ev, err := src.Next(recvCtx)
				if err != nil {
					return
				}
				deliveredBytes.Add(int64(len(ev.Payload)))
				lastDelivery.Store(time.Now().UnixNano())
				delivered.Add(1)
			}
		}()
	}

	before := forwardCounters(ctx, t.routing.metrics)
	start := time.Now()
	_, pubErrs := publishFor(ctx, pubC, t.ns, stream, p, t.routing.keys, published)
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
	recvWG.Wait()
	m := pubsubMeasure{start: start, pubEnd: pubEnd, lastDelivery: time.Unix(0, lastDelivery.Load()),
		published: published.Load(), delivered: delivered.Load(), deliveredBytes: deliveredBytes.Load(),
		payload: p.payload, publishErrors: pubErrs}

	r := &result{Scenario: "pubsub", Params: map[string]any{
		"payload_bytes": p.payload, "batch": p.batch, "acked": p.acked, "inflight": p.inflight,
		"durable": p.durable, "duration": p.duration.String(), "policy": p.policy,
	}}
	t.routing.addParams(r.Params)
	m.addTo(r)
	addForwarded(r, before, forwardCounters(ctx, t.routing.metrics))
	return r, nil
}

// runLatency sends one acknowledged publish at a time.
//
// With t.routing keyed, the publishes are keyed, taking the stream's
// shards in turn; with --route entry the publishes the entry broker
// forwarded and those it served itself are also reported apart.
func runLatency(ctx context.Context, t *target, payload int, count int, d time.Duration, durable bool) (*result, error) {
	stream, err := t.admin.createStream(ctx, t.ns, "bench-latency", streamSpec{shards: t.routing.shards, durable: durable, repl: t.repl})
	if err != nil {
		return nil, err
	}
	defer t.admin.deleteStream(context.Background(), t.ns, stream)
	c, err := t.connectPublisher(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	msg := make([]byte, payload)
	keys := t.routing.keys
	publish := func(i int) error {
		if len(keys) == 0 {
			return c.Publish(ctx, t.ns, stream, msg, felix.AckPerMessage)
		}
		return c.PublishKeyed(ctx, t.ns, stream, keys[i%len(keys)], msg, felix.AckPerMessage)
	}
	// Warm up: one publish to every shard, so each owner and each
	// forwarding path is open before the clock starts.
	for i := range max(1, len(keys)) {
		if err := whenReady(ctx, func() error { return publish(i) }); err != nil {
			return nil, err
		}
	}
	var local map[uint32]bool
	if t.routing.route == routeEntry {
		local = localShards(ctx, c, t.ns, stream, t.entryAddr())
	}
	before := forwardCounters(ctx, t.routing.metrics)
	lat := newLatencies(100000)
	split := map[bool]*latencies{true: newLatencies(100000), false: newLatencies(100000)} // by served locally
	start := time.Now()
	n := 0
	for n < count && time.Since(start) < d && ctx.Err() == nil {
		t0 := time.Now()
		if err := publish(n); err != nil {
			return nil, err
		}
		took := time.Since(t0)
		lat.add(took)
		if local != nil {
			shard := uint32(0)
			if len(keys) > 0 {
				shard = uint32(n % len(keys)) // keys[i] lands on shard i
			}
			split[local[shard]].add(took)
		}
		n++
	}
	secs := time.Since(start).Seconds()
	r := &result{Scenario: "latency", Params: map[string]any{"payload_bytes": payload, "count": n, "durable": durable}}
	t.routing.addParams(r.Params)
	r.addLatency("acked_publish", lat)
	r.add("publishes_per_s", float64(n)/secs, "msg/s")
	if local != nil {
		r.addLatency("forwarded_publish", split[false])
		r.addLatency("local_publish", split[true])
		r.add("forwarded_share", float64(split[false].seen)/float64(max(1, n)), "of publishes")
	}
	addForwarded(r, before, forwardCounters(ctx, t.routing.metrics))
	return r, nil
}
