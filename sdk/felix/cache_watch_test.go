package felix

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

const watchFeatures = wire.FeatureCacheWatch | wire.FeatureCacheWatchRetained

// watchFake starts a fake that serves cache watches and connects to it.
func watchFake(t *testing.T, features uint64) (*fakeBroker, *Client) {
	t.Helper()
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, features: features, watches: make(chan *fakeWatch, 16),
		tokens: map[string]bool{"alice": true}})
	return fb, connect(t, fb)
}

// watch opens a watch on ns/c and returns it with the fake's side.
func watch(t *testing.T, c *Client, fb *fakeBroker, f CacheWatchFilter, opts ...WatchOption) (*CacheWatch, *fakeWatch) {
	t.Helper()
	w, err := c.WatchCache(context.Background(), "ns", "c", f, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w, fb.nextWatch()
}

func nextItem(t *testing.T, w *CacheWatch) CacheWatchItem {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	it, err := w.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return it
}

func nextWatchErr(t *testing.T, w *CacheWatch) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		it, err := w.Next(ctx)
		if err != nil {
			return err
		}
		t.Fatalf("unexpected item %v", it)
	}
}

func TestWatchCacheDeliversInOrder(t *testing.T) {
	fb, c := watchFake(t, watchFeatures)
	w, fw := watch(t, c, fb, WatchKey("k"))
	if m := fw.msg; m.Key != "k" || m.Prefix || m.Retained || m.FromOffset != nil || m.Cache != "c" || m.Namespace != "ns" {
		t.Fatalf("request %+v", m)
	}
	if w.ID() != fw.id || w.Resnapshot() || w.ResumeOffset() != fakeWatchNext {
		t.Fatalf("id %d (fake %d), resnapshot %v, resume %d", w.ID(), fw.id, w.Resnapshot(), w.ResumeOffset())
	}
	expiry := uint64(1_700_000_000_000)
	withTTL := put(107, "k", "v3")
	withTTL.ExpiresAtMs = &expiry
	fw.send(t, put(101, "k", "v1"), del(104, "k"), put(105, "k", ""), withTTL,
		&wire.CacheChange{Offset: 120, Op: wire.CacheOpExpire, Key: "k"})
	want := []struct {
		off   uint64
		op    string
		value []byte
	}{{101, "put", []byte("v1")}, {104, "delete", nil}, {105, "put", []byte{}}, {107, "put", []byte("v3")}, {120, "expire", nil}}
	for _, wnt := range want {
		it := nextItem(t, w)
		if it.Offset != wnt.off || it.Op != wnt.op || it.Key != "k" || string(it.Value) != string(wnt.value) ||
			(it.Value == nil) != (wnt.value == nil) || it.Retained || it.StateComplete {
			t.Fatalf("got %v, want %d %s %q", it, wnt.off, wnt.op, wnt.value)
		}
		if got := w.ResumeOffset(); got != wnt.off+1 {
			t.Fatalf("resume after %d: %d", wnt.off, got)
		}
		if wnt.off == 107 && !it.ExpiresAt.Equal(time.UnixMilli(int64(expiry))) {
			t.Fatalf("expires at %v", it.ExpiresAt)
		}
	}
}

func TestWatchCacheRetainedThenChanges(t *testing.T) {
	fb, c := watchFake(t, watchFeatures)
	w, fw := watch(t, c, fb, WatchPrefix("user-"), WatchRetained())
	if !fw.msg.Retained || !fw.msg.Prefix || fw.msg.Key != "user-" {
		t.Fatalf("request %+v", fw.msg)
	}
	a, b := put(40, "user-a", "A"), put(60, "user-b", "B")
	a.Retained, b.Retained = true, true
	fw.send(t, a, b, &wire.CacheWatchState{Offset: 100, Count: 2}, put(103, "user-a", "A2"))
	for _, key := range []string{"user-a", "user-b"} {
		it := nextItem(t, w)
		if !it.Retained || it.Key != key || w.ResumeOffset() != fakeWatchNext {
			t.Fatalf("got %v, resume %d", it, w.ResumeOffset())
		}
	}
	if it := nextItem(t, w); !it.StateComplete || it.Count != 2 || it.Offset != 100 || w.ResumeOffset() != 100 {
		t.Fatalf("state item %+v, resume %d", it, w.ResumeOffset())
	}
	if it := nextItem(t, w); it.Retained || it.Offset != 103 || w.ResumeOffset() != 104 {
		t.Fatalf("change %v, resume %d", it, w.ResumeOffset())
	}
}

