package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	felix "github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// The regressions etcd's robustness tests found in its watch, each as a
// case on Felix's log-backed cache, checked by the validators of
// watch_validate_test.go. etcd's track record is in its
// tests/robustness/README.md.

// regressionEnv compacts often, keeps the in-memory history small (so a
// resume reads the log) and the watch bounds large, so that a resume
// resnapshots only because compaction dropped what it asked for.
var regressionEnv = []string{"FELIX_CACHE_COMPACT_INTERVAL_MS=100", "FELIX_DURABLE_SEGMENT_BYTES=65536",
	"FELIX_DURABLE_FSYNC=periodic", "FELIX_CACHE_WATCH_HISTORY_BYTES=16384", "FELIX_CACHE_WATCH_MAX_BYTES=268435456"}

// probeSession opens a watch resuming from offset and reads it for d.
func probeSession(t *testing.T, ctx context.Context, c *felix.Client, cache string, f felix.CacheWatchFilter, from uint64, d time.Duration) *watchSession {
	t.Helper()
	w, s, err := openSession(ctx, c, cache, watchSpec{filter: f}, &from)
	if err != nil {
		t.Fatalf("watch from %d: %v", from, err)
	}
	defer w.Close()
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	if err := drainSession(rctx, &mu, w, s); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("watch from %d ended: %v", from, err)
	}
	return s
}

// resnapshots reports whether a watch resuming from offset is answered
// with a resnapshot.
func resnapshots(t *testing.T, ctx context.Context, c *felix.Client, cache string, f felix.CacheWatchFilter, from uint64) bool {
	t.Helper()
	w, err := c.WatchCache(ctx, "default", cache, f, felix.WatchFrom(from))
	if err != nil {
		t.Fatalf("watch from %d: %v", from, err)
	}
	defer w.Close()
	return w.Resnapshot()
}

// unpin deletes the key cacheReady wrote: a value written once and never
// again holds the log's head until a second compaction copies it
// forward, and without it the first compaction can already drop segments.
func unpin(t *testing.T, ctx context.Context, c *felix.Client, cache string) {
	t.Helper()
	if _, _, err := c.CacheDelete(ctx, "default", cache, "ready"); err != nil {
		t.Fatal(err)
	}
}

// fillUntil writes filler keys until cond holds, failing after 60 s.
func fillUntil(t *testing.T, ctx context.Context, c *felix.Client, cache, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out filling the cache until %s", what)
		}
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		fillCache(fctx, c, cache, 32, 64)
		cancel()
	}
}

// followReference starts a fresh watch of f recorded into a new log, read
// until stop is called.
func followReference(t *testing.T, ctx context.Context, c *felix.Client, cache string, f felix.CacheWatchFilter) (rec *watchLog, mu *sync.Mutex, stop func()) {
	t.Helper()
	rec, mu = &watchLog{Name: "reference"}, &sync.Mutex{}
	w, s, err := openSession(ctx, c, cache, watchSpec{filter: f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec.Sessions = append(rec.Sessions, s)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		drainSession(rctx, mu, w, s)
		w.Close()
	}()
	return rec, mu, func() { cancel(); <-done }
}

// waitFor waits until rec has delivered a change to key with value.
func waitFor(t *testing.T, rec *watchLog, mu *sync.Mutex, key, value string) uint64 {
	t.Helper()
	var off uint64
	eventually(t, 20*time.Second, fmt.Sprintf("the reference watch to see %s=%s", key, value), func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range rec.Sessions {
			for _, it := range s.Items {
				if it.Key == key && string(it.Value) == value && !it.Retained {
					off = it.Offset
					return true
				}
			}
		}
		return false
	})
	return off
}

