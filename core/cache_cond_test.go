package core

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

func mustPutIf(t *testing.T, c *Cache, key, value string, cond CacheCondition, now time.Time) CondResult {
	t.Helper()
	r, err := c.PutIf(key, []byte(value), 0, cond, now)
	if err != nil {
		t.Fatalf("PutIf %q: %v", key, err)
	}
	return r
}

func TestCachePutIfAbsentAndVersion(t *testing.T) {
	_, c := newTestCache(t, wire.CacheSpec{})
	won := mustPutIf(t, c, "k", "v1", CondAbsent(), testNow)
	if !won.Applied || !won.HasVersion {
		t.Fatalf("put_if absent on an absent key: %+v", won)
	}
	if v, ver, ok := c.GetVersioned("k", testNow); !ok || string(v) != "v1" || ver != won.Version {
		t.Fatalf("GetVersioned = %q %d %v, want v1 at %d", v, ver, ok, won.Version)
	}
	if r := mustPutIf(t, c, "k", "v2", CondAbsent(), testNow); r != (CondResult{Version: won.Version, HasVersion: true}) {
		t.Fatalf("put_if absent on a live key: %+v, want refused at %d", r, won.Version)
	}
	next := mustPutIf(t, c, "k", "v3", CondVersion(won.Version), testNow)
	if !next.Applied || next.Version <= won.Version {
		t.Fatalf("put_if at the current version: %+v after %d", next, won.Version)
	}
	if r := mustPutIf(t, c, "k", "v4", CondVersion(won.Version), testNow); r != (CondResult{Version: next.Version, HasVersion: true}) {
		t.Fatalf("put_if at a stale version: %+v, want refused at %d", r, next.Version)
	}
	if r := mustPutIf(t, c, "other", "v", CondVersion(next.Version), testNow); r != (CondResult{}) {
		t.Fatalf("put_if at a version on an absent key: %+v, want refused without a version", r)
	}
	if v, ver, _ := c.GetVersioned("k", testNow); string(v) != "v3" || ver != next.Version {
		t.Fatalf("after refusals: %q at %d", v, ver)
	}
	// A plain put gives the key a new version too.
	c.Put("k", []byte("v5"), 0, testNow)
	if _, ver, _ := c.GetVersioned("k", testNow); ver <= next.Version {
		t.Fatalf("plain put left version %d (was %d)", ver, next.Version)
	}
}

func TestCacheDeleteIf(t *testing.T) {
	_, c := newTestCache(t, wire.CacheSpec{})
	r := mustPutIf(t, c, "k", "v", CondAbsent(), testNow)
	if got, err := c.DeleteIf("k", r.Version+1, testNow); err != nil || got != (CondResult{Version: r.Version, HasVersion: true}) {
		t.Fatalf("delete_if at a wrong version: %+v %v", got, err)
	}
	if _, ok := c.Get("k", testNow); !ok {
		t.Fatal("a refused delete_if removed the key")
	}
	if got, err := c.DeleteIf("k", r.Version, testNow); err != nil || got != (CondResult{Applied: true}) {
		t.Fatalf("delete_if at the version: %+v %v", got, err)
	}
	if _, ok := c.Get("k", testNow); ok {
		t.Fatal("an applied delete_if left the key")
	}
	if got, _ := c.DeleteIf("k", r.Version, testNow); got != (CondResult{}) {
		t.Fatalf("delete_if on an absent key: %+v", got)
	}
	if n, b := c.Len(); n != 0 || b != 0 {
		t.Fatalf("after delete_if: %d entries %d bytes", n, b)
	}
}

