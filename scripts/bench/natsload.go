package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The NATS load generators run in the harness process with nats.go, every
// connection over TLS verified against the throwaway CA.

func (n *natsNode) connect(name string) (*nats.Conn, error) {
	return nats.Connect(n.url, nats.RootCAs(n.ca), nats.Name(name), nats.NoReconnect(),
		nats.Timeout(10*time.Second), nats.ReconnectBufSize(-1))
}

// settle waits until got reaches want or stops moving for two seconds.
func settle(ctx context.Context, got func() int64, want int64) {
	last, idleSince := got(), time.Now()
	for got() < want && time.Since(idleSince) < 2*time.Second && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		if n := got(); n != last {
			last, idleSince = n, time.Now()
		}
	}
}

// counter is a core subscription that counts what it receives.
type counter struct {
	msgs, bytes atomic.Int64
	sub         *nats.Subscription
}

func subscribeCounter(nc *nats.Conn, subject string) (*counter, error) {
	c := &counter{}
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		c.msgs.Add(1)
		c.bytes.Add(int64(len(m.Data)))
	})
	if err != nil {
		return nil, err
	}
	// Bounded client-side queue; past it the client drops and counts.
	if err := sub.SetPendingLimits(1<<16, 256<<20); err != nil {
		return nil, err
	}
	c.sub = sub
	return c, nc.Flush()
}

// natsPubSub is one publisher and one subscriber connection, fire-and-forget.
func natsPubSub(ctx context.Context, n *natsNode, payload int, d time.Duration) (figures, error) {
	subNC, err := n.connect("bench-sub")
	if err != nil {
		return nil, err
	}
	defer subNC.Close()
	pubNC, err := n.connect("bench-pub")
	if err != nil {
		return nil, err
	}
	defer pubNC.Close()
	cnt, err := subscribeCounter(subNC, "bench.pubsub")
	if err != nil {
		return nil, err
	}
	msg := make([]byte, payload)
	var published int64
	start := time.Now()
	deadline := start.Add(d)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		for range 64 {
			if err := pubNC.Publish("bench.pubsub", msg); err != nil {
				return nil, err
			}
			published++
		}
	}
	if err := pubNC.FlushTimeout(30 * time.Second); err != nil {
		return nil, err
	}
	pubElapsed := time.Since(start)
	settle(ctx, cnt.msgs.Load, published)
	elapsed := time.Since(start)
	return figures{
		"published_mb_per_s": float64(published*int64(payload)) / pubElapsed.Seconds() / 1e6,
		"delivered_mb_per_s": float64(cnt.bytes.Load()) / elapsed.Seconds() / 1e6,
		"lost":               float64(published - cnt.msgs.Load()),
		"delivered":          float64(cnt.msgs.Load()),
	}, ctx.Err()
}

// jsStream creates a JetStream stream on subject with the given storage,
// bounded in bytes (oldest dropped first).
func jsStream(ctx context.Context, nc *nats.Conn, name string, storage jetstream.StorageType) (jetstream.JetStream, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		return nil, err
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{name + ".>"}, Storage: storage,
		MaxBytes: 1 << 30, Discard: jetstream.DiscardOld,
	})
	return js, err
}

// natsAcked publishes asynchronously to JetStream with at most inflight
// unacknowledged publishes, one core subscriber receiving, and reports the
// acknowledged rate.
func natsAcked(ctx context.Context, n *natsNode, storage jetstream.StorageType, payload, inflight int, d time.Duration) (figures, error) {
	return natsAckedWith(ctx, n, storage, payload, inflight, d, false)
}

// natsAckedWith is natsAcked; with msgIDs every publish carries a unique
// message id (the Nats-Msg-Id header), which the stream checks against its
// duplicate window (2 min by default).
func natsAckedWith(ctx context.Context, n *natsNode, storage jetstream.StorageType, payload, inflight int, d time.Duration, msgIDs bool) (figures, error) {
	nc, err := n.connect("bench-js-admin")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("BENCH%d", time.Now().UnixNano())
	if _, err := js.CreateOrUpdateStream(ctx, benchStreamConfig(name, storage, 1)); err != nil {
		return nil, err
	}
	defer js.DeleteStream(context.Background(), name)
	return ackedLoadWith(ctx, n, name, payload, inflight, d, msgIDs)
}

// benchStreamConfig is an acked run's stream: subjects name.>, bounded to
// 1 GiB (oldest dropped first), with replicas copies.
func benchStreamConfig(name string, storage jetstream.StorageType, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: storage,
		MaxBytes: 1 << 30, Discard: jetstream.DiscardOld, Replicas: replicas}
}

