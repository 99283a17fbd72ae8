package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/felixmq/felix/internal/faultfs"
	"github.com/felixmq/felix/wire"
)

// TestShutdownGivesUpOnAHungFsync checks that a shutdown whose durable
// publish waits on an fsync that never returns ends when its budget does,
// reports the budget ran out, and never acknowledges the publish.
func TestShutdownGivesUpOnAHungFsync(t *testing.T) {
	fs := faultfs.NewHang()
	cfg := testConfig()
	cfg.Durable.Fsync = "always"
	cfg.Durable.fs = fs
	e := startDurable(t, cfg)
	// Runs before the env's shutdown and the temp dir's removal: lets the
	// hung fsync through and waits for the storage close shutdown gave up.
	t.Cleanup(func() {
		fs.Release()
		<-e.srv.coreClosed
	})
	s := e.authed(e.dial(0), durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, s, "log", 0, 1)

	fs.Start()
	s.write(binPublish("log", true, 2, numbered(1)))
	<-fs.Blocked()
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
