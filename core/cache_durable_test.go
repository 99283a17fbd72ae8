package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/felixmq/felix/internal/faultfs"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

var durableCacheSpec = wire.CacheSpec{TenantID: "t", Namespace: "ns", Cache: "c", Incarnation: "i1"}

// openDurableCache starts a broker on storage in dir and applies spec.
func openDurableCache(t *testing.T, st StorageConfig, spec wire.CacheSpec) (*Broker, *Cache) {
	t.Helper()
	b := NewBroker(Config{CacheShards: 4, Storage: &st})
	if err := b.ApplyCache(spec); err != nil {
		t.Fatal(err)
	}
	c, _ := b.Cache(CacheKey{spec.TenantID, spec.Namespace, spec.Cache})
	if c.store == nil {
		t.Fatal("the cache is not log-backed")
	}
	return b, c
}

func entryOffset(c *Cache, k string) uint64 {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k].offset
}

// TestDurableCacheKeepsEntriesTTLsAndWatchOffsetsAcrossRestart: after a
// broker restart a log-backed cache holds the same entries with the same
// versions and absolute expiries, continues the same offsets, and a watch
// resuming at an offset from before the restart gets exactly the changes
// from there on, read from the log, with no gap and no duplicate; an
// expiry the sweep writes after the restart is a change like any other.
func TestDurableCacheKeepsEntriesTTLsAndWatchOffsetsAcrossRestart(t *testing.T) {
	st := StorageConfig{Dir: t.TempDir(), Fsync: flog.FsyncAlways}
	b, c := openDurableCache(t, st, durableCacheSpec)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Put("a", []byte("1"), 0, testNow))
	from := c.log.next
	must(c.Put("t", []byte("2"), time.Hour, testNow))
	must(c.Put("gone", []byte("x"), 0, testNow))
	_, _, err := c.Delete("gone", testNow)
	must(err)
	must(c.Put("a", []byte("3"), 0, testNow))
	next, verA, verT := c.log.next, entryOffset(c, "a"), entryOffset(c, "t")
	b.Close()

	b, c = openDurableCache(t, st, durableCacheSpec)
	defer func() { b.Close() }()
	if c.log.next != next || entryOffset(c, "a") != verA || entryOffset(c, "t") != verT {
		t.Fatalf("after restart: next %d (was %d), versions %d %d (were %d %d)", c.log.next, next,
			entryOffset(c, "a"), entryOffset(c, "t"), verA, verT)
	}
	if v, ok := c.Get("a", testNow); !ok || string(v) != "3" {
		t.Fatalf("a = %q %v", v, ok)
	}
	var prom bytes.Buffer
	b.Metrics().WritePrometheus(&prom)
	if used, _ := c.store.IndexBytes(); used == 0 || !strings.Contains(prom.String(), fmt.Sprintf("felix_cache_index_bytes %d\n", used)) {
		t.Fatalf("felix_cache_index_bytes is not the index's %d bytes:\n%s", used, prom.String())
	}
	if _, ok := c.Get("gone", testNow); ok {
		t.Fatal("a deleted key came back")
	}
	if v, ok := c.Get("t", testNow.Add(59*time.Minute)); !ok || string(v) != "2" {
		t.Fatalf("t before its expiry = %q %v", v, ok)
	}
	w, info := mustWatch(t, c, CacheWatchOptions{Prefix: true, From: &from})
	if info.Resnapshot {
		t.Fatal("a resume from before the restart started over")
	}
	if n := c.Sweep(testNow.Add(time.Hour)); n != 1 {
		t.Fatalf("swept %d", n)
	}
	// The expiry reaches the watch once it is durable: wait for that.
	must(c.WaitStaged(context.Background()))
	var l watchLog
	drainWatch(w, &l)
	want := []struct {
		op  wire.CacheChangeOp
		key string
	}{{wire.CacheOpPut, "t"}, {wire.CacheOpPut, "gone"}, {wire.CacheOpDelete, "gone"}, {wire.CacheOpPut, "a"}, {wire.CacheOpExpire, "t"}}
	if len(l.changes) != len(want) {
		t.Fatalf("resumed watch got %d changes, want %d", len(l.changes), len(want))
	}
	for i, ch := range l.changes {
		if ch.Offset != from+uint64(i) || ch.Op != want[i].op || ch.Key != want[i].key {
			t.Fatalf("change %d: %s, want %v %s at %d", i, descChange(ch), want[i].op, want[i].key, from+uint64(i))
		}
	}
	if l.changes[0].ExpiresAt != testNow.Add(time.Hour).UnixNano() {
		t.Fatalf("the put of t came back with expiry %d", l.changes[0].ExpiresAt)
	}
	b.Close()

	b, c = openDurableCache(t, st, durableCacheSpec)
	if _, ok := c.Get("t", testNow); ok {
		t.Fatal("an expired key came back after its expiry was written")
	}
}

