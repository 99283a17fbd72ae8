package felix

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// watchFakes starts n fakes that serve cache watches.
func watchFakes(t *testing.T, n int) []*fakeBroker {
	t.Helper()
	var fbs []*fakeBroker
	for range n {
		fbs = append(fbs, newFakeBroker(t, fakeOpts{flags: binaryFlags, features: watchFeatures,
			watches: make(chan *fakeWatch, 16)}))
	}
	return fbs
}

// clusterWatch watches ns/c through cc, closing the watch at the end.
func clusterWatch(t *testing.T, cc *ClusterClient, f CacheWatchFilter, opts ...WatchOption) *ClusterCacheWatch {
	t.Helper()
	w, err := cc.WatchCache(context.Background(), "ns", "c", f, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// expectWatch reads one item per want and checks offset, key and kind.
func expectWatch(t *testing.T, w *ClusterCacheWatch, want ...CacheWatchItem) {
	t.Helper()
	for i, wnt := range want {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		it, err := w.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
		if it.Offset != wnt.Offset || it.Key != wnt.Key || it.Retained != wnt.Retained ||
			it.StateComplete != wnt.StateComplete || it.Count != wnt.Count {
			t.Fatalf("item %d: got %+v, want %+v", i, it, wnt)
		}
	}
}

// change, retained and state build expected items.
func change(off uint64, key string) CacheWatchItem { return CacheWatchItem{Offset: off, Key: key} }
func retained(off uint64, key string) CacheWatchItem {
	return CacheWatchItem{Offset: off, Key: key, Retained: true}
}
func state(off, count uint64) CacheWatchItem {
	return CacheWatchItem{Offset: off, StateComplete: true, Count: count}
}

// resumedFrom checks that fw is a resume from offset from, not retained.
func resumedFrom(t *testing.T, fw *fakeWatch, from uint64) {
	t.Helper()
	if m := fw.msg; m.FromOffset == nil || *m.FromOffset != from || m.Retained || m.Key != "k" {
		t.Fatalf("resumed watch %+v, want from %d", m, from)
	}
}

func TestClusterCacheWatchResumesOnAnotherSeed(t *testing.T) {
	fbs := watchFakes(t, 2)
	cc := connectClusterFast(t, fbs[0].config(), fbs[0].Addr(), fbs[1].Addr())
	before := cacheWatchResumes.Get()
	w := clusterWatch(t, cc, WatchKey("k"))
	if w.ResumeOffset() != fakeWatchNext {
		t.Fatalf("resume offset %d", w.ResumeOffset())
	}
	fw := fbs[0].nextWatch()
	fw.send(t, put(101, "k", "a"), put(103, "k", "b"))
	expectWatch(t, w, change(101, "k"), change(103, "k"))
	fbs[0].Kill()

	itemC := make(chan CacheWatchItem, 1)
	go func() {
		it, err := w.Next(context.Background())
		if err != nil {
			t.Errorf("Next across the resume: %v", err)
		}
		itemC <- it
	}()
	fw2 := fbs[1].nextWatch()
	resumedFrom(t, fw2, 104)
	// 101 and 103 repeat what was delivered.
	fw2.send(t, put(101, "k", "a"), put(103, "k", "b"), put(104, "k", "c"), del(107, "k"))
	if it := <-itemC; it.Offset != 104 || it.Op != "put" || string(it.Value) != "c" {
		t.Fatalf("first item after the resume: %+v", it)
	}
	expectWatch(t, w, change(107, "k"))
	if w.ResumeOffset() != 108 || w.Resumes() != 1 || cacheWatchResumes.Get()-before != 1 || cc.Addr() != fbs[1].Addr() {
		t.Fatalf("resume offset %d, resumes %d (metric +%d) on %s", w.ResumeOffset(), w.Resumes(),
			cacheWatchResumes.Get()-before, cc.Addr())
	}
}

func TestClusterCacheWatchResumesAfterLagFromResumeFrom(t *testing.T) {
	fb := watchFakes(t, 1)[0]
	cc := connectClusterFast(t, fb.config(), fb.Addr())
	w := clusterWatch(t, cc, WatchKey("k"), WatchRetained())
	fw := fb.nextWatch()
	if !fw.msg.Retained {
		t.Fatalf("first watch %+v", fw.msg)
	}
	a := put(40, "k", "A")
	a.Retained = true
	// Writes to other keys took 103..109; the broker dropped the watch at
	// 110, past the last change it delivered.
	fw.send(t, a, &wire.CacheWatchState{Offset: 100, Count: 1}, put(102, "k", "B"),
		&wire.CacheWatchLagged{WatchID: fw.id, ResumeFrom: 110})
	expectWatch(t, w, retained(40, "k"), state(100, 1), change(102, "k"))
	if w.ResumeOffset() != 103 {
		t.Fatalf("resume offset %d", w.ResumeOffset())
	}
	// The retained watch resumes with WatchFrom, not retained again.
	done := make(chan struct{})
	go func() {
		defer close(done)
		expectWatch(t, w, change(110, "k"), change(111, "k"))
	}()
	fw2 := fb.nextWatch()
	resumedFrom(t, fw2, 110)
	fw2.send(t, put(110, "k", "C"), put(111, "k", "D"))
	<-done
	if w.Resumes() != 1 || w.ResumeOffset() != 112 {
		t.Fatalf("resumes %d, resume offset %d", w.Resumes(), w.ResumeOffset())
	}
}

func TestClusterCacheWatchPassesAResnapshotThrough(t *testing.T) {
	fbs := watchFakes(t, 2)
	cc := connectClusterFast(t, fbs[0].config(), fbs[0].Addr(), fbs[1].Addr())
	w := clusterWatch(t, cc, WatchKey("k"))
	fw := fbs[0].nextWatch()
	fw.send(t, put(120, "k", "a"))
	expectWatch(t, w, change(120, "k"))
	fbs[0].Kill()

	done := make(chan struct{})
	go func() {
		defer close(done)
		// A broker that restarted with a shorter history: the current
		// value, the state, then changes at its own (lower) offsets.
		expectWatch(t, w, retained(5, "k"), state(7, 1), change(7, "k"), change(9, "k"))
	}()
	fw2 := fbs[1].nextWatch()
	resumedFrom(t, fw2, 121)
	v := put(5, "k", "now")
	v.Retained = true
	fw2.send(t, v, &wire.CacheWatchState{Offset: 7, Count: 1}, put(7, "k", "b"), put(9, "k", "c"))
	<-done
	if w.ResumeOffset() != 10 || w.Resumes() != 1 {
		t.Fatalf("resume offset %d, resumes %d", w.ResumeOffset(), w.Resumes())
	}
}

func TestClusterCacheWatchCloseDuringResume(t *testing.T) {
	fb := watchFakes(t, 1)[0]
	cc := connectClusterFast(t, fb.config(), fb.Addr())
	cc.resumeBase, cc.resumeMax = time.Hour, time.Hour // the resume waits in its backoff
	w := clusterWatch(t, cc, WatchKey("k"))
	fb.nextWatch()
	fb.Kill()
	// A Next whose ctx ends during the resume returns that error, so the
	// resume is under way.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := w.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next over a dead broker: %v", err)
	}
	errC := make(chan error, 1)
	go func() {
		_, err := w.Next(context.Background())
		errC <- err
	}()
	// Close only once that Next is resuming: a Next that started after
	// Close would return ErrClosed without trying.
	waitGoroutine(t, "(*resumable[...]).resume(")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errC:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Next during the resume: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the resume")
	}
	if _, err := w.Next(context.Background()); !errors.Is(err, ErrClosed) || w.Resumes() != 0 {
		t.Fatalf("after close: %v, %d resumes", err, w.Resumes())
	}
}

