package broker

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

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
		select {
		case f.fs.blocked <- struct{}{}:
		default:
		}
		<-gate
	}
	return f.File.Sync()
}

// TestShutdownGivesUpOnAHungFsync checks that a shutdown whose durable
// publish waits on an fsync that never returns ends when its budget does,
// reports the budget ran out, and never acknowledges the publish.
func TestShutdownGivesUpOnAHungFsync(t *testing.T) {
	fs := newHangFS()
	cfg := testConfig()
	cfg.Durable.Fsync = "always"
	cfg.Durable.fs = fs
	e := startDurable(t, cfg)
	// Runs before the env's shutdown and the temp dir's removal: lets the
	// hung fsync through and waits for the storage close shutdown gave up.
	t.Cleanup(func() {
		fs.release()
		<-e.srv.coreClosed
	})
	s := e.authed(e.dial(0), durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, s, "log", 0, 1)

	fs.hang()
	s.write(binPublish("log", true, 2, numbered(1)))
	<-fs.blocked
	// Read while the broker shuts down: a closed connection discards what
	// its streams had buffered.
	answers := make(chan wire.Message, 8)
	go func() {
		defer close(answers)
		for {
			f, err := s.next()
			if err != nil {
				return
			}
			m, err := wire.ParseMessage(f.Payload)
			if err != nil {
				m = &wire.Unknown{}
			}
			answers <- m
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.srv.Shutdown(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second): // a hang detector, not a speed bound
		t.Fatal("Shutdown did not return past its budget")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want the budget's end", err)
	}
	// The hung publish is answered with an error, never with publish_ok.
	var got []wire.Message
	for m := range answers {
		got = append(got, m)
	}
	if len(got) != 1 {
		t.Fatalf("answers %#v, want one", got)
	}
	if _, ok := got[0].(*wire.PublishOK); ok {
		t.Fatalf("the hung publish was acknowledged: %#v", got[0])
	}
	we := expectCode(t, got[0], wire.CodeDraining)
	if we.Retry != wire.RetryOutcomeUnknown || we.Detail["reason"] != "abandoned" {
		t.Fatalf("answer %+v, want outcome_unknown with reason abandoned", we)
	}
}