// TestDurableCacheResumeIntoCompactedHistoryResnapshots: once compaction
// dropped the segments a resume offset points into, the watch starts
// from current values (resnapshot), which are complete.
func TestDurableCacheResumeIntoCompactedHistoryResnapshots(t *testing.T) {
	st := StorageConfig{Dir: t.TempDir(), Fsync: flog.FsyncNone, SegmentBytes: 1024, CacheCompactInterval: -1}
	b, c := openDurableCache(t, st, durableCacheSpec)
	defer b.Close()
	first := c.log.next
	for i := range 200 {
		if err := c.Put(fmt.Sprint("k", i%5), []byte(fmt.Sprint(i)), 0, testNow); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := c.store.Compact(context.Background()); err != nil || res.Dropped == 0 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	w, info := mustWatch(t, c, CacheWatchOptions{Prefix: true, From: &first})
	if !info.Resnapshot {
		t.Fatal("a resume into compacted history did not resnapshot")
	}
	var l watchLog
	drainWatch(w, &l)
	view := map[string]kv{}
	apply(view, l.initial...)
	if l.state == nil || fmt.Sprint(view) != fmt.Sprint(contents(c, func(string) bool { return true })) {
		t.Fatalf("resnapshot gave %v (state %+v)", view, l.state)
	}
	// A resume after the compaction point is still read from the log.
	from := c.log.next - 3
	w, info = mustWatch(t, c, CacheWatchOptions{Prefix: true, From: &from})
	l = watchLog{}
	drainWatch(w, &l)
	if info.Resnapshot || len(l.changes) != 3 {
		t.Fatalf("resume after the compaction point: %+v, %d changes", info, len(l.changes))
	}
}

// TestDurableCacheIndexBoundRefusesAndUndoes: a put the key index refuses
// is the cache_full refusal and leaves the cache's counts as they were.
func TestDurableCacheIndexBoundRefusesAndUndoes(t *testing.T) {
	st := StorageConfig{Dir: t.TempDir(), CacheIndexBytes: 3 * indexCost("k0")}
	b, c := openDurableCache(t, st, durableCacheSpec)
	defer b.Close()
	for i := range 3 {
		if err := c.Put(fmt.Sprint("k", i), []byte("v"), 0, testNow); err != nil {
			t.Fatal(err)
		}
	}
	entries, bytes := c.Len()
	err := c.Put("k3", []byte("v"), 0, testNow)
	var we *wire.Error
	if !errors.As(err, &we) || we.Reason() != wire.ReasonCacheFull || we.Detail["limit"] != "index_bytes" {
		t.Fatalf("put past the index bound: %v", err)
	}
	if e, by := c.Len(); e != entries || by != bytes {
		t.Fatalf("counts %d/%d after the refusal, were %d/%d", e, by, entries, bytes)
	}
	if _, ok := c.Get("k3", testNow); ok {
		t.Fatal("the refused key is readable")
	}
}

// TestDurableCacheDeleteRemovesFilesForgetKeepsThem: a cache deleted in
// the catalog loses its files, and a new incarnation of the name starts
// empty at offsets above the old one's; a cache only forgotten keeps
// them and serves them again.
func TestDurableCacheDeleteRemovesFilesForgetKeepsThem(t *testing.T) {
	st := StorageConfig{Dir: t.TempDir()}
	b, c := openDurableCache(t, st, durableCacheSpec)
	defer func() { b.Close() }()
	if err := c.Put("k", []byte("v"), 0, testNow); err != nil {
		t.Fatal(err)
	}
	oldNext := c.log.next
	k := CacheKey{"t", "ns", "c"}
	b.RemoveCache(k)
	if err := b.ApplyCache(durableCacheSpec); err != nil {
		t.Fatal(err)
	}
	c, _ = b.Cache(k)
	if v, ok := c.Get("k", testNow); !ok || string(v) != "v" {
		t.Fatal("a forgotten cache came back without its entries")
	}
	b.DeleteCache(k, durableCacheSpec.Incarnation)
	dir, _ := CacheDir(st.Dir, k, durableCacheSpec.Incarnation)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a deleted cache's files remain: %v", err)
	}
	spec := durableCacheSpec
	spec.Incarnation = "i2"
	if err := b.ApplyCache(spec); err != nil {
		t.Fatal(err)
	}
	c, _ = b.Cache(k)
	if n, _ := c.Len(); n != 0 || c.log.next <= oldNext {
		t.Fatalf("new incarnation: %d entries, next %d (the old one reached %d)", n, c.log.next, oldNext)
	}
}

