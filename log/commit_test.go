package log

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// TestGroupCommitShares holds the first fsync while other appends are
// written: they must all be covered by the one next fsync.
func TestGroupCommitShares(t *testing.T) {
	o := testOptions(t)
	o.Fsync, o.SegmentBytes = FsyncAlways, 1<<20
	fs := newFaultFS()
	o.FS = fs
	l := mustOpen(t, o)
	gate := make(chan struct{})
	fs.mu.Lock()
	fs.syncGate, fs.syncEnter = gate, make(chan struct{}, 1)
	fs.mu.Unlock()

	first, err := l.Append([][]byte{[]byte("first")}, "")
	if err != nil {
		t.Fatal(err)
	}
	firstDone := make(chan error, 1)
	go func() { firstDone <- l.Wait(t.Context(), first) }()
	<-fs.syncEnter // the flusher is inside fsync now

	const n = 20
	var wg sync.WaitGroup
	errC := make(chan error, n)
	var written sync.WaitGroup
	written.Add(n)
	for i := range n {
		wg.Go(func() {
			a, err := l.Append([][]byte{payload(i, 32)}, "")
			written.Done()
			if err == nil {
				err = l.Wait(t.Context(), a)
			}
			errC <- err
		})
	}
	written.Wait()
	fs.mu.Lock()
	fs.syncGate, fs.syncEnter = nil, nil
	fs.mu.Unlock()
	close(gate)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errC)
	for err := range errC {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := l.Stats().Fsyncs; got != 2 {
		t.Fatalf("%d fsyncs for %d appends, want 2", got, n+1)
	}
	if l.DurableOffset() != n+1 {
		t.Fatalf("durable %d", l.DurableOffset())
	}
}

func TestGroupCommitConcurrent(t *testing.T) {
	o := testOptions(t)
	o.Fsync, o.SegmentBytes = FsyncAlways, 1<<20
	l := mustOpen(t, o)
	const goroutines, each = 16, 30
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				a, err := l.Append([][]byte{payload(g*each+i, 64)}, "")
				if err == nil {
					err = l.Wait(context.Background(), a)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := l.Stats()
	if st.Appends != goroutines*each || st.Fsyncs > st.Appends {
		t.Fatalf("appends %d fsyncs %d", st.Appends, st.Fsyncs)
	}
	t.Logf("%d appends, %d fsyncs", st.Appends, st.Fsyncs)
	if l.DurableOffset() != goroutines*each {
		t.Fatalf("durable %d", l.DurableOffset())
	}
}

func TestWaitContextCancel(t *testing.T) {
	o := testOptions(t)
	o.Fsync = FsyncAlways
	fs := newFaultFS()
	o.FS = fs
	l := mustOpen(t, o)
	gate := make(chan struct{})
	fs.mu.Lock()
	fs.syncGate = gate
	fs.mu.Unlock()
	a, err := l.Append([][]byte{[]byte("x")}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Wait(ctx, a); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait: %v", err)
	}
	close(gate)
	if err := l.Wait(t.Context(), a); err != nil {
		t.Fatal(err)
	}
}

func TestFsyncFailureAlways(t *testing.T) {
	o := testOptions(t)
	o.Fsync = FsyncAlways
	fs := newFaultFS()
	o.FS = fs
	l := mustOpenFailing(t, o)
	ok, _ := l.Append([][]byte{[]byte("ok")}, "")
	if err := l.Wait(t.Context(), ok); err != nil {
		t.Fatal(err)
	}
	fs.setSyncErr(syscall.EIO)
	a, err := l.Append([][]byte{[]byte("lost")}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(t.Context(), a); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("wait after failed fsync: %v", err)
	}
	if l.DurableOffset() != 1 || !errors.Is(l.Err(), ErrFailed) {
		t.Fatalf("durable %d err %v", l.DurableOffset(), l.Err())
	}
	fs.setSyncErr(nil) // a later fsync that would succeed must not revive it
	if err := l.Sync(); !errors.Is(err, ErrFailed) {
		t.Fatalf("sync: %v", err)
	}
	if _, err := l.Append([][]byte{[]byte("more")}, ""); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after failure: %v", err)
	}
	if err := l.Wait(t.Context(), a); !errors.Is(err, ErrFailed) {
		t.Fatalf("wait again: %v", err)
	}
	if err := l.Wait(t.Context(), ok); err != nil {
		t.Fatalf("earlier durable append: %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("close: %v", err)
	}
}

func TestFsyncFailurePeriodic(t *testing.T) {
	o := testOptions(t)
	o.Fsync, o.FsyncInterval = FsyncPeriodic, time.Hour
	fs := newFaultFS()
	o.FS = fs
	l := mustOpenFailing(t, o)
	a, _ := l.Append([][]byte{[]byte("x")}, "")
	if err := l.Wait(t.Context(), a); err != nil || l.DurableOffset() != 1 {
		t.Fatalf("periodic wait: %v durable %d", err, l.DurableOffset())
	}
	fs.setSyncErr(syscall.EIO)
	if err := l.Sync(); !errors.Is(err, ErrFailed) {
		t.Fatalf("sync: %v", err)
	}
	// Never fsynced, so no longer reported durable.
	if err := l.Wait(t.Context(), a); !errors.Is(err, ErrFailed) || l.DurableOffset() != 0 {
		t.Fatalf("wait: %v durable %d", err, l.DurableOffset())
	}
}

// TestPeriodicFsync runs the flusher on synctest's fake clock.
func TestPeriodicFsync(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		o := Options{Dir: dir, Fsync: FsyncPeriodic, FsyncInterval: time.Second, Logger: quietLogger()}
		l, _, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		l.Append([][]byte{[]byte("x")}, "")
		synctest.Wait()
		if l.SyncedOffset() != 0 || l.DurableOffset() != 1 {
			t.Fatalf("before tick: synced %d durable %d", l.SyncedOffset(), l.DurableOffset())
		}
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if l.SyncedOffset() != 1 || l.Stats().Fsyncs != 1 {
			t.Fatalf("after tick: synced %d fsyncs %d", l.SyncedOffset(), l.Stats().Fsyncs)
		}
		time.Sleep(5 * time.Second) // nothing dirty: no more fsyncs
		synctest.Wait()
		if l.Stats().Fsyncs != 1 {
			t.Fatalf("idle fsyncs %d", l.Stats().Fsyncs)
		}
	})
}

// TestAlwaysInBubble runs group commit inside a synctest bubble, which
// also proves Close leaves no goroutine behind.
func TestAlwaysInBubble(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		l, _, err := Open(Options{Dir: dir, Fsync: FsyncAlways, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				a, err := l.Append([][]byte{payload(i, 10)}, "")
				if err == nil {
					err = l.Wait(t.Context(), a)
				}
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if l.DurableOffset() != 8 || l.SyncedOffset() != 8 {
			t.Fatalf("durable %d synced %d", l.DurableOffset(), l.SyncedOffset())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
