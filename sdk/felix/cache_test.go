package felix

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

func TestCachePutGetDelete(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, features: wire.FeatureCacheDelete})
	c := connect(t, fb)
	ctx := context.Background()

	if v, found, err := c.CacheGet(ctx, "ns", "c", "absent"); err != nil || found || v != nil {
		t.Fatalf("absent: %q %v %v", v, found, err)
	}
	if err := c.CachePut(ctx, "ns", "c", "k", []byte("v1"), 1500*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if v, found, err := c.CacheGet(ctx, "ns", "c", "k"); err != nil || !found || string(v) != "v1" {
		t.Fatalf("get: %q %v %v", v, found, err)
	}
	fb.mu.Lock()
	ttl := fb.ttls["c/k"]
	fb.mu.Unlock()
	if ttl != 2 {
		t.Fatalf("ttl_ms %d, want 2 (rounded up)", ttl)
	}
	// An empty value is found and non-nil; a nil value is stored as empty.
	for _, v := range [][]byte{{}, nil} {
		if err := c.CachePut(ctx, "ns", "c", "empty", v, 0); err != nil {
			t.Fatal(err)
		}
		got, found, err := c.CacheGet(ctx, "ns", "c", "empty")
		if err != nil || !found || got == nil || len(got) != 0 {
			t.Fatalf("empty: %q (nil=%v) %v %v", got, got == nil, found, err)
		}
	}
	if v, found, err := c.CacheDelete(ctx, "ns", "c", "k"); err != nil || !found || string(v) != "v1" {
		t.Fatalf("delete: %q %v %v", v, found, err)
	}
	if v, found, err := c.CacheDelete(ctx, "ns", "c", "k"); err != nil || found || v != nil {
		t.Fatalf("second delete: %q %v %v", v, found, err)
	}
}

func TestCacheRefusalAndRecovery(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	cfg := fb.config()
	cfg.CacheStreams = 1 // every call on the stream the refusal ended
	c, err := Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	be := asBroker(t, c.CachePut(ctx, "ns", "c", "forbidden", []byte("x"), 0))
	if be.Code != wire.CodeForbidden {
		t.Fatalf("got %+v", be)
	}
	// This fake also ends the stream after the refusal. Only the call that
	// races that end can fail, with a stream error; the next one gets a
	// fresh stream.
	if err := c.CachePut(ctx, "ns", "c", "ok", []byte("x"), 0); err != nil {
		if !isPlainStreamError(err) {
			t.Fatalf("call racing the end of the stream: %v", err)
		}
		if err := c.CachePut(ctx, "ns", "c", "ok", []byte("x"), 0); err != nil {
			t.Fatalf("after refusal: %v", err)
		}
	}
	// The fake did not advertise FEATURE_CACHE_DELETE.
	_, _, err = c.CacheDelete(ctx, "ns", "c", "ok")
	if be := asBroker(t, err); be.Code != wire.CodeUnsupported {
		t.Fatalf("got %+v", be)
	}
	if _, _, err := c.CacheGet(ctx, "ns", "", "k"); err == nil {
		t.Fatal("missing cache name accepted")
	}
	if err := c.CachePut(ctx, "ns", "c", "k", nil, -time.Second); err == nil {
		t.Fatal("negative ttl accepted")
	}
}

func TestCacheCancelledWaitFreesTheWorker(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	cfg := fb.config()
	cfg.CacheStreams = 1
	c, err := Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errC := make(chan error, 1)
	go func() {
		_, _, err := c.CacheGet(ctx, "ns", "c", "hang")
		errC <- err
	}()
	cancel()
	if err := <-errC; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if err := c.CachePut(context.Background(), "ns", "c", "k", []byte("v"), 0); err != nil {
		t.Fatalf("the only worker is still stuck: %v", err)
	}
	if got := inFlight(t, c); got != 0 {
		t.Fatalf("%d requests still pending", got)
	}
}