// TestLogBackedPutIfAbsentWaitsForAStagedWriteToTheKey is the log-backed
// half of put_if_absent_waits_for_a_staged_write_to_the_key: a put whose
// record is written but not yet fsynced (under always) is staged; a
// put_if absent on the key does not answer until it is durable, and then
// is refused with its version. A get waits the same way.
func TestLogBackedPutIfAbsentWaitsForAStagedWriteToTheKey(t *testing.T) {
	synctest.Test(t, testLogBackedPutIfAbsentWaits)
}

func testLogBackedPutIfAbsentWaits(t *testing.T) {
	hang := faultfs.NewHang()
	st := StorageConfig{Dir: t.TempDir(), Fsync: flog.FsyncAlways, FS: hang, CacheCompactInterval: -1}
	b, c := openDurableCache(t, st, durableCacheSpec)
	defer b.Close()
	hang.Start()
	putDone := make(chan error, 1)
	go func() { putDone <- c.Put("k", []byte("staged"), 0, testNow) }()
	<-hang.Blocked() // the put's record is written; its fsync hangs
	type condAnswer struct {
		r   CondResult
		err error
	}
	condDone := make(chan condAnswer, 1)
	go func() {
		r, err := c.PutIf("k", []byte("cond"), 0, CondAbsent(), testNow)
		condDone <- condAnswer{r, err}
	}()
	getDone := make(chan bool, 1)
	go func() {
		_, ok := c.Get("k", testNow)
		getDone <- ok
	}()
	synctest.Wait() // every goroutine is blocked: on the hung fsync, or on the put waiting for it
	select {
	case a := <-condDone:
		t.Fatalf("put_if answered %+v %v while the staged put waited for its fsync", a.r, a.err)
	case <-getDone:
		t.Fatal("get answered while the staged put waited for its fsync")
	case <-putDone:
		t.Fatal("the staged put was acknowledged before its fsync")
	default:
	}
	hang.Release()
	if err := <-putDone; err != nil {
		t.Fatal(err)
	}
	ver := entryOffset(c, "k")
	if a := <-condDone; a.err != nil || a.r.Applied || !a.r.HasVersion || a.r.Version != ver {
		t.Fatalf("put_if absent after the staged put: %+v %v, the put's version %d", a.r, a.err, ver)
	}
	if !<-getDone {
		t.Fatal("get after the staged put found nothing")
	}
}