func TestWatchCacheFromOffset(t *testing.T) {
	fb, c := watchFake(t, watchFeatures)
	w, fw := watch(t, c, fb, WatchKey("k"), WatchFrom(70))
	if fw.msg.FromOffset == nil || *fw.msg.FromOffset != 70 || w.Resnapshot() || w.ResumeOffset() != 70 {
		t.Fatalf("request %+v, resnapshot %v, resume %d", fw.msg, w.Resnapshot(), w.ResumeOffset())
	}
	old, _ := watch(t, c, fb, WatchKey("k"), WatchFrom(10))
	if !old.Resnapshot() || old.ResumeOffset() != 10 {
		t.Fatalf("from 10: resnapshot %v, resume %d", old.Resnapshot(), old.ResumeOffset())
	}
}

func TestWatchCacheLagged(t *testing.T) {
	var lagged *CacheWatchLagged
	w, err := endAfterPut(t, func(_ *fakeBroker, fw *fakeWatch) {
		fw.send(t, &wire.CacheWatchLagged{WatchID: fw.id, ResumeFrom: 150})
	})
	if !errors.As(err, &lagged) || lagged.ResumeFrom != 150 || lagged.WatchID != w.ID() {
		t.Fatalf("got %v", err)
	}
}

// endAfterPut starts a watch of "k", has Next return a put at 101, ends
// the watch with end and returns it and why it ended. The put moved the
// resume offset to 102 for good.
func endAfterPut(t *testing.T, end func(*fakeBroker, *fakeWatch)) (*CacheWatch, error) {
	t.Helper()
	fb, c := watchFake(t, watchFeatures)
	w, fw := watch(t, c, fb, WatchKey("k"))
	fw.send(t, put(101, "k", "v"))
	nextItem(t, w)
	end(fb, fw)
	err := nextWatchErr(t, w)
	if w.ResumeOffset() != 102 {
		t.Fatalf("resume %d", w.ResumeOffset())
	}
	return w, err
}

func TestWatchCacheErrorFrame(t *testing.T) {
	_, err := endAfterPut(t, func(_ *fakeBroker, fw *fakeWatch) {
		fw.send(t, wire.NewError(wire.CodeNotFound, "cache deleted").ErrorMessage(true))
	})
	if be := asBroker(t, err); be.Code != wire.CodeNotFound {
		t.Fatalf("code %s", be.Code)
	}
}

func TestWatchCacheMalformedChangeEndsWatch(t *testing.T) {
	fb, c := watchFake(t, watchFeatures)
	w, fw := watch(t, c, fb, WatchKey("k"))
	fw.send(t, &wire.CacheChange{Offset: 101, Op: "rename", Key: "k"})
	if err := nextWatchErr(t, w); !errors.Is(err, ErrSubscriptionLost) {
		t.Fatalf("got %v", err)
	}
}

// A frame that is not a message at all ends the watch as a broken
// stream, reset so the broker lets it go, not as a lost connection.
func TestWatchCacheGarbageFrameEndsWatch(t *testing.T) {
	fb, c := watchFake(t, watchFeatures)
	w, fw := watch(t, c, fb, WatchKey("k"))
	if _, err := fw.es.Write(wire.AppendFrame(nil, 0, []byte("not json"))); err != nil {
		t.Fatal(err)
	}
	err := nextWatchErr(t, w)
	if !errors.Is(err, ErrSubscriptionLost) || !strings.Contains(err.Error(), "bad event frame") {
		t.Fatalf("got %v", err)
	}
	select {
	case <-fw.es.Context().Done(): // the client stopped the stream
	case <-time.After(5 * time.Second):
		t.Fatal("the broken stream was not reset")
	}
}

