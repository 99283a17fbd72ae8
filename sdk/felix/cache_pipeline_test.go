package felix

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// testCtx bounds every call of a test so a broken pipeline fails instead
// of hanging.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// runAll runs f(0..n-1) concurrently and returns the errors in order.
func runAll(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errs
}

func TestCachePipelineAnswersOutOfOrder(t *testing.T) {
	const n = 64
	// The fake waits until n requests are in flight on the one stream and
	// answers them last to first: only a pipelined client gets through.
	f := newCacheFake(t, func(ps *cacheFakeStream) {
		for {
			batch, ok := ps.collect(n)
			if !ok {
				return
			}
			slices.Reverse(batch)
			for _, m := range batch {
				ps.answer(m)
			}
		}
	})
	c := f.connect()
	ctx := testCtx(t)
	errs := runAll(n, func(i int) error {
		key, val := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)
		if err := c.CachePut(ctx, "ns", "c", key, []byte(val), 0); err != nil {
			return fmt.Errorf("put: %w", err)
		}
		if v, found, err := c.CacheGet(ctx, "ns", "c", key); err != nil || !found || string(v) != val {
			return fmt.Errorf("get %s: %q %v %v", key, v, found, err)
		}
		if v, found, err := c.CacheDelete(ctx, "ns", "c", key); err != nil || !found || string(v) != val {
			return fmt.Errorf("delete %s: %q %v %v", key, v, found, err)
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := f.streams.Load(); got != 1 {
		t.Fatalf("%d streams, want 1", got)
	}
	if got := inFlight(t, c); got != 0 {
		t.Fatalf("%d requests still pending", got)
	}
}

func TestCachePipelineCancelLeavesOthersAlone(t *testing.T) {
	gotLate := make(chan struct{})
	release := make(chan struct{})
	f := newCacheFake(t, func(ps *cacheFakeStream) {
		var late wire.Message
		releaseC := release
		for {
			select {
			case m, ok := <-ps.reqC:
				if !ok {
					return
				}
				if key, _ := cacheKeyID(m); key == "late" {
					late = m
					close(gotLate)
					continue
				}
				ps.answer(m)
			case <-releaseC:
				// The answer to a call that gave up arrives before the others.
				_, id := cacheKeyID(late)
				ps.send(&wire.CacheValue{RequestID: id, Key: "late", Value: []byte("stale")})
				releaseC = nil
			case <-ps.ctx.Done():
				return
			}
		}
	})
	c := f.connect()
	ctx := testCtx(t)

	lateCtx, cancelLate := context.WithCancel(ctx)
	lateErrC := make(chan error, 1)
	go func() {
		_, _, err := c.CacheGet(lateCtx, "ns", "c", "late")
		lateErrC <- err
	}()
	<-gotLate
	// The unanswered request does not hold up the stream.
	for _, err := range runAll(32, func(i int) error {
		return c.CachePut(ctx, "ns", "c", fmt.Sprintf("k%d", i), []byte{byte(i)}, 0)
	}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	cancelLate()
	err := <-lateErrC
	if !errors.Is(err, context.Canceled) || wasNotSent(err) {
		t.Fatalf("cancelled call after its write: %v (not sent %v)", err, wasNotSent(err))
	}
	if got := inFlight(t, c); got != 0 {
		t.Fatalf("%d requests still pending after the cancel", got)
	}
	close(release)
	for _, err := range runAll(32, func(i int) error {
		v, found, err := c.CacheGet(ctx, "ns", "c", fmt.Sprintf("k%d", i))
		if err != nil || !found || len(v) != 1 || v[0] != byte(i) {
			return fmt.Errorf("get k%d after the late answer: %v %v %v", i, v, found, err)
		}
		return nil
	}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	// A call whose ctx ended before it was written is never sent.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := c.CacheGet(done, "ns", "c", "late"); !errors.Is(err, context.Canceled) || !wasNotSent(err) {
		t.Fatalf("pre-cancelled call: %v (not sent %v)", err, wasNotSent(err))
	}
	if got := f.streams.Load(); got != 1 {
		t.Fatalf("%d streams, want 1", got)
	}
}

func TestCachePipelineErrorFailsOnlyItsRequest(t *testing.T) {
	const n = 16
	f := newCacheFake(t, func(ps *cacheFakeStream) {
		for {
			batch, ok := ps.collect(n)
			if !ok {
				return
			}
			slices.Reverse(batch)
			for _, m := range batch {
				key, id := cacheKeyID(m)
				if key != "bad" {
					ps.answer(m)
					continue
				}
				em := wire.NewError(wire.CodeForbidden, "no").ErrorMessage(true)
				em.RequestID = &id
				ps.send(em)
			}
		}
	})
	c := f.connect()
	ctx := testCtx(t)
	errs := runAll(n, func(i int) error {
		key := fmt.Sprintf("k%d", i)
		if i == 0 {
			key = "bad"
		}
		return c.CachePut(ctx, "ns", "c", key, []byte("v"), 0)
	})
	if be := asBroker(t, errs[0]); be.Code != wire.CodeForbidden {
		t.Fatalf("refused call: %+v", be)
	}
	for i, err := range errs[1:] {
		if err != nil {
			t.Fatalf("call %d beside the refused one: %v", i+1, err)
		}
	}
	if got := f.streams.Load(); got != 1 {
		t.Fatalf("%d streams after a refusal, want 1", got)
	}
}

// streamDeaths are the ways a cache stream can fail while the connection
// stays up.
var streamDeaths = []struct {
	name    string
	kill    func(ps *cacheFakeStream)
	isError func(error) bool
}{
	{"error without request id", func(ps *cacheFakeStream) {
		ps.send(wire.NewError(wire.CodeInternal, "stream broken").ErrorMessage(true))
	}, func(err error) bool {
		var be *BrokerError
		return errors.As(err, &be) && be.Code == wire.CodeInternal
	}},
	{"undecodable frame", func(ps *cacheFakeStream) {
		_, _ = ps.s.Write(wire.AppendFrame(nil, 0, []byte("{not json")))
	}, isPlainStreamError},
	{"binary frame", func(ps *cacheFakeStream) {
		_, _ = ps.s.Write(wire.AppendFrame(nil, wire.FlagBinaryPublishBatch, []byte{1, 2, 3}))
	}, isPlainStreamError},
	{"reset", func(ps *cacheFakeStream) {
		ps.s.CancelWrite(7)
	}, isPlainStreamError},
	{"end", func(ps *cacheFakeStream) {
		_ = ps.s.Close()
	}, isPlainStreamError},
}

// isPlainStreamError is a stream failure that is neither a refusal nor a
// lost connection.
func isPlainStreamError(err error) bool {
	var be *BrokerError
	return err != nil && !errors.As(err, &be) && !errors.Is(err, ErrConnectionLost)
}

func TestCachePipelineStreamDeathFailsAllPending(t *testing.T) {
	const n = 8
	for _, tc := range streamDeaths {
		t.Run(tc.name, func(t *testing.T) {
			f := newCacheFake(t, func(ps *cacheFakeStream) {
				if ps.n > 1 {
					ps.serve()
					return
				}
				if _, ok := ps.collect(n); ok {
					tc.kill(ps)
				}
				for range ps.reqC { // until the client drops the stream
				}
			})
			c := f.connect()
			ctx := testCtx(t)
			errs := runAll(n, func(i int) error {
				_, _, err := c.CacheDelete(ctx, "ns", "c", fmt.Sprintf("k%d", i))
				return err
			})
			for i, err := range errs {
				if !tc.isError(err) {
					t.Fatalf("call %d: %T %v", i, err, err)
				}
				if wasNotSent(err) {
					t.Fatalf("call %d was written but reports not sent: %v", i, err)
				}
			}
			if got := inFlight(t, c); got != 0 {
				t.Fatalf("%d requests still pending", got)
			}
			if err := c.CachePut(ctx, "ns", "c", "k", []byte("v"), 0); err != nil {
				t.Fatalf("call after the stream died: %v", err)
			}
			if got := f.streams.Load(); got != 2 {
				t.Fatalf("%d streams, want a fresh second one", got)
			}
		})
	}
}

func TestCachePipelineConnectionDeathFailsAllPending(t *testing.T) {
	const n = 8
	f := newCacheFake(t, func(ps *cacheFakeStream) {
		if _, ok := ps.collect(n); ok {
			_ = ps.conn.CloseWithError(1, "killed")
		}
	})
	c := f.connect()
	ctx := testCtx(t)
	for i, err := range runAll(n, func(i int) error {
		_, _, err := c.CacheGet(ctx, "ns", "c", fmt.Sprintf("k%d", i))
		return err
	}) {
		if !errors.Is(err, ErrConnectionLost) || wasNotSent(err) {
			t.Fatalf("call %d: %v (not sent %v)", i, err, wasNotSent(err))
		}
	}
	if err := c.CachePut(ctx, "ns", "c", "k", nil, 0); !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("call on the dead connection: %v", err)
	}
}

// The ClusterClient retries gets that were in flight when the connection
// died, but not deletes: those were written, so a repeat could report the
// wrong value. With several streams, the calls on the others must still
// see the loss after the first call to notice it closed the client.
func TestCachePipelineClusterRetriesAfterConnectionDeath(t *testing.T) {
	for _, streams := range []int{1, 4} {
		t.Run(fmt.Sprintf("%d streams", streams), func(t *testing.T) {
			testClusterRetries(t, streams)
		})
	}
}

func testClusterRetries(t *testing.T, streams int) {
	const n = 16
	var received atomic.Int32
	first := newCacheFake(t, func(ps *cacheFakeStream) {
		for {
			if _, ok := ps.next(); !ok {
				return
			}
			if received.Add(1) == n {
				_ = ps.conn.CloseWithError(1, "killed")
			}
		}
	})
	second := newCacheFake(t, func(ps *cacheFakeStream) { ps.serve() })
	second.store["k"] = []byte("v")
	ctx := testCtx(t)
	cfg := first.config()
	cfg.CacheStreams = streams
	cc, err := ConnectCluster(ctx, []string{first.config().Addr, second.config().Addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	errs := runAll(n, func(i int) error {
		if i%2 == 0 {
			v, found, err := cc.CacheGet(ctx, "ns", "c", "k")
			if err == nil && (!found || string(v) != "v") {
				err = fmt.Errorf("got %q %v", v, found)
			}
			return err
		}
		_, _, err := cc.CacheDelete(ctx, "ns", "c", fmt.Sprintf("d%d", i))
		return err
	})
	for i, err := range errs {
		switch {
		case i%2 == 0 && err != nil:
			t.Fatalf("get %d not retried on the second broker: %v", i, err)
		case i%2 == 1 && (!errors.Is(err, ErrConnectionLost) || wasNotSent(err)):
			t.Fatalf("delete %d: %v (not sent %v), want a sent call that lost its connection", i, err, wasNotSent(err))
		}
	}
	if err := cc.CachePut(ctx, "ns", "c", "k2", []byte("v2"), 0); err != nil {
		t.Fatal(err)
	}
	if cc.Addr() != second.config().Addr {
		t.Fatalf("on %s, want the second broker", cc.Addr())
	}
}

func TestCachePipelineInFlightBound(t *testing.T) {
	const extra = 40
	var outstanding, maxOutstanding atomic.Int64
	full := make(chan struct{})
	release := make(chan struct{})
	f := newCacheFake(t, func(ps *cacheFakeStream) {
		var held []wire.Message
		releaseC := release
		reply := func(m wire.Message) {
			outstanding.Add(-1)
			ps.answer(m)
		}
		for {
			select {
			case m, ok := <-ps.reqC:
				if !ok {
					return
				}
				if o := outstanding.Add(1); o > maxOutstanding.Load() {
					maxOutstanding.Store(o)
				}
				if releaseC == nil {
					reply(m)
					continue
				}
				held = append(held, m)
				if len(held) == cacheMaxInFlight {
					close(full)
				}
			case <-releaseC:
				for _, m := range held {
					reply(m)
				}
				held, releaseC = nil, nil
			case <-ps.ctx.Done():
				return
			}
		}
	})
	c := f.connect()
	ctx := testCtx(t)
	var started atomic.Int32
	errC := make(chan []error, 1)
	go func() {
		errC <- runAll(cacheMaxInFlight+extra, func(i int) error {
			started.Add(1)
			_, _, err := c.CacheGet(ctx, "ns", "c", fmt.Sprintf("k%d", i))
			return err
		})
	}()
	<-full
	if got := inFlight(t, c); got != cacheMaxInFlight {
		t.Fatalf("%d pending while the broker holds %d", got, cacheMaxInFlight)
	}
	close(release)
	for i, err := range <-errC {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := maxOutstanding.Load(); got != cacheMaxInFlight {
		t.Fatalf("the broker saw up to %d requests in flight, want exactly %d", got, cacheMaxInFlight)
	}
	if got := started.Load(); got != cacheMaxInFlight+extra {
		t.Fatalf("%d calls started", got)
	}
}

// inFlight returns how many requests await an answer on c's cache
// streams, checking each worker's slot accounting on the way.
func inFlight(t *testing.T, c *Client) int {
	t.Helper()
	total := 0
	for _, w := range c.cache.workers {
		w.mu.Lock()
		pending, slots := len(w.pending), len(w.slotC)
		w.mu.Unlock()
		if pending > slots || slots > cacheMaxInFlight {
			t.Fatalf("cache worker: %d pending, %d slots taken, bound %d", pending, slots, cacheMaxInFlight)
		}
		total += pending
	}
	return total
}
