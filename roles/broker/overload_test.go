package broker

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

func padded(i, size int) []byte {
	b := make([]byte, size)
	copy(b, numbered(i))
	return b
}

func TestOverloadRefusesAckedAndDropsFireAndForget(t *testing.T) {
	cfg := testConfig()
	cfg.Core.SubQueueCapacity = 1
	cfg.PublishLaneDepth = 2 // the shard's queue: once full it stays full
	e := startEnv(t, cfg, wire.StreamSpec{Stream: "blocky", SubQueuePolicy: "block"}, wire.StreamSpec{Stream: "free"})
	// A batch larger than the subscriber's stream window can never be
	// written, so its writer stalls on the first one for good.
	stalled := e.dial(16 << 10)
	e.subscribe(stalled, e.authed(stalled, wire.FlagBinaryEventBatchShared, allFeatures, pubAll), "blocky") // never read

	qc := e.dial(0)
	pub := e.authed(qc, 0, allFeatures, pubAll)
	const metric = `felix_tenant_publish_queue_full_total{tenant="acme"}`
	before := e.metric(metric)
	var refused *wire.PublishError
	for i := 0; i < 500 && refused == nil; i++ {
		pub.write(binPublish("blocky", true, uint64(i), padded(i, 32<<10)))
		switch m := pub.recv().(type) {
		case *wire.PublishOK:
		case *wire.PublishError:
			refused = m
		default:
			t.Fatalf("got %#v", m)
		}
	}
	if refused == nil {
		t.Fatal("acked publishes were never refused")
	}
	e2 := refused.Err()
	if e2.Code != wire.CodeOverloaded || e2.Retry != wire.RetryRetryAfter ||
		e2.Detail["reason"] != "publish_queue_full" || e2.Detail["retry_after_ms"] != float64(10) {
		t.Fatalf("refusal %#v", e2)
	}

	// The refusal shows the lane full at that moment, but the batches
	// ahead of it may still be moving into the places that stay stuck for
	// good: the shard worker's hand, the subscriber's one-batch queue and
	// the stalled writer. So up to three fire-and-forget frames may still
	// find room; every other one must be dropped and counted.
	const faf, slack = 20, 3
	droppedBefore := e.metric("felix_broker_ingress_dropped_total")
	for i := 0; i < faf; i++ {
		pub.write(binPublish("blocky", false, 0, padded(i, 32<<10)))
	}
	pub.write(binPublish("blocky", true, 9999, []byte("sync")))
	pub.recv() // the fire-and-forget frames before it have been handled
	if got := e.metric("felix_broker_ingress_dropped_total") - droppedBefore; got < faf-slack {
		t.Fatalf("fire-and-forget drops counted: %v of %d", got, faf)
	}
	if got := e.metric(metric) - before; got < faf-slack+1 {
		t.Fatalf("%s rose by %v", metric, got)
	}

	// A different stream is not held up by the stalled one.
	other := e.authed(qc, 0, allFeatures, pubAll)
	other.write(binPublish("free", true, 1, []byte("x")))
	if _, ok := other.recv().(*wire.PublishOK); !ok {
		t.Fatal("a publish to another stream was refused")
	}
}

// TestSlowConsumerIsolation publishes to a stream with a subscriber that
// never reads and one that reads everything. The publisher waits for the
// fast subscriber to read each message before sending the next, so the
// fast one's queue never holds more than one batch and can never overflow,
// whatever the scheduling; the slow one's queue and stalled write hold far
// fewer than were published, so it must drop the rest. Isolation is then
// two facts: the fast subscriber got every message in order, and the slow
// one dropped what it could not hold.
func TestSlowConsumerIsolation(t *testing.T) {
	cfg := testConfig()
	cfg.Core.SubQueueCapacity = 64
	e := startEnv(t, cfg, wire.StreamSpec{Stream: "iso"})
	const window = 16 << 10
	slow := e.dial(window)
	e.subscribe(slow, e.authed(slow, wire.FlagBinaryEventBatchShared, allFeatures, pubAll), "iso") // never read
	fastConn := e.dial(0)
	fast := e.subscribe(fastConn, e.authed(fastConn, wire.FlagBinaryEventBatchShared, allFeatures, pubAll), "iso")

	const n, size = 400, 4 << 10
	droppedBefore := e.metric("felix_sub_queue_dropped_total")
	pub := e.authed(e.dial(0), 0, allFeatures|wire.FeatureAckOnCommit, pubAll)
	for i := 0; i < n; i++ {
		pub.write(binPublish("iso", true, uint64(i), padded(i, size)))
		if _, ok := pub.recv().(*wire.PublishOK); !ok {
			t.Fatalf("publish %d refused", i)
		}
		// Paced by the fast reader: nothing else is queued for it, so
		// this read returns exactly message i.
		p := fast.payloads(1)
		if len(p) != 1 || !bytes.Equal(p[0], padded(i, size)) {
			t.Fatalf("fast subscriber: read %d payloads for message %d, or out of order", len(p), i)
		}
	}
	// The slow subscriber holds at most its queue, one stalled write of up
	// to EventBatchMaxEvents batches, and what fitted in its stream window
	// before that write stalled; everything else it must have dropped.
	held := cfg.Core.SubQueueCapacity + cfg.EventBatchMaxEvents + window/size
	if d := e.metric("felix_sub_queue_dropped_total") - droppedBefore; d < float64(n-held) {
		t.Fatalf("the slow subscriber dropped %v of %d messages, want at least %d", d, n, n-held)
	}
}