// A refused condition writes nothing and takes no offset: the next
// applied write's offset follows the last applied one, and a watch sees
// only applied writes.
func TestCacheRefusedConditionTakesNoOffset(t *testing.T) {
	_, c := newWatchCache(t, Config{})
	w, _ := mustWatch(t, c, CacheWatchOptions{Prefix: true})
	first := mustPutIf(t, c, "k", "v1", CondAbsent(), testNow)
	mustPutIf(t, c, "k", "x", CondAbsent(), testNow)
	mustPutIf(t, c, "k", "x", CondVersion(first.Version+7), testNow)
	mustPutIf(t, c, "absent", "x", CondVersion(first.Version), testNow)
	c.DeleteIf("k", first.Version+7, testNow)
	second := mustPutIf(t, c, "k", "v2", CondVersion(first.Version), testNow)
	if second.Version != first.Version+1 {
		t.Fatalf("after refusals the next version is %d, want %d", second.Version, first.Version+1)
	}
	if r, _ := c.DeleteIf("k", second.Version, testNow); !r.Applied {
		t.Fatalf("delete_if refused: %+v", r)
	}
	var l watchLog
	drainWatch(w, &l)
	var got []string
	for _, ch := range l.changes {
		got = append(got, fmt.Sprintf("%d %s %s=%s", ch.Offset, ch.Op, ch.Key, ch.Value))
	}
	want := []string{
		fmt.Sprintf("%d put k=v1", first.Version),
		fmt.Sprintf("%d put k=v2", second.Version),
		fmt.Sprintf("%d delete k=", second.Version+1),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("watch saw\n %q\nwant\n %q", got, want)
	}
}

// An expired entry is absent to a condition; checking it records
// nothing (no expiry change), and put_if absent replaces it.
func TestCacheConditionExpiredIsAbsent(t *testing.T) {
	_, c := newWatchCache(t, Config{})
	r, err := c.PutIf("k", []byte("v"), time.Second, CondAbsent(), testNow)
	if err != nil || !r.Applied {
		t.Fatalf("put_if with ttl: %+v %v", r, err)
	}
	w, _ := mustWatch(t, c, CacheWatchOptions{Key: "k"})
	later := testNow.Add(time.Second)
	if got := mustPutIf(t, c, "k", "x", CondVersion(r.Version), later); got != (CondResult{}) {
		t.Fatalf("put_if at the version of an expired entry: %+v", got)
	}
	if got, _ := c.DeleteIf("k", r.Version, later); got != (CondResult{}) {
		t.Fatalf("delete_if of an expired entry: %+v", got)
	}
	var l watchLog
	drainWatch(w, &l)
	if len(l.changes) != 0 {
		t.Fatalf("refusals recorded %d changes", len(l.changes))
	}
	again := mustPutIf(t, c, "k", "v2", CondAbsent(), later)
	if !again.Applied || again.Version != r.Version+1 {
		t.Fatalf("put_if absent over an expired entry: %+v (first at %d)", again, r.Version)
	}
	if n, b := c.Len(); n != 1 || b != int64(len("k")+len("v2")) {
		t.Fatalf("after replacing the expired entry: %d entries %d bytes", n, b)
	}
	if _, _, ok := c.GetVersioned("gone", later); ok {
		t.Fatal("GetVersioned found an absent key")
	}
}

// Conditional puts keep Put's bounds and refusals; a refused condition is
// answered before the bounds are looked at.
func TestCachePutIfBounds(t *testing.T) {
	_, c := newTestCache(t, wire.CacheSpec{MaxEntries: 1, MaxBytes: 16})
	var we *wire.Error
	if _, err := c.PutIf("k", []byte("v"), -time.Second, CondAbsent(), testNow); !errors.As(err, &we) || we.Code != wire.CodeInvalidRequest {
		t.Fatalf("negative ttl: %v", err)
	}
	if _, err := c.PutIf("k", make([]byte, 20), 0, CondAbsent(), testNow); !errors.As(err, &we) || we.Code != wire.CodeInvalidRequest || we.Detail["reason"] != "value_too_large" {
		t.Fatalf("oversized entry: %v", err)
	}
	held := mustPutIf(t, c, "a", "v", CondAbsent(), testNow)
	if _, err := c.PutIf("b", []byte("v"), 0, CondAbsent(), testNow); !errors.As(err, &we) || we.Code != wire.CodeOverloaded || we.Detail["reason"] != "cache_full" {
		t.Fatalf("a new key past the entry bound: %v", err)
	}
	if r := mustPutIf(t, c, "b", "v", CondVersion(3), testNow); r != (CondResult{}) {
		t.Fatalf("a refused condition on a full cache: %+v", r)
	}
	if r := mustPutIf(t, c, "a", "w", CondVersion(held.Version), testNow); !r.Applied {
		t.Fatalf("replacing the one key of a full cache: %+v", r)
	}
	if n, b := c.Len(); n != 1 || b != 2 {
		t.Fatalf("after the refusals: %d entries %d bytes", n, b)
	}
}