// ackedLoad publishes asynchronously to the existing stream name through
// server n with at most inflight unacknowledged publishes, one core
// subscriber on n receiving, and reports the acknowledged rate.
func ackedLoad(ctx context.Context, n *natsNode, name string, payload, inflight int, d time.Duration) (figures, error) {
	return ackedLoadWith(ctx, n, name, payload, inflight, d, false)
}

// ackedLoadWith is ackedLoad; with msgIDs each publish carries a unique
// Nats-Msg-Id.
func ackedLoadWith(ctx context.Context, n *natsNode, name string, payload, inflight int, d time.Duration, msgIDs bool) (figures, error) {
	nc, err := n.connect("bench-js")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	subNC, err := n.connect("bench-js-sub")
	if err != nil {
		return nil, err
	}
	defer subNC.Close()
	var asyncErrs atomic.Int64
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(inflight),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { asyncErrs.Add(1) }))
	if err != nil {
		return nil, err
	}
	cnt, err := subscribeCounter(subNC, name+".>")
	if err != nil {
		return nil, err
	}
	subject := name + ".x"
	msg := make([]byte, payload)
	var issued, failed int64
	stall := jetstream.WithStallWait(10 * time.Second)
	start := time.Now()
	deadline := start.Add(d)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		var err error
		if msgIDs {
			_, err = js.PublishAsync(subject, msg, stall, jetstream.WithMsgID(name+"-"+strconv.FormatInt(issued+failed, 10)))
		} else {
			_, err = js.PublishAsync(subject, msg, stall)
		}
		if err != nil {
			failed++
			continue
		}
		issued++
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		return nil, errors.New("jetstream: publishes not acknowledged within 30s")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	pubElapsed := time.Since(start)
	acked := issued - asyncErrs.Load()
	settle(ctx, cnt.msgs.Load, acked)
	elapsed := time.Since(start)
	return figures{
		"acked":              float64(acked),
		"acked_mb_per_s":     float64(acked*int64(payload)) / pubElapsed.Seconds() / 1e6,
		"acked_msgs_per_s":   float64(acked) / pubElapsed.Seconds(),
		"delivered_mb_per_s": float64(cnt.bytes.Load()) / elapsed.Seconds() / 1e6,
		"errors":             float64(failed + asyncErrs.Load()),
	}, ctx.Err()
}

// natsSyncLatency publishes to JetStream one message at a time, each waiting
// for its acknowledgement.
func natsSyncLatency(ctx context.Context, n *natsNode, storage jetstream.StorageType, payload int, d time.Duration) (figures, error) {
	nc, err := n.connect("bench-js-latency")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	name := fmt.Sprintf("BENCHLAT%d", time.Now().UnixNano())
	js, err := jsStream(ctx, nc, name, storage)
	if err != nil {
		return nil, err
	}
	defer js.DeleteStream(context.Background(), name)
	msg := make([]byte, payload)
	rec := newRecorder(100000)
	start := time.Now()
	count := 0
	for ctx.Err() == nil && time.Since(start) < d {
		t0 := time.Now()
		if _, err := js.Publish(ctx, name+".x", msg); err != nil {
			return nil, err
		}
		rec.add(time.Since(t0))
		count++
	}
	q := rec.quantilesMS(0.5, 0.99, 0.999)
	if q == nil {
		return nil, errors.New("jetstream: no publish completed")
	}
	return figures{"p50_ms": q[0], "p99_ms": q[1], "p999_ms": q[2], "publishes_per_s": float64(count) / time.Since(start).Seconds()}, nil
}

// natsSubMemory opens count idle subscriptions over conns connections and
// reports the server's RSS growth per subscription.
func natsSubMemory(ctx context.Context, n *natsNode, count, conns int, settleFor time.Duration) (figures, error) {
	before, err := vmRSS(n.proc.pid())
	if err != nil {
		return nil, err
	}
	var ncs []*nats.Conn
	defer func() {
		for _, nc := range ncs {
			nc.Close()
		}
	}()
	for i := range conns {
		nc, err := n.connect(fmt.Sprintf("bench-idle-%d", i))
		if err != nil {
			return nil, err
		}
		ncs = append(ncs, nc)
	}
	for i := range count {
		if _, err := ncs[i%len(ncs)].Subscribe("bench.idle", func(*nats.Msg) {}); err != nil {
			return nil, err
		}
	}
	for _, nc := range ncs {
		if err := nc.Flush(); err != nil {
			return nil, err
		}
	}
	select {
	case <-time.After(settleFor):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	after, err := vmRSS(n.proc.pid())
	if err != nil {
		return nil, err
	}
	return figures{"rss_per_sub_bytes": float64(after-before) / float64(count), "opened": float64(count)}, nil
}
