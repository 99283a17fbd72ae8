package core

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/internal/faultfs"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// waitWatch drains w into l until cond holds, waiting for its signals up
// to a generous deadline (a hang, not a speed bound).
func waitWatch(t *testing.T, w *CacheWatch, l *watchLog, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for drainWatch(w, l); !cond(); drainWatch(w, l) {
		select {
		case <-w.Ready():
		case <-deadline:
			t.Fatalf("the watch never got there: %d values, %d changes, state %v, end %v", len(l.initial), len(l.changes), l.state, l.end)
		}
	}
}

// TestLogBackedWatchSeesAWriteOnlyOnceItIsDurable: under FsyncAlways a
// put whose record is written but whose fsync hangs reaches no watch: not
// a live one, not a resume from just before it, not a retained start
// (whose values are held back with their state); once the fsync
// completes, all three see it at its offset. A write no one waits for
// (PutStaged) is released too, by the log's flusher.
func TestLogBackedWatchSeesAWriteOnlyOnceItIsDurable(t *testing.T) {
	hang := faultfs.NewHang()
	st := StorageConfig{Dir: t.TempDir(), Fsync: flog.FsyncAlways, FS: hang, CacheCompactInterval: -1}
	b, c := openDurableCache(t, st, durableCacheSpec)
	defer b.Close()
	live, _ := mustWatch(t, c, CacheWatchOptions{Key: "k"})
	if err := c.Put("k", []byte("v1"), 0, testNow); err != nil {
		t.Fatal(err)
	}
	var liveLog watchLog
	drainWatch(live, &liveLog)
	if len(liveLog.changes) != 1 {
		t.Fatalf("the durable put reached the watch %d times once Put returned", len(liveLog.changes))
	}
	v1 := liveLog.changes[0].Offset

	hang.Start()
	putDone := make(chan error, 1)
	go func() { putDone <- c.Put("k", []byte("v2"), 0, testNow) }()
	<-hang.Blocked() // the put is applied and written; its fsync hangs
	v2 := entryOffset(c, "k")
	if v2 <= v1 {
		t.Fatalf("the staged put took offset %d after %d", v2, v1)
	}
	from := v1 + 1
	resumed, rinfo := mustWatch(t, c, CacheWatchOptions{Key: "k", From: &from})
	retained, tinfo := mustWatch(t, c, CacheWatchOptions{Key: "k", Retained: true})
	if rinfo.Resnapshot || tinfo.Next != v2+1 {
		t.Fatalf("watches started during the fsync: resume %+v, retained %+v (staged put at %d)", rinfo, tinfo, v2)
	}
	var resLog, retLog watchLog
	drainWatch(live, &liveLog)
	drainWatch(resumed, &resLog)
	drainWatch(retained, &retLog)
	if len(liveLog.changes) != 1 || len(resLog.changes) != 0 || len(retLog.initial) != 0 || retLog.state != nil {
		t.Fatalf("a put waiting for its fsync was seen: live %d changes, resumed %d, retained %d values and state %v",
			len(liveLog.changes), len(resLog.changes), len(retLog.initial), retLog.state)
	}
	hang.Release()
	if err := <-putDone; err != nil {
		t.Fatal(err)
	}
	waitWatch(t, live, &liveLog, func() bool { return len(liveLog.changes) == 2 })
	waitWatch(t, resumed, &resLog, func() bool { return len(resLog.changes) == 1 })
	waitWatch(t, retained, &retLog, func() bool { return retLog.state != nil })
	if ch := liveLog.changes[1]; ch.Offset != v2 || string(ch.Value) != "v2" {
		t.Fatalf("live watch: %s, want v2 at %d", descChange(ch), v2)
	}
	if ch := resLog.changes[0]; ch.Offset != v2 || string(ch.Value) != "v2" {
		t.Fatalf("resumed watch: %s, want v2 at %d", descChange(ch), v2)
	}
	if len(retLog.initial) != 1 || retLog.initial[0].Offset != v2 || string(retLog.initial[0].Value) != "v2" ||
		*retLog.state != (CacheWatchState{Offset: v2 + 1, Count: 1}) {
		t.Fatalf("retained watch: %d values, state %+v, want v2 at %d then state %d", len(retLog.initial), *retLog.state, v2, v2+1)
	}

	// No one waits for a staged write: the flusher releases it.
	if err := c.PutStaged("k", []byte("v3"), 0, testNow); err != nil {
		t.Fatal(err)
	}
	waitWatch(t, live, &liveLog, func() bool { return len(liveLog.changes) == 3 })
	if ch := liveLog.changes[2]; string(ch.Value) != "v3" || ch.Offset != v2+1 {
		t.Fatalf("unwaited put: %s", descChange(ch))
	}
}

