package felix

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// modes runs a test against a fake advertising binary frames and one
// advertising none (JSON only).
var modes = []struct {
	name   string
	flags  uint16
	binary bool
}{
	{"binary", binaryFlags, true},
	{"json", 0, false},
}

func TestFireAndForgetFinishDeliversInOrder(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			fb := newFakeBroker(t, fakeOpts{flags: m.flags})
			c := connect(t, fb)
			ctx := context.Background()
			const n = 2000
			for i := range n {
				if err := c.Publish(ctx, "ns", "ordered", fmt.Appendf(nil, "m%d", i), AckNone); err != nil {
					t.Fatal(err)
				}
				if i%100 == 0 {
					if err := c.PublishBatch(ctx, "ns", "other", [][]byte{[]byte("a"), []byte("b")}, AckNone); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := c.Finish(ctx); err != nil {
				t.Fatal(err)
			}
			// Finish returns once the broker has read every frame.
			got := fb.records("ns", "ordered")
			if len(got) != n {
				t.Fatalf("got %d records, want %d", len(got), n)
			}
			for i, r := range got {
				if want := fmt.Sprintf("m%d", i); string(r.payload) != want || r.binary != m.binary {
					t.Fatalf("record %d = %q binary=%v, want %q binary=%v", i, r.payload, r.binary, want, m.binary)
				}
			}
			if other := fb.records("ns", "other"); len(other) != 40 {
				t.Fatalf("other stream got %d", len(other))
			}
		})
	}
}

func TestAckedPublish(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			fb := newFakeBroker(t, fakeOpts{flags: m.flags})
			c := connect(t, fb)
			ctx := context.Background()
			if err := c.Publish(ctx, "ns", "s", []byte("one"), AckPerMessage); err != nil {
				t.Fatal(err)
			}
			if err := c.PublishBatch(ctx, "ns", "s", [][]byte{[]byte("two"), []byte("three")}, AckPerBatch); err != nil {
				t.Fatal(err)
			}
			if err := c.PublishKeyed(ctx, "ns", "s", []byte("k1"), []byte("four"), AckPerMessage); err != nil {
				t.Fatal(err)
			}
			got := fb.records("ns", "s")
			if len(got) != 4 || string(got[3].payload) != "four" || !bytes.Equal(got[3].key, []byte("k1")) {
				t.Fatalf("records %+v", got)
			}
			for _, r := range got {
				if r.binary != m.binary {
					t.Fatalf("binary=%v, want %v", r.binary, m.binary)
				}
			}
		})
	}
}

