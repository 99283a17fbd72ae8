package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// watchNode starts a node with cache c, and a client that can put to it.
func watchNode(t *testing.T, ctx context.Context, dir, cache string) (*node, *felix.Client) {
	t.Helper()
	n := startServeIn(t, dir)
	n.mustFelix(ctx, "admin", "cache", "create", cache)
	return n, cacheReady(t, ctx, n, cache)
}

// cacheReady connects to n once cache has reached its broker.
func cacheReady(t *testing.T, ctx context.Context, n *node, cache string) *felix.Client {
	t.Helper()
	c := n.connect(ctx, n.adminToken())
	eventually(t, 15*time.Second, "the cache to reach the broker", func() bool {
		return c.CachePut(ctx, "default", cache, "ready", []byte("1"), 0) == nil
	})
	return c
}

// itemSource is a *felix.CacheWatch or a *felix.ClusterCacheWatch.
type itemSource interface {
	Next(ctx context.Context) (felix.CacheWatchItem, error)
}

// nextItem returns the watch's next item within 10 s.
func nextItem(t *testing.T, ctx context.Context, w itemSource) felix.CacheWatchItem {
	t.Helper()
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	it, err := w.Next(ictx)
	if err != nil {
		t.Fatalf("watch Next: %v", err)
	}
	return it
}

// change is what a test expects of one watch item.
type change struct{ op, key, value string }

func (c change) String() string { return fmt.Sprintf("%s %s=%q", c.op, c.key, c.value) }

func itemChange(it felix.CacheWatchItem) change {
	return change{op: it.Op, key: it.Key, value: string(it.Value)}
}

// expectChanges reads len(want) items and checks them and that offsets
// increase.
func expectChanges(t *testing.T, ctx context.Context, w itemSource, want ...change) uint64 {
	t.Helper()
	var last uint64
	for i, wc := range want {
		it := nextItem(t, ctx, w)
		if got := itemChange(it); got != wc || it.Retained || it.StateComplete {
			t.Fatalf("item %d: got %v (%+v), want %v", i, got, it, wc)
		}
		if i > 0 && it.Offset <= last {
			t.Fatalf("item %d: offset %d after %d", i, it.Offset, last)
		}
		last = it.Offset
	}
	return last
}

// currentValues reads a retained start or a resnapshot: the Retained
// items, then the StateComplete item, which it returns with them.
func currentValues(t *testing.T, ctx context.Context, w itemSource) ([]change, felix.CacheWatchItem) {
	t.Helper()
	var current []change
	for {
		it := nextItem(t, ctx, w)
		if it.StateComplete {
			return current, it
		}
		if !it.Retained {
			t.Fatalf("a change %+v before the current values ended", it)
		}
		current = append(current, itemChange(it))
	}
}

func TestCacheWatchSeesEveryChangeInOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, c := watchNode(t, ctx, t.TempDir(), "watched")
	key, err := c.WatchCache(ctx, "default", "watched", felix.WatchKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	defer key.Close()
	prefix, err := c.WatchCache(ctx, "default", "watched", felix.WatchPrefix("user-"))
	if err != nil {
		t.Fatal(err)
	}
	defer prefix.Close()
	var want []change
	for i := range 20 {
		v := fmt.Sprintf("v%d", i)
		if err := c.CachePut(ctx, "default", "watched", "k", []byte(v), 0); err != nil {
			t.Fatal(err)
		}
		if err := c.CachePut(ctx, "default", "watched", fmt.Sprintf("user-%d", i%3), []byte(v), 0); err != nil {
			t.Fatal(err)
		}
		want = append(want, change{"put", "k", v})
		if i%5 == 4 {
			if _, _, err := c.CacheDelete(ctx, "default", "watched", "k"); err != nil {
				t.Fatal(err)
			}
			want = append(want, change{"delete", "k", ""})
		}
	}
	last := expectChanges(t, ctx, key, want...)
	if key.ResumeOffset() != last+1 {
		t.Fatalf("resume offset %d after change %d", key.ResumeOffset(), last)
	}
	for i := range 20 {
		it := nextItem(t, ctx, prefix)
		if got, w := itemChange(it), (change{"put", fmt.Sprintf("user-%d", i%3), fmt.Sprintf("v%d", i)}); got != w {
			t.Fatalf("prefix item %d: %v, want %v", i, got, w)
		}
	}
}