func TestClusterCacheWatchReturnsWhatAResumeCannotCure(t *testing.T) {
	fb := watchFakes(t, 1)[0]
	cc := connectClusterFast(t, fb.config(), fb.Addr())
	w := clusterWatch(t, cc, WatchKey("k"))
	fw := fb.nextWatch()
	fw.send(t, wire.NewError(wire.CodeUnauthorized, "revoked").ErrorMessage(true))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := w.Next(ctx)
	if be := asBroker(t, err); be.Code != wire.CodeUnauthorized || w.Resumes() != 0 {
		t.Fatalf("got %v after %d resumes", err, w.Resumes())
	}
}

// A retained watch lost before its StateComplete item is watched again
// retained: the values start over and end with StateComplete, so the
// caller is never left with half a state.
func TestClusterCacheWatchLostBeforeItsStateWatchesRetainedAgain(t *testing.T) {
	fbs := watchFakes(t, 2)
	cc := connectClusterFast(t, fbs[0].config(), fbs[0].Addr(), fbs[1].Addr())
	w := clusterWatch(t, cc, WatchPrefix("k"), WatchRetained())
	fw := fbs[0].nextWatch()
	a := put(40, "k1", "A")
	a.Retained = true
	fw.send(t, a) // one value of two, then the broker dies
	expectWatch(t, w, retained(40, "k1"))
	fbs[0].Kill()

	done := make(chan struct{})
	go func() {
		defer close(done)
		expectWatch(t, w, retained(40, "k1"), retained(41, "k2"), state(120, 2), change(120, "k2"))
	}()
	fw2 := fbs[1].nextWatch()
	if m := fw2.msg; !m.Retained || m.FromOffset != nil {
		t.Fatalf("resumed watch %+v, want retained again", m)
	}
	b := put(41, "k2", "B")
	b.Retained = true
	fw2.send(t, a, b, &wire.CacheWatchState{Offset: 120, Count: 2}, put(120, "k2", "C"))
	<-done
	if w.ResumeOffset() != 121 || w.Resumes() != 1 {
		t.Fatalf("resume offset %d, resumes %d", w.ResumeOffset(), w.Resumes())
	}
}