func TestGracefulShutdownAnswersAckedPublishes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		clientDone bool // the client finishes its streams once Shutdown starts
		budget     time.Duration
	}{
		{"client finishes", true, 20 * time.Second},
		{"grace runs out", false, 6 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "events"})
			qc := e.dial(0)
			subStream := e.authed(qc, 0, allFeatures, pubAll)
			sub := e.subscribe(qc, subStream, "events")
			pub := e.authed(qc, 0, allFeatures|wire.FeatureAckOnCommit, pubAll)
			const n = 200
			var frames []byte
			for i := 0; i < n; i++ {
				frames = append(frames, binPublish("events", true, uint64(i), numbered(i))...)
			}
			pub.write(frames)
			pub.recv() // the broker is serving this stream
			shutdownErr := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), tc.budget)
				defer cancel()
				shutdownErr <- e.srv.Shutdown(ctx)
			}()
			if tc.clientDone {
				pub.st.Close()
				subStream.st.Close()
			}
			for i := 1; i < n; i++ {
				if _, ok := pub.recv().(*wire.PublishOK); !ok {
					t.Fatalf("answer %d is not publish_ok", i)
				}
			}
			// quic-go drops what a client has not read once the connection
			// closes, so read the events before the drain can end.
			checkOrder(t, sub.payloads(n), n)
			pub.expectEnd()
			if err := <-shutdownErr; err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			<-qc.Context().Done()
			var appErr *transport.ApplicationError
			if err := context.Cause(qc.Context()); !errors.As(err, &appErr) || appErr.Code != transport.ApplicationErrorCode(wire.CloseShutdown) || appErr.Message != "shutdown" {
				t.Fatalf("connection closed with %v", err)
			}
			if gs := brokerGoroutines(); len(gs) > 0 {
				t.Fatalf("%d goroutines outlived Shutdown:\n%s", len(gs), strings.Join(gs, "\n\n"))
			}
		})
	}
}

func TestNoGoroutineOutlivesShutdown(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "events"}, wire.StreamSpec{Stream: "blocky", SubQueuePolicy: "block"})
	for c := 0; c < 3; c++ {
		qc := e.dial(16 << 10)
		e.subscribe(qc, e.authed(qc, 0, allFeatures, pubAll), "events")
		e.subscribe(qc, e.authed(qc, wire.FlagBinaryEventBatchShared, allFeatures, pubAll), "blocky")
		pub := e.authed(qc, 0, allFeatures, pubAll, "cache.*:cache:acme")
		for i := 0; i < 50; i++ {
			pub.write(binPublish("events", false, 0, padded(i, 1<<10)))
			pub.write(binPublish("blocky", false, 0, padded(i, 4<<10)))
		}
		pub.send(&wire.CachePut{TenantID: testTenant, Namespace: "prod", Cache: "sessions", Key: "k", Value: []byte("v"), RequestID: 1})
		pub.recv()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	e.srv.Shutdown(ctx)
	if gs := brokerGoroutines(); len(gs) > 0 {
		t.Fatalf("%d goroutines outlived Shutdown:\n%s", len(gs), strings.Join(gs, "\n\n"))
	}
	for _, g := range []string{"felix_broker_connections", "felix_broker_subscriptions", "felix_sub_active_connections", "felix_broker_out_ack_depth"} {
		if v := e.metric(g); v != 0 {
			t.Errorf("%s = %v after shutdown", g, v)
		}
	}
}