// TestDurableCacheCompactionCopiesKeepVersionsAndAreNoChanges: on a
// log-backed cache, compaction's copies of a cold value take log offsets
// but are no writes: the value keeps its version across them and a
// restart, a watch sees only the writes (its offsets skipping the
// copies'), and writes after the copies go on.
func TestDurableCacheCompactionCopiesKeepVersionsAndAreNoChanges(t *testing.T) {
	st := StorageConfig{Dir: t.TempDir(), Fsync: flog.FsyncNone, SegmentBytes: 2048, CacheCompactInterval: -1}
	b, c := openDurableCache(t, st, durableCacheSpec)
	if err := c.Put("cold", []byte("once"), 0, testNow); err != nil {
		t.Fatal(err)
	}
	coldVer := entryOffset(c, "cold")
	w, _ := mustWatch(t, c, CacheWatchOptions{Prefix: true})
	writes := 0
	copied := 0
	for round := range 3 {
		for i := range 300 {
			if err := c.Put(fmt.Sprint("hot", i%7), []byte(fmt.Sprint(round, i)), 0, testNow); err != nil {
				t.Fatal(err)
			}
			writes++
		}
		res, err := c.store.Compact(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		copied += res.Copied
	}
	if copied == 0 || c.store.StartOffset()+c.log.offBase <= coldVer {
		t.Fatalf("copied %d; the log starts at %d, the cold put is at %d", copied, c.store.StartOffset()+c.log.offBase, coldVer)
	}
	if err := c.Put("after", []byte("x"), 0, testNow); err != nil {
		t.Fatal(err)
	}
	writes++
	var l watchLog
	drainWatch(w, &l)
	if len(l.changes) != writes {
		t.Fatalf("the watch saw %d changes, %d writes were made", len(l.changes), writes)
	}
	for i, ch := range l.changes {
		if ch.Key == "cold" || (i > 0 && ch.Offset <= l.changes[i-1].Offset) {
			t.Fatalf("change %d: %s", i, descChange(ch))
		}
	}
	if entryOffset(c, "cold") != coldVer {
		t.Fatalf("the cold value's version moved to %d from %d", entryOffset(c, "cold"), coldVer)
	}
	b.Close()
	b, c = openDurableCache(t, st, durableCacheSpec)
	defer b.Close()
	if v, ver, ok := c.GetVersioned("cold", testNow); !ok || string(v) != "once" || ver != coldVer {
		t.Fatalf("after restart the cold value is %q at %d (%v), want at %d", v, ver, ok, coldVer)
	}
	if err := c.Put("later", []byte("y"), 0, testNow); err != nil {
		t.Fatal(err)
	}
}

// crashVal is a key's value as the crash script expects it.
type crashVal struct {
	v   string
	ver uint64    // 0: any (a write whose answer was lost)
	exp time.Time // zero: never
}

// present reports whether the value is live at now.
func (v *crashVal) present(now time.Time) bool {
	return v != nil && (v.exp.IsZero() || now.Before(v.exp))
}

// TestDurableCacheRecoversFromACrashAtEveryStep: the broker's log-backed
// cache, killed at every file operation of a script of puts, deletes,
// conditional writes, expiries and compactions, restarts with every
// acknowledged write and its version; the write in flight is wholly
// there or absent; no refused write left anything behind.
func TestDurableCacheRecoversFromACrashAtEveryStep(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	root := t.TempDir()
	for step := 0; ; step++ {
		dir := filepath.Join(root, fmt.Sprint(step))
		crash := faultfs.NewCrash(flog.OSFS())
		crash.Arm(step)
		st := StorageConfig{Dir: dir, Fsync: flog.FsyncAlways, SegmentBytes: 512, CacheCompactInterval: -1, Logger: quiet}
		crashing := st
		crashing.FS = crash
		clk := newStoreClock()
		acked := map[string]*crashVal{}
		maybe := map[string]*crashVal{}
		b := NewBroker(Config{CacheShards: 4, Storage: &crashing})
		if err := b.ApplyCache(durableCacheSpec); err == nil {
			c, _ := b.Cache(CacheKey{"t", "ns", "c"})
			runCrashScript(c, clk, func(k string, v *crashVal, ok bool) {
				if ok {
					acked[k] = v
				} else {
					maybe[k] = v
				}
			})
		}
		b.Close()
		crashed := crash.Crashed()

		b = NewBroker(Config{CacheShards: 4, Storage: &st})
		if err := b.ApplyCache(durableCacheSpec); err != nil {
			t.Fatalf("crash at step %d: reopen: %v", step, err)
		}
		c, _ := b.Cache(CacheKey{"t", "ns", "c"})
		now := clk.Now()
		for _, k := range []string{"cold", "a", "b", "c"} {
			v, ver, ok := c.GetVersioned(k, now)
			if m, inFlight := maybe[k]; inFlight && ((!m.present(now) && !ok) || (m.present(now) && ok && string(v) == m.v)) {
				continue
			}
			want := acked[k]
			if ok != want.present(now) || (ok && (string(v) != want.v || ver != want.ver)) {
				t.Fatalf("crash at step %d: %s is %q at %d (%v), acknowledged %+v, in flight %+v", step, k, v, ver, ok, want, maybe[k])
			}
		}
		start := c.store.StartOffset()
		b.Close()
		os.RemoveAll(dir)
		if !crashed {
			if step < 50 || start == 0 {
				t.Fatalf("the script ran through after %d steps, its log starting at %d", step, start)
			}
			t.Logf("crashed at each of %d steps", step)
			return
		}
	}
}

// runCrashScript drives c until a write fails, reporting each write's
// outcome: ok with the key's new value (nil: deleted), or not ok with
// what the failed write may have left (nil: deleted).
func runCrashScript(c *Cache, clk *storeClock, report func(k string, v *crashVal, ok bool)) {
	put := func(k, v string, ttl time.Duration) bool {
		var exp time.Time
		if ttl > 0 {
			exp = clk.Now().Add(ttl)
		}
		if err := c.Put(k, []byte(v), ttl, clk.Now()); err != nil {
			report(k, &crashVal{v: v, exp: exp}, false)
			return false
		}
		report(k, &crashVal{v: v, ver: entryOffset(c, k), exp: exp}, true)
		return true
	}
	if !put("cold", "once", 0) {
		return
	}
	keys := []string{"a", "b", "c"}
	for i := range 40 {
		k := keys[i%3]
		switch {
		case i%10 == 9:
			if _, err := c.store.Compact(context.Background()); err != nil {
				return
			}
		case i%7 == 6:
			if _, _, err := c.Delete(k, clk.Now()); err != nil {
				report(k, nil, false)
				return
			}
			report(k, nil, true)
		case i%5 == 4:
			v := fmt.Sprint("if", i)
			r, err := c.PutIf(k, []byte(v), 0, CondAbsent(), clk.Now())
			if err != nil {
				report(k, &crashVal{v: v}, false)
				return
			}
			if r.Applied {
				report(k, &crashVal{v: v, ver: r.Version}, true)
			}
		case i%8 == 7:
			clk.Add(time.Minute) // the ttl puts lapse; the sweep writes their expiries
			c.Sweep(clk.Now())
			if c.store.log.Err() != nil {
				return
			}
		default:
			ttl := time.Duration(0)
			if i%4 == 0 {
				ttl = 30 * time.Second
			}
			if !put(k, fmt.Sprint("v", i, strings.Repeat("x", 40)), ttl) {
				return
			}
		}
	}
}
