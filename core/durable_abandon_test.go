package core

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// hangFS makes fsyncs hang while hung is set, until release: a disk that
// stopped answering. blocked receives once per fsync that hangs.
type hangFS struct {
	flog.FS
	mu      sync.Mutex
	hung    bool
	gate    chan struct{} // closed by release
	blocked chan struct{}
}

func newHangFS() *hangFS {
	return &hangFS{FS: flog.OSFS(), gate: make(chan struct{}), blocked: make(chan struct{}, 64)}
}

func (f *hangFS) hang() { f.mu.Lock(); f.hung = true; f.mu.Unlock() }

// release lets every hung and later fsync through; idempotent.
func (f *hangFS) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hung {
		f.hung = false
		close(f.gate)
	}
}

func (f *hangFS) OpenFile(name string, flag int, perm os.FileMode) (flog.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &hangFile{File: file, fs: f}, nil
}

type hangFile struct {
	flog.File
	fs *hangFS
}

func (f *hangFile) Sync() error {
	f.fs.mu.Lock()
	hung, gate := f.fs.hung, f.fs.gate
	f.fs.mu.Unlock()
	if hung {
		f.fs.blocked <- struct{}{}
		<-gate
	}
	return f.File.Sync()
}

func wantAbandoned(t *testing.T, who string, err error) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeDraining || we.Retry != wire.RetryOutcomeUnknown || we.Detail["reason"] != "abandoned" {
		t.Fatalf("%s: %v, want draining/outcome_unknown with reason abandoned", who, err)
	}
}

// TestDurableFinishGivesUpWhenItsContextEnds checks that Finish waiting
// on a hung fsync returns when its context ends, with an abandoned error
// and without delivering the batch, and that the shard then delivers
// nothing after it and refuses new claims.
func TestDurableFinishGivesUpWhenItsContextEnds(t *testing.T) {
	fs := newHangFS()
	cfg := Config{Storage: &StorageConfig{FS: fs, Fsync: flog.FsyncAlways}}
	_, st := newDurableStream(t, t.TempDir(), cfg, wire.StreamSpec{})
	t.Cleanup(fs.release) // before the broker closes: the close fsyncs
	sh := shard0(t, st)
	s := subscribe(t, sh, SubscribeOptions{})
	publish(t, sh, payloads(1, "before"))

	fs.hang()
	c1, err := sh.Claim(payloads(1, "hung"), "")
	if err != nil {
		t.Fatal(err)
	}
	c2, err := sh.Claim(payloads(1, "behind"), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	for _, c := range []*Claimed{c2, c1} {
		go func() { errs <- c.Finish(ctx) }()
	}
	<-fs.blocked
	cancel()
	for range 2 {
		wantAbandoned(t, "finish", <-errs)
	}
	if got := sh.NextOffset(); got != 1 {
		t.Fatalf("completed tail %d after the abandoned claims, want 1", got)
	}
	if depth, _ := s.q.depth(); depth != 1 {
		t.Fatalf("subscriber holds %d batches, want only the one before the hang", depth)
	}
	_, err = sh.Claim(payloads(1, "after"), "")
	wantAbandoned(t, "a claim after the abandonment", err)
}

// TestDurablePublishOutlivesItsCallersContext checks that Publish on a
// durable shard does not abandon the shard when its caller gives up: the
// caller's context bounds only the Block wait.
func TestDurablePublishOutlivesItsCallersContext(t *testing.T) {
	fs := newHangFS()
	cfg := Config{Storage: &StorageConfig{FS: fs, Fsync: flog.FsyncAlways}}
	_, st := newDurableStream(t, t.TempDir(), cfg, wire.StreamSpec{})
	t.Cleanup(fs.release)
	sh := shard0(t, st)
	fs.hang()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := sh.Publish(ctx, payloads(1, "x"), "")
		done <- err
	}()
	<-fs.blocked
	cancel()
	fs.release()
	if err := <-done; err != nil {
		t.Fatalf("publish: %v", err)
	}
	if off := publish(t, sh, payloads(1, "y")); off != 1 {
		t.Fatalf("next publish at %d, want 1", off)
	}
}