func TestAckedPublishRefused(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			fb := newFakeBroker(t, fakeOpts{flags: m.flags})
			cfg := fb.config()
			cfg.PublishStreams = 1
			c, err := Connect(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			err = c.Publish(ctx, "ns", "refuse", []byte("x"), AckPerMessage)
			be := asBroker(t, err)
			if be.Code != wire.CodeForbidden || be.Retry != wire.RetryFatal || be.Detail["reason"] != "nope" {
				t.Fatalf("got %+v", be)
			}
			if err := c.Publish(ctx, "ns", "fine", []byte("y"), AckPerMessage); err != nil {
				t.Fatal(err)
			}
			// A broker that ends the stream after a refusal: once the end
			// is seen, the next publish goes out on a fresh stream.
			st := c.pub.workers[0].cur
			asBroker(t, c.Publish(ctx, "ns", "refuse-end", []byte("z"), AckPerMessage))
			<-st.deadC
			if err := c.Publish(ctx, "ns", "fine", []byte("w"), AckPerMessage); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFireAndForgetRefusalReportedByFinish(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	cfg := fb.config()
	cfg.PublishStreams = 1
	c, err := Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Publish(ctx, "missing", "s", []byte("x"), AckNone); err != nil {
		t.Fatal(err)
	}
	// The acked publish behind it is not blamed for the refusal.
	if err := c.Publish(ctx, "ns", "s", []byte("y"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	if be := asBroker(t, c.Finish(ctx)); be.Code != wire.CodeNotFound {
		t.Fatalf("got %+v", be)
	}
	if err := c.Finish(ctx); err != nil {
		t.Fatalf("second finish: %v", err)
	}
}

func TestAckedPublishCancelledWait(t *testing.T) {
	hold := make(chan struct{})
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, hold: hold})
	c := connect(t, fb)
	ctx, cancel := context.WithCancel(context.Background())
	errC := make(chan error, 1)
	go func() { errC <- c.Publish(ctx, "ns", "hold", []byte("x"), AckPerMessage) }()
	fb.waitRecords("ns", "hold", 1) // written and received; the answer is held
	cancel()
	if err := <-errC; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	close(hold) // the late answer arrives and is discarded
	if err := c.Publish(context.Background(), "ns", "hold", []byte("y"), AckPerMessage); err != nil {
		t.Fatal(err)
	}
	for _, w := range c.pub.workers {
		w.mu.Lock()
		n := len(w.pending)
		w.mu.Unlock()
		if n != 0 {
			t.Errorf("pending answers left: %d", n)
		}
	}
}

func TestAckedPublishLostInFlightIsOutcomeUnknown(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, hold: make(chan struct{})})
	c := connect(t, fb)
	errC := make(chan error, 1)
	go func() { errC <- c.Publish(context.Background(), "ns", "hold", []byte("x"), AckPerMessage) }()
	fb.waitRecords("ns", "hold", 1)
	fb.Kill()
	err := <-errC
	be := asBroker(t, err)
	if be.Code != wire.CodeInternal || be.Retry != wire.RetryOutcomeUnknown || !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("got %+v (%v)", be, err)
	}
}

func TestPublishValidation(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	ctx := context.Background()
	for name, err := range map[string]error{
		"no stream":   c.Publish(ctx, "ns", "", []byte("x"), AckNone),
		"empty batch": c.PublishBatch(ctx, "ns", "s", nil, AckNone),
		"bad ack":     c.Publish(ctx, "ns", "s", nil, AckMode(9)),
		"too large":   c.Publish(ctx, "ns", "s", make([]byte, 17<<20), AckNone),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestPublishAfterConnectionDies(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	fb.Kill()
	<-c.conn.Context().Done()
	err := c.Publish(context.Background(), "ns", "s", []byte("x"), AckPerMessage)
	if !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("got %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Finish(ctx); err != nil {
		t.Fatalf("finish with nothing queued: %v", err)
	}
}

func TestConcurrentPublishAndCache(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, features: wire.FeatureCacheDelete})
	cfg := fb.config()
	cfg.PublishStreams, cfg.CacheStreams = 2, 2
	c, err := Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const workers, each = 8, 100
	errC := make(chan error, workers)
	for g := range workers {
		go func() {
			stream := fmt.Sprintf("s%d", g)
			for i := range each {
				ack := AckNone
				if i%3 == 0 {
					ack = AckPerMessage
				}
				if err := c.Publish(ctx, "ns", stream, fmt.Appendf(nil, "%d", i), ack); err != nil {
					errC <- err
					return
				}
				key := fmt.Sprintf("%d-%d", g, i%5)
				if err := c.CachePut(ctx, "ns", "c", key, []byte(key), 0); err != nil {
					errC <- err
					return
				}
				if v, found, err := c.CacheGet(ctx, "ns", "c", key); err != nil || !found || string(v) != key {
					errC <- fmt.Errorf("get %s: %q %v %v", key, v, found, err)
					return
				}
			}
			errC <- nil
		}()
	}
	for range workers {
		if err := <-errC; err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	for g := range workers {
		got := fb.records("ns", fmt.Sprintf("s%d", g))
		if len(got) != each {
			t.Fatalf("stream s%d: %d records", g, len(got))
		}
		for i, r := range got {
			if string(r.payload) != fmt.Sprint(i) {
				t.Fatalf("stream s%d record %d = %q", g, i, r.payload)
			}
		}
	}
}