// TestCacheWatchFromACompactedDeleteIsNotSilentlySkipped is etcd #18089:
// compacting at the revision of a delete dropped the delete's tombstone
// from etcd's key index, so a watch starting at or before that revision
// never got the delete event. Here a key is put and deleted, compaction
// runs until it drops the log holding both, and resumes from the put and
// from the delete are checked at every step: each either delivers the
// delete or resnapshots without the key, never skips it.
func TestCacheWatchFromACompactedDeleteIsNotSilentlySkipped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n := startServe(t, regressionEnv...)
	n.mustFelix(ctx, "admin", "cache", "create", "c18089")
	c := cacheReady(t, ctx, n, "c18089")
	defer c.Close()
	unpin(t, ctx, c, "c18089")
	f := felix.WatchKey("w/doomed")
	ref, mu, stop := followReference(t, ctx, c, "c18089", f)
	hist := newWriteHistory()
	if err := c.CachePut(ctx, "default", "c18089", "w/doomed", []byte("v1"), 0); err != nil {
		t.Fatal(err)
	}
	hist.add("w/doomed", writtenOp{Op: "put", Value: "v1", Acked: true})
	put := waitFor(t, ref, mu, "w/doomed", "v1")
	if _, _, err := c.CacheDelete(ctx, "default", "c18089", "w/doomed"); err != nil {
		t.Fatal(err)
	}
	hist.add("w/doomed", writtenOp{Op: "delete", Acked: true})
	var del uint64
	eventually(t, 10*time.Second, "the delete to reach the reference watch", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if items := ref.Sessions[0].Items; len(items) == 2 {
			del = items[1].Offset
			return true
		}
		return false
	})
	probes := []*watchLog{}
	compacted := false
	fillUntil(t, ctx, c, "c18089", "compaction drops the delete", func() bool {
		for _, from := range []uint64{put, del} {
			s := probeSession(t, ctx, c, "c18089", f, from, 300*time.Millisecond)
			probes = append(probes, &watchLog{Name: fmt.Sprintf("from-%d-probe-%d", from, len(probes)), Sessions: []*watchSession{s}})
			compacted = compacted || s.Resnapshot
		}
		return compacted && resnapshots(t, ctx, c, "c18089", f, del)
	})
	stop()
	t.Logf("%d probes; the resume from the delete at %d resnapshots", len(probes), del)
	reportWatchErrors(t, validateWatches(append(probes, ref), hist, true))
}

