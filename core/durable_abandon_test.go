package core

import (
	"context"
	"errors"
	"testing"

	"github.com/felixmq/felix/internal/faultfs"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

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
	fs := faultfs.NewHang()
	cfg := Config{Storage: &StorageConfig{FS: fs, Fsync: flog.FsyncAlways}}
	_, st := newDurableStream(t, t.TempDir(), cfg, wire.StreamSpec{})
	t.Cleanup(fs.Release) // before the broker closes: the close fsyncs
	sh := shard0(t, st)
	s := subscribe(t, sh, SubscribeOptions{})
	publish(t, sh, payloads(1, "before"))

	fs.Start()
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
	<-fs.Blocked()
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
	fs := faultfs.NewHang()
	cfg := Config{Storage: &StorageConfig{FS: fs, Fsync: flog.FsyncAlways}}
	_, st := newDurableStream(t, t.TempDir(), cfg, wire.StreamSpec{})
	t.Cleanup(fs.Release)
	sh := shard0(t, st)
	fs.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := sh.Publish(ctx, payloads(1, "x"), "")
		done <- err
	}()
	<-fs.Blocked()
	cancel()
	fs.Release()
	if err := <-done; err != nil {
		t.Fatalf("publish: %v", err)
	}
	if off := publish(t, sh, payloads(1, "y")); off != 1 {
		t.Fatalf("next publish at %d, want 1", off)
	}
}