func TestWatchCacheRefused(t *testing.T) {
	fb, c := watchFake(t, watchFeatures)
	_, err := c.WatchCache(context.Background(), "ns", "missing", WatchKey("k"))
	if be := asBroker(t, err); be.Code != wire.CodeNotFound {
		t.Fatalf("code %s", be.Code)
	}
	_, err = c.WatchCache(context.Background(), "ns", "c", WatchKey(""))
	if err == nil || !wasNotSent(err) {
		t.Fatalf("empty key: %v", err)
	}
	_, err = c.WatchCache(context.Background(), "ns", "c", WatchKey("k"), WatchFrom(1), WatchRetained())
	if err == nil || !wasNotSent(err) {
		t.Fatalf("from and retained: %v", err)
	}
	_ = fb
}

func TestWatchCacheNeedsFeatures(t *testing.T) {
	_, bare := watchFake(t, 0)
	_, err := bare.WatchCache(context.Background(), "ns", "c", WatchKey("k"))
	if be := asBroker(t, err); be.Code != wire.CodeUnsupported || !wasNotSent(err) || bare.SupportsCacheWatch() {
		t.Fatalf("without FEATURE_CACHE_WATCH: %v", err)
	}
	_, c := watchFake(t, wire.FeatureCacheWatch)
	_, err = c.WatchCache(context.Background(), "ns", "c", WatchKey("k"), WatchRetained())
	if be := asBroker(t, err); be.Code != wire.CodeUnsupported || !wasNotSent(err) {
		t.Fatalf("retained without FEATURE_CACHE_WATCH_RETAINED: %v", err)
	}
}

func TestWatchCacheCloseStopsStream(t *testing.T) {
	fb, c := watchFake(t, watchFeatures)
	w, fw := watch(t, c, fb, WatchKey("k"))
	fw.send(t, put(101, "k", "v"))
	nextItem(t, w) // the event stream is attached
	fw.send(t, put(102, "k", "queued"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	// The broker sees STOP_SENDING: its writes fail soon.
	deadline := time.Now().Add(5 * time.Second)
	for writeMsg(fw.es, put(102, "k", "x")) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the event stream was not stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Changes sent before anyone calls Next wait in the stream, in order.
func TestWatchCacheChangesWaitForNext(t *testing.T) {
	fb, c := watchFake(t, watchFeatures)
	w, fw := watch(t, c, fb, WatchKey("k"))
	for i := range uint64(5) {
		fw.send(t, put(101+i, "k", "0123456789"))
	}
	for i := range uint64(5) {
		if it := nextItem(t, w); it.Offset != 101+i {
			t.Fatalf("item %d: %v", i, it)
		}
	}
}

func TestWatchCacheConnectionLost(t *testing.T) {
	_, err := endAfterPut(t, func(fb *fakeBroker, _ *fakeWatch) { fb.Kill() })
	if !errors.Is(err, ErrSubscriptionLost) {
		t.Fatalf("got %v", err)
	}
}

func TestWatchCacheClientCloseEndsWatch(t *testing.T) {
	fb, c := watchFake(t, watchFeatures)
	w, _ := watch(t, c, fb, WatchKey("k"))
	_ = c.Close()
	if err := nextWatchErr(t, w); !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v", err)
	}
}

func TestHandleWatchCloseLeavesNoGoroutines(t *testing.T) {
	fb, gw := watchFake(t, watchFeatures)
	ctx := context.Background()
	if _, _, err := gw.CacheGet(ctx, "ns", "c", "k"); err != nil {
		t.Fatal(err)
	}
	before := sdkGoroutines()
	h, err := gw.WithIdentityToken("acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	w, err := h.WatchCache(ctx, "ns", "c", WatchKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	fw := fb.nextWatch()
	fw.send(t, put(101, "k", "v"))
	nextItem(t, w)
	_ = h.Close()
	if err := nextWatchErr(t, w); !errors.Is(err, ErrClosed) {
		t.Fatalf("after handle Close: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for sdkGoroutines() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d client goroutines, %d before:\n%s", sdkGoroutines(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := gw.CacheGet(ctx, "ns", "c", "k"); err != nil {
		t.Fatalf("gateway after the handle closed: %v", err)
	}
}
