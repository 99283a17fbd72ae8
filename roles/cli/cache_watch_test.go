package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/felixmq/felix/sdk/felix"
)

// fakeWatchSpec is what the fake's WatchCache hands out, and what it was
// asked for.
type fakeWatchSpec struct {
	items   []felix.CacheWatchItem
	endErr  error // after items; nil blocks until ctx ends
	resnap  bool
	start   uint64
	cache   string
	filter  felix.CacheWatchFilter
	options int
}

func (f *fakeBroker) WatchCache(_ context.Context, ns, cache string, flt felix.CacheWatchFilter, opts ...felix.WatchOption) (cacheWatcher, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watch.cache, f.watch.filter, f.watch.options = cache, flt, len(opts)
	return &fakeWatcher{spec: f.watch, resume: f.watch.start}, nil
}

type fakeWatcher struct {
	spec   fakeWatchSpec
	resume uint64
	closed bool
}

func (w *fakeWatcher) Next(ctx context.Context) (felix.CacheWatchItem, error) {
	if len(w.spec.items) > 0 {
		it := w.spec.items[0]
		w.spec.items = w.spec.items[1:]
		if !it.Retained {
			w.resume = it.Offset + 1
		}
		return it, nil
	}
	if w.spec.endErr != nil {
		return felix.CacheWatchItem{}, w.spec.endErr
	}
	<-ctx.Done()
	return felix.CacheWatchItem{}, ctx.Err()
}

func (w *fakeWatcher) ResumeOffset() uint64 { return w.resume }
func (w *fakeWatcher) Resnapshot() bool     { return w.spec.resnap }
func (w *fakeWatcher) Close() error         { w.closed = true; return nil }

func watchItems() []felix.CacheWatchItem {
	return []felix.CacheWatchItem{
		{Offset: 40, Op: "put", Key: "user-1", Value: []byte("old"), Retained: true},
		{Offset: 100, StateComplete: true, Count: 1},
		{Offset: 101, Op: "put", Key: "user-1", Value: []byte("v1")},
		{Offset: 104, Op: "delete", Key: "user-1"},
		{Offset: 107, Op: "put", Key: "user-2", Value: []byte{0xff}},
	}
}

func TestCacheWatchText(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	fb := &fakeBroker{watch: fakeWatchSpec{items: watchItems(), start: 100}}
	r := run(t, fb.toolkit(), nil, "cache", "watch", "sessions", "user-", "--prefix", "--retained", "--count", "2", "--data-dir", dir)
	want := "40 retained user-1 old\n100 state-complete 1\n101 put user-1 v1\n104 delete user-1\n"
	if r.err != nil || r.stdout != want {
		t.Fatalf("got %q, %v", r.stdout, r.err)
	}
	if fb.watch.cache != "sessions" || fb.watch.filter != felix.WatchPrefix("user-") || fb.watch.options != 1 {
		t.Fatalf("asked for %+v", fb.watch)
	}
	if !strings.Contains(r.stderr, "watching from offset 100") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func TestCacheWatchJSONAndCacheFlag(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	fb := &fakeBroker{watch: fakeWatchSpec{items: watchItems()[2:], start: 90, resnap: true}}
	r := run(t, fb.toolkit(), nil, "cache", "watch", "--cache", "sessions", "user-1", "--from", "90", "--count", "3", "-o", "json", "--data-dir", dir)
	want := `{"key":"user-1","offset":101,"op":"put","value":"v1"}` + "\n" +
		`{"key":"user-1","offset":104,"op":"delete"}` + "\n" +
		`{"key":"user-2","offset":107,"op":"put","value_base64":"/w=="}` + "\n"
	if r.err != nil || r.stdout != want {
		t.Fatalf("got %q, %v", r.stdout, r.err)
	}
	if fb.watch.filter != felix.WatchKey("user-1") || fb.watch.options != 1 || !strings.Contains(r.stderr, "current values") {
		t.Fatalf("asked for %+v; stderr %q", fb.watch, r.stderr)
	}
}

func TestCacheWatchLaggedExitsNonzero(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	fb := &fakeBroker{watch: fakeWatchSpec{items: watchItems()[2:3], endErr: &felix.CacheWatchLagged{WatchID: 7, ResumeFrom: 150}}}
	r := run(t, fb.toolkit(), nil, "cache", "watch", "sessions", "user-1", "--data-dir", dir)
	if r.exitCode() != 1 || !strings.Contains(r.message(), "resume with --from 150") || r.stdout != "101 put user-1 v1\n" {
		t.Fatalf("exit %d %q stdout %q", r.exitCode(), r.message(), r.stdout)
	}
}

func TestCacheWatchUsage(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	fb := &fakeBroker{}
	for _, args := range [][]string{
		{"sessions"},
		{"sessions", "a", "b"},
		{"sessions", "k", "--from", "x"},
		{"sessions", "k", "--from", "1", "--retained"},
	} {
		r := run(t, fb.toolkit(), nil, append(append([]string{"cache", "watch"}, args...), "--data-dir", dir)...)
		if r.exitCode() != 2 {
			t.Fatalf("%v: exit %d %q", args, r.exitCode(), r.message())
		}
	}
}