// The in-memory form of put_if_absent_waits_for_a_staged_write_to_the_key:
// a put_if absent racing a plain put of the same key is ordered wholly
// before or wholly after it, never between the put's check and its write.
// Either the conditional put is applied and the plain put replaces it
// later (a watch sees both, in that order), or it is refused with the
// version the plain put wrote (the watch sees only the plain put).
func TestPutIfAbsentWaitsForAStagedWriteToTheKey(t *testing.T) {
	_, c := newWatchCache(t, Config{})
	const rounds = 300
	for i := range rounds {
		key := fmt.Sprintf("k%d", i)
		w, _ := mustWatch(t, c, CacheWatchOptions{Key: key})
		var (
			wg  sync.WaitGroup
			r   CondResult
			err error
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			c.Put(key, []byte("plain"), 0, testNow)
		}()
		go func() {
			defer wg.Done()
			r, err = c.PutIf(key, []byte("cond"), 0, CondAbsent(), testNow)
		}()
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		var l watchLog
		drainWatch(w, &l)
		w.Close()
		v, ver, _ := c.GetVersioned(key, testNow)
		if string(v) != "plain" {
			t.Fatalf("round %d: the plain put's value was lost: %q", i, v)
		}
		switch {
		case r.Applied:
			if len(l.changes) != 2 || l.changes[0].Offset != r.Version || string(l.changes[0].Value) != "cond" ||
				l.changes[1].Offset != ver || ver <= r.Version {
				t.Fatalf("round %d: applied at %d but the watch saw %v (value at %d)", i, r.Version, descChanges(l.changes), ver)
			}
		default:
			if !r.HasVersion || r.Version != ver || len(l.changes) != 1 || l.changes[0].Offset != ver {
				t.Fatalf("round %d: refused with %+v but the watch saw %v (value at %d)", i, r, descChanges(l.changes), ver)
			}
		}
	}
}

func descChanges(chs []*CacheChange) []string {
	var out []string
	for _, ch := range chs {
		out = append(out, descChange(ch))
	}
	return out
}

// TestConditionalWritesAndCounterAddsAreCounted: every conditional write
// is counted by op and outcome, and every appended counter add once.
func TestConditionalWritesAndCounterAddsAreCounted(t *testing.T) {
	st := StorageConfig{Dir: t.TempDir(), Fsync: flog.FsyncNone, CacheCompactInterval: -1}
	b, c := openDurableCache(t, st, durableCacheSpec)
	defer b.Close()
	r, err := c.PutIf("k", []byte("v"), 0, CondAbsent(), testNow)
	if err != nil || !r.Applied {
		t.Fatalf("put_if absent: %+v %v", r, err)
	}
	if r2, _ := c.PutIf("k", []byte("w"), 0, CondAbsent(), testNow); r2.Applied {
		t.Fatal("a second put_if absent applied")
	}
	if _, err := c.PutIf("k", []byte("w"), -time.Second, CondAbsent(), testNow); err == nil {
		t.Fatal("a negative ttl was taken")
	}
	if r3, _ := c.DeleteIf("k", r.Version+1, testNow); r3.Applied {
		t.Fatal("delete_if at a wrong version applied")
	}
	if r4, err := c.DeleteIf("k", r.Version, testNow); err != nil || !r4.Applied {
		t.Fatalf("delete_if: %+v %v", r4, err)
	}
	for _, d := range []int64{1, 2} {
		if _, err := c.CounterAddStaged("n", d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CounterAddStaged("n", math.MaxInt64); err == nil {
		t.Fatal("an overflowing add was taken")
	}
	var prom bytes.Buffer
	b.Metrics().WritePrometheus(&prom)
	for _, want := range []string{
		`felix_cache_conditional_writes_total{op="put_if",outcome="applied"} 1`,
		`felix_cache_conditional_writes_total{op="put_if",outcome="refused"} 1`,
		`felix_cache_conditional_writes_total{op="put_if",outcome="error"} 1`,
		`felix_cache_conditional_writes_total{op="delete_if",outcome="applied"} 1`,
		`felix_cache_conditional_writes_total{op="delete_if",outcome="refused"} 1`,
		`felix_cache_conditional_writes_total{op="delete_if",outcome="error"} 0`,
		"felix_counter_adds_total 2",
	} {
		if !strings.Contains(prom.String(), want+"\n") {
			t.Errorf("no %s in\n%s", want, prom.String())
		}
	}
}