// TestLogBackedWatchResumesAfterACrashThatLostAWrite: a put whose fsync
// never completed is lost in a machine crash, and after the restart its
// offset is taken by another write. A watch that saw everything up to the
// crash and resumes from the offset after the last change it saw gets the
// new write there: no gap, no duplicate, and no offset with two values
// (before the fix the watch had already delivered the lost put at that
// offset).
func TestLogBackedWatchResumesAfterACrashThatLostAWrite(t *testing.T) {
	hang := faultfs.NewHang()
	vol := faultfs.NewVolatile(hang)
	dir := t.TempDir()
	st := StorageConfig{Dir: dir, Fsync: flog.FsyncAlways, FS: vol, CacheCompactInterval: -1}
	b, c := openDurableCache(t, st, durableCacheSpec)
	defer func() { hang.Release(); b.Close() }()
	w, info := mustWatch(t, c, CacheWatchOptions{Prefix: true})
	seen := map[uint64]string{} // offset → what the watches delivered there
	var wl watchLog
	note := func(chs []*CacheChange) {
		for _, ch := range chs {
			d := fmt.Sprintf("%s %s=%q", ch.Op, ch.Key, ch.Value)
			if old, ok := seen[ch.Offset]; ok && old != d {
				t.Fatalf("offset %d delivered as %s and as %s", ch.Offset, old, d)
			}
			seen[ch.Offset] = d
		}
	}
	for i, k := range []string{"a", "b", "a"} {
		if err := c.Put(k, []byte(fmt.Sprint(i)), 0, testNow); err != nil {
			t.Fatal(err)
		}
	}
	drainWatch(w, &wl)
	note(wl.changes)
	if len(wl.changes) != 3 || wl.changes[0].Offset != info.Next {
		t.Fatalf("before the crash the watch got %d changes from %d", len(wl.changes), info.Next)
	}
	last := wl.changes[2].Offset

	hang.Start()
	go c.Put("lost", []byte("never durable"), 0, testNow) // never answered: the machine crashes first
	<-hang.Blocked()
	lostAt := entryOffset(c, "lost")
	drainWatch(w, &wl)
	if len(wl.changes) != 3 {
		t.Fatalf("the watch saw %s before its fsync", descChange(wl.changes[3]))
	}
	crashed := t.TempDir()
	if err := vol.CrashCopy(dir, crashed); err != nil {
		t.Fatal(err)
	}
	w.Close() // the machine is gone: nothing it does from here on counts

	b2, c2 := openDurableCache(t, StorageConfig{Dir: crashed, Fsync: flog.FsyncAlways, CacheCompactInterval: -1}, durableCacheSpec)
	defer b2.Close()
	if _, ok := c2.Get("lost", testNow); ok || c2.log.next != last+1 {
		t.Fatalf("after the crash: the lost put is there (%v), next %d (the watch saw up to %d)", ok, c2.log.next, last)
	}
	if err := c2.Put("new", []byte("after"), 0, testNow); err != nil {
		t.Fatal(err)
	}
	if got := entryOffset(c2, "new"); got != lostAt {
		t.Fatalf("the write after the crash took offset %d, not the lost put's %d: the test shows nothing", got, lostAt)
	}
	from := last + 1
	w2, info2 := mustWatch(t, c2, CacheWatchOptions{Prefix: true, From: &from})
	if info2.Resnapshot {
		t.Fatal("the resume after the crash started over")
	}
	var wl2 watchLog
	drainWatch(w2, &wl2)
	note(wl2.changes)
	if len(wl2.changes) != 1 || wl2.changes[0].Offset != from || wl2.changes[0].Key != "new" {
		t.Fatalf("resumed from %d after the crash: %d changes (%v)", from, len(wl2.changes), descChanges(wl2.changes))
	}
}

// TestLogBackedPrefixWatchKeepsOrderAcrossKeys: writers of different keys
// share fsyncs under FsyncAlways, so changes are released in batches; a
// prefix watch still gets every acknowledged write exactly once, in
// offset order with no gap, each key's in its writer's order.
func TestLogBackedPrefixWatchKeepsOrderAcrossKeys(t *testing.T) {
	st := StorageConfig{Dir: t.TempDir(), Fsync: flog.FsyncAlways, CacheCompactInterval: -1}
	b, c := openDurableCache(t, st, durableCacheSpec)
	defer b.Close()
	w, info := mustWatch(t, c, CacheWatchOptions{Prefix: true})
	const writers, each = 4, 150
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				k := fmt.Sprintf("w%d-%d", g, i%3)
				if err := c.Put(k, []byte(fmt.Sprint(i)), 0, testNow); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 9 {
					if _, _, err := c.Delete(k, testNow); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	var wl watchLog
	done := make(chan struct{})
	drained := make(chan struct{})
	go func() { defer close(drained); drainUntil(w, &wl, done) }()
	wg.Wait()
	close(done)
	<-drained
	want := writers * (each + each/10)
	if len(wl.changes) != want || wl.end != nil {
		t.Fatalf("the watch got %d changes (end %v), want %d", len(wl.changes), wl.end, want)
	}
	lastPut := map[byte]int{} // writer → the index of its last put seen
	for i, ch := range wl.changes {
		if ch.Offset != info.Next+uint64(i) {
			t.Fatalf("change %d at offset %d, want %d", i, ch.Offset, info.Next+uint64(i))
		}
		if ch.Op != wire.CacheOpPut {
			continue
		}
		var n int
		if _, err := fmt.Sscan(string(ch.Value), &n); err != nil {
			t.Fatal(err)
		}
		if prev, ok := lastPut[ch.Key[1]]; ok && n != prev+1 {
			t.Fatalf("writer %c's put %d came after its put %d", ch.Key[1], n, prev)
		}
		lastPut[ch.Key[1]] = n
	}
}