// TestCacheWatchAtTheCompactionBoundaryAfterRestart is etcd #19179: after
// a restart etcd rebuilt its key index from the compacted store without a
// tombstone that was a key's first revision there, so a watch opened at
// the compaction revision missed that delete. Here keys are put and
// deleted in turn while compaction drops the log's head, the broker is
// SIGKILLed, and after the restart the first offset a resume is served
// from (the boundary) is found: a resume exactly there delivers exactly
// the history from it, deletes included; one just below resnapshots to
// the history's state; and a retained watch shows the history's end state.
func TestCacheWatchAtTheCompactionBoundaryAfterRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	n := startServeIn(t, dir, regressionEnv...)
	n.mustFelix(ctx, "admin", "cache", "create", "c19179")
	c := cacheReady(t, ctx, n, "c19179")
	unpin(t, ctx, c, "c19179")
	f := felix.WatchPrefix("w/")
	ref, mu, stop := followReference(t, ctx, c, "c19179", f)
	first := ref.Sessions[0].Start
	hist := newWriteHistory()
	wctx, stopWriter := context.WithCancel(ctx)
	writerDone := make(chan struct{})
	go func() {
		// Each key is put then deleted, so tombstones are everywhere.
		defer close(writerDone)
		for i := 0; wctx.Err() == nil; i++ {
			key := fmt.Sprintf("w/%d", i%16)
			var err error
			op, value := "put", fmt.Sprintf("%s#%d", key, i)
			if i%32 >= 16 {
				op, value = "delete", ""
				_, _, err = c.CacheDelete(wctx, "default", "c19179", key)
			} else {
				err = c.CachePut(wctx, "default", "c19179", key, []byte(value), 0)
			}
			hist.add(key, writtenOp{Op: op, Value: value, Acked: err == nil})
			if err != nil {
				return
			}
		}
	}()
	fillUntil(t, ctx, c, "c19179", "compaction drops the log's first segments", func() bool {
		return resnapshots(t, ctx, c, "c19179", f, first)
	})
	stopWriter()
	<-writerDone
	if err := c.CachePut(ctx, "default", "c19179", "w/end", []byte("end"), 0); err != nil {
		t.Fatal(err)
	}
	hist.add("w/end", writtenOp{Op: "put", Value: "end", Acked: true})
	end := waitFor(t, ref, mu, "w/end", "end")
	stop()
	n.stop(syscall.SIGKILL, 10*time.Second)
	c.Close()

	m := startServeIn(t, dir, regressionEnv...)
	c2 := cacheReady(t, ctx, m, "c19179")
	defer c2.Close()
	lo, hi := first, end // resnapshots at lo, served at hi
	for lo+1 < hi {
		mid := lo + (hi-lo)/2
		if resnapshots(t, ctx, c2, "c19179", f, mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	at := probeSession(t, ctx, c2, "c19179", f, hi, 2*time.Second)
	below := probeSession(t, ctx, c2, "c19179", f, lo, 2*time.Second)
	if at.Resnapshot || !below.Resnapshot {
		t.Fatalf("the boundary moved: from %d resnapshot %v, from %d resnapshot %v", hi, at.Resnapshot, lo, below.Resnapshot)
	}
	deletes := 0
	for _, it := range at.Items {
		if it.Op == "delete" {
			deletes++
		}
	}
	rw, _, err := openSession(ctx, c2, "c19179", watchSpec{filter: f, retained: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	retained := &watchSession{Filter: f, Retained: true, Start: rw.ResumeOffset()}
	retained.End = retained.Start
	rctx, rcancel := context.WithTimeout(ctx, time.Second)
	var rmu sync.Mutex
	drainSession(rctx, &rmu, rw, retained)
	rcancel()
	rw.Close()
	t.Logf("log starts at %d after %d (first %d, end %d); the resume there delivered %d changes, %d deletes",
		hi, hi-first, first, end, len(at.Items), deletes)
	logs := []*watchLog{ref, {Name: "at-boundary", Sessions: []*watchSession{at}},
		{Name: "below-boundary", Sessions: []*watchSession{below}}, {Name: "retained-after-restart", Sessions: []*watchSession{retained}}}
	reportWatchErrors(t, validateWatches(logs, hist, true))
}

// TestCacheWatchResumesWithoutDuplicatesWhileWritesGoOn is etcd #17247: a
// bug in etcd's caching of transactions had a watch receive one event
// twice. The seam where that can happen in Felix is a resume catching up:
// the changes read from the in-memory history or from the log meet the
// live changes queued meanwhile. Here a writer keeps writing while
// watches resume from the head, from the in-memory history and from the
// log, before and after a SIGKILL; each must deliver every change from
// its offset exactly once.
func TestCacheWatchResumesWithoutDuplicatesWhileWritesGoOn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	f := felix.WatchPrefix("w/")
	hist := newWriteHistory()
	var logs []*watchLog
	var offsets []uint64 // offsets the reference watch saw, to resume from
	var all []*watchLog
	kw := &keyWriter{id: 0}
	for phase := range 2 {
		n := startServeIn(t, dir, regressionEnv...)
		if phase == 0 {
			n.mustFelix(ctx, "admin", "cache", "create", "c17247")
		}
		c := cacheReady(t, ctx, n, "c17247")
		ref, mu, stop := followReference(t, ctx, c, "c17247", f)
		ref.Name = fmt.Sprintf("reference-%d", phase)
		wctx, stopWriter := context.WithCancel(ctx)
		writerDone := make(chan struct{})
		go func() {
			defer close(writerDone)
			wc := n.connect(ctx, n.adminToken())
			defer wc.Close()
			kw.run(wctx, wc, "c17247", hist)
		}()
		var resumed sync.WaitGroup
		for round := range 8 {
			time.Sleep(150 * time.Millisecond)
			mu.Lock()
			items := ref.Sessions[0].Items
			if len(items) > 0 {
				offsets = append(offsets, items[len(items)-1].Offset+1)
			}
			mu.Unlock()
			// From the head, a recent offset (the in-memory history), and
			// the oldest known (the log; before the restart in phase 1).
			froms := []uint64{ref.Sessions[0].Start}
			if len(offsets) > 0 {
				froms = append(froms, offsets[len(offsets)-1], offsets[0])
			}
			for _, from := range froms {
				rec := &watchLog{Name: fmt.Sprintf("phase-%d-round-%d-from-%d", phase, round, from)}
				all = append(all, rec)
				spec := watchSpec{name: rec.Name, filter: f, from: &from}
				resumed.Add(1)
				go func() {
					defer resumed.Done()
					rctx, rcancel := context.WithTimeout(wctx, 700*time.Millisecond)
					defer rcancel()
					var rmu sync.Mutex
					followWatch(rctx, t, &rmu, c, "c17247", spec, rec)
				}()
			}
		}
		resumed.Wait()
		stopWriter()
		<-writerDone
		// The reference must hold every write the resumed watches could
		// have seen: catch it up with a last write of the writer's own.
		key, value, err := kw.finalPut(ctx, c, "c17247", hist)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, ref, mu, key, value)
		stop()
		logs = append(logs, ref)
		c.Close()
		n.stop(syscall.SIGKILL, 10*time.Second)
	}
	writes := 0
	for _, ops := range hist.byKey {
		writes += len(ops)
	}
	t.Logf("%d resumed watches over %d writes", len(all), writes)
	reportWatchErrors(t, validateWatches(append(all, logs...), hist, true))
}

// TestCacheWatchAtTheNextOffsetGetsNothingOlder is etcd #20221: a watch
// opened on a future revision was sent progress notifications with
// revisions below its start, and after a restore even old events, since
// the server lowered the watcher's revision to its current one. In Felix
// the only start ahead of the cache is its next offset (one further is
// refused in_future). Here watches from the next offset, before and after
// a SIGKILL and restart, must send nothing (no change, no state item) until
// the next write, and then exactly it; and a start past the next offset is
// refused, before the restart and after.
func TestCacheWatchAtTheNextOffsetGetsNothingOlder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	n := startServeIn(t, dir, regressionEnv...)
	n.mustFelix(ctx, "admin", "cache", "create", "c20221")
	c := cacheReady(t, ctx, n, "c20221")
	f := felix.WatchPrefix("w/")
	hist := newWriteHistory()
	for i := range 20 {
		key, value := fmt.Sprintf("w/%d", i%4), fmt.Sprintf("old-%d", i)
		if err := c.CachePut(ctx, "default", "c20221", key, []byte(value), 0); err != nil {
			t.Fatal(err)
		}
		hist.add(key, writtenOp{Op: "put", Value: value, Acked: true})
	}
	probe, err := c.WatchCache(ctx, "default", "c20221", f)
	if err != nil {
		t.Fatal(err)
	}
	next := probe.ResumeOffset()
	probe.Close()
	refusedInFuture(t, ctx, c, f, next+1)
	before := probeSession(t, ctx, c, "c20221", f, next, 500*time.Millisecond)
	if len(before.Items) > 0 {
		t.Errorf("a watch from the next offset %d delivered %v before any write", next, before.Items[0])
	}
	n.stop(syscall.SIGKILL, 10*time.Second)
	c.Close()

	m := startServeIn(t, dir, regressionEnv...)
	c2 := cacheReady(t, ctx, m, "c20221") // puts the key "ready", outside w/
	defer c2.Close()
	probe, err = c2.WatchCache(ctx, "default", "c20221", f)
	if err != nil {
		t.Fatal(err)
	}
	head := probe.ResumeOffset()
	probe.Close()
	if head <= next {
		t.Fatalf("after the restart the next offset is %d, not past %d", head, next)
	}
	refusedInFuture(t, ctx, c2, f, head+1)
	w, s, err := openSession(ctx, c2, "c20221", watchSpec{filter: f}, &head)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	var mu sync.Mutex
	drainSession(rctx, &mu, w, s)
	rcancel()
	if len(s.Items) > 0 || s.Resnapshot {
		t.Errorf("a watch from the next offset %d after the restart delivered %v (resnapshot %v) before any write", head, s.Items, s.Resnapshot)
	}
	if err := c2.CachePut(ctx, "default", "c20221", "w/new", []byte("new"), 0); err != nil {
		t.Fatal(err)
	}
	hist.add("w/new", writtenOp{Op: "put", Value: "new", Acked: true})
	rctx, rcancel = context.WithTimeout(ctx, time.Second)
	drainSession(rctx, &mu, w, s)
	rcancel()
	if len(s.Items) != 1 || s.Items[0].Key != "w/new" || s.Items[0].Offset < head {
		t.Errorf("after one write a watch from %d delivered %v", head, s.Items)
	}
	// The history here is only what the watches from the head saw: the
	// writes before them are not theirs to deliver.
	logs := []*watchLog{{Name: "before-restart", Sessions: []*watchSession{before}}, {Name: "after-restart", Sessions: []*watchSession{s}}}
	reportWatchErrors(t, validateWatches(logs, hist, false))
}

// refusedInFuture checks that a watch from offset, past the next one, is
// refused as invalid_request with reason in_future.
func refusedInFuture(t *testing.T, ctx context.Context, c *felix.Client, f felix.CacheWatchFilter, from uint64) {
	t.Helper()
	w, err := c.WatchCache(ctx, "default", "c20221", f, felix.WatchFrom(from))
	if err == nil {
		w.Close()
		t.Fatalf("a watch from %d, past the next offset, was accepted (resnapshot %v)", from, w.Resnapshot())
	}
	var be *felix.BrokerError
	if !errors.As(err, &be) || be.Code != wire.CodeInvalidRequest || be.Detail["reason"] != "in_future" {
		t.Fatalf("a watch from %d, past the next offset: %v, want invalid_request in_future", from, err)
	}
}