func TestCacheWatchResumeSeesExactlyWhatWasMissed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, c := watchNode(t, ctx, t.TempDir(), "resumed")
	w, err := c.WatchCache(ctx, "default", "resumed", felix.WatchKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	put := func(v string) {
		t.Helper()
		if err := c.CachePut(ctx, "default", "resumed", "k", []byte(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	put("a")
	put("b")
	expectChanges(t, ctx, w, change{"put", "k", "a"}, change{"put", "k", "b"})
	from := w.ResumeOffset()
	w.Close() // the watcher goes away
	put("c")
	if _, _, err := c.CacheDelete(ctx, "default", "resumed", "k"); err != nil {
		t.Fatal(err)
	}
	put("d")

	again, err := c.WatchCache(ctx, "default", "resumed", felix.WatchKey("k"), felix.WatchFrom(from))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Resnapshot() {
		t.Fatal("a resume inside the history was answered with a resnapshot")
	}
	put("e")
	expectChanges(t, ctx, again, change{"put", "k", "c"}, change{"delete", "k", ""}, change{"put", "k", "d"},
		change{"put", "k", "e"})
	// Nothing else: no repeat of a or b.
	ictx, icancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer icancel()
	if it, err := again.Next(ictx); err == nil {
		t.Fatalf("unexpected item %+v", it)
	}
}

func TestCacheWatchRetainedStartsFromCurrentValues(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, c := watchNode(t, ctx, t.TempDir(), "retained")
	for k, v := range map[string]string{"user-1": "one", "user-2": "two", "other": "x"} {
		if err := c.CachePut(ctx, "default", "retained", k, []byte(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	w, err := c.WatchCache(ctx, "default", "retained", felix.WatchPrefix("user-"), felix.WatchRetained())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got := map[string]string{}
	var state felix.CacheWatchItem
	for !state.StateComplete {
		it := nextItem(t, ctx, w)
		switch {
		case it.StateComplete:
			state = it
		case !it.Retained:
			t.Fatalf("a change %+v before the current values ended", it)
		default:
			got[it.Key] = string(it.Value)
		}
	}
	if len(got) != 2 || got["user-1"] != "one" || got["user-2"] != "two" || state.Count != 2 {
		t.Fatalf("current values %v, state %+v", got, state)
	}
	if err := c.CachePut(ctx, "default", "retained", "user-1", []byte("uno"), 0); err != nil {
		t.Fatal(err)
	}
	if off := expectChanges(t, ctx, w, change{"put", "user-1", "uno"}); off < state.Offset {
		t.Fatalf("change offset %d before the state offset %d", off, state.Offset)
	}
}

// TestCacheWatchResumeAcrossBrokerKillReadsTheLog: the cache is
// log-backed (felix serve has a data directory), so after a SIGKILL and a
// restart the value is still there and a watch resuming at its offset
// from the old process gets the changes from there on, read from the
// log: no resnapshot, no gap, no duplicate.
func TestCacheWatchResumeAcrossBrokerKillReadsTheLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	n, c := watchNode(t, ctx, dir, "survivor")
	w, err := c.WatchCache(ctx, "default", "survivor", felix.WatchKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CachePut(ctx, "default", "survivor", "k", []byte("before"), 0); err != nil {
		t.Fatal(err)
	}
	old := expectChanges(t, ctx, w, change{"put", "k", "before"})
	from := w.ResumeOffset()

	n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
	var lost error
	for lost == nil {
		_, lost = w.Next(ctx)
	}
	if !errors.Is(lost, felix.ErrSubscriptionLost) {
		t.Fatalf("watch over a killed broker ended with %v", lost)
	}

	m := startServeIn(t, dir)
	c2 := cacheReady(t, ctx, m, "survivor")
	if v, found, err := c2.CacheGet(ctx, "default", "survivor", "k"); err != nil || !found || string(v) != "before" {
		t.Fatalf("value after the restart: %q %v %v", v, found, err)
	}
	if err := c2.CachePut(ctx, "default", "survivor", "k", []byte("after"), 0); err != nil {
		t.Fatal(err)
	}
	again, err := c2.WatchCache(ctx, "default", "survivor", felix.WatchKey("k"), felix.WatchFrom(from))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Resnapshot() {
		t.Fatalf("resuming from offset %d of the old process was a resnapshot", from)
	}
	if off := expectChanges(t, ctx, again, change{"put", "k", "after"}); off <= old {
		t.Fatalf("the change after the restart has offset %d, not after the old offset %d", off, old)
	}
	if err := c2.CachePut(ctx, "default", "survivor", "k", []byte("later"), 0); err != nil {
		t.Fatal(err)
	}
	expectChanges(t, ctx, again, change{"put", "k", "later"})
}

// A ClusterClient watch carries on by itself over a broker SIGKILLed and
// restarted on the same address: the cache is log-backed, so the new
// process resumes the watch from the log at its resume offset, and the
// watch goes on with the changes made since, no resnapshot.
func TestClusterCacheWatchCarriesOnAcrossBrokerKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir, addr := t.TempDir(), freeUDPAddr(t)
	n := startServeOn(t, dir, addr)
	n.mustFelix(ctx, "admin", "cache", "create", "carried")
	c := cacheReady(t, ctx, n, "carried")
	cc, err := felix.ConnectCluster(ctx, []string{addr}, n.sdkConfig(n.adminToken()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	w, err := cc.WatchCache(ctx, "default", "carried", felix.WatchKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := c.CachePut(ctx, "default", "carried", "k", []byte("before"), 0); err != nil {
		t.Fatal(err)
	}
	old := expectChanges(t, ctx, w, change{"put", "k", "before"})

	if err := n.stop(syscall.SIGKILL, 10*time.Second); err != nil && !strings.Contains(err.Error(), "killed") {
		t.Fatalf("kill: %v", err)
	}
	m := startServeOn(t, dir, addr)
	c2 := cacheReady(t, ctx, m, "carried")
	if err := c2.CachePut(ctx, "default", "carried", "k", []byte("after"), 0); err != nil {
		t.Fatal(err)
	}
	// The watch notices the kill on this Next and resumes by itself.
	if after := expectChanges(t, ctx, w, change{"put", "k", "after"}); after <= old {
		t.Fatalf("the change after the restart has offset %d, not after the old change %d", after, old)
	}
	for _, v := range []string{"later", "latest"} {
		if err := c2.CachePut(ctx, "default", "carried", "k", []byte(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	last := expectChanges(t, ctx, w, change{"put", "k", "later"}, change{"put", "k", "latest"})
	if w.Resumes() != 1 || w.ResumeOffset() != last+1 {
		t.Fatalf("resumes %d, resume offset %d after change %d", w.Resumes(), w.ResumeOffset(), last)
	}
	// Nothing else: no repeat.
	ictx, icancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer icancel()
	if it, err := w.Next(ictx); err == nil {
		t.Fatalf("unexpected item %+v", it)
	}
}

func TestCacheWatchCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n, c := watchNode(t, ctx, t.TempDir(), "cli-watched")
	wait := n.startFelix(ctx, "cache", "watch", "cli-watched", "k", "--retained", "--count", "1", "-o", "json")
	type exit struct {
		out string
		err error
	}
	done := make(chan exit, 1)
	go func() {
		out, err := wait()
		done <- exit{out, err}
	}()
	// Put until the watch has seen a change: puts made before it began
	// show up as its retained value instead.
	for i := 0; ; i++ {
		select {
		case e := <-done:
			if e.err != nil {
				t.Fatalf("felix cache watch: %v", e.err)
			}
			if !strings.Contains(e.out, `"state_complete":true`) || !strings.Contains(e.out, `"op":"put"`) ||
				!strings.Contains(e.out, `"key":"k"`) {
				t.Fatalf("output %q", e.out)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if err := c.CachePut(ctx, "default", "cli-watched", "k", []byte(fmt.Sprint(i)), 0); err != nil {
			t.Fatal(err)
		}
	}
}
