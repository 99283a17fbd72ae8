package broker

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// An idle subscription does not hold the drain: with a budget far longer
// than any test (so the old wait for its control stream, half of it,
// would never end in time), Shutdown ends the subscription at once with
// a draining error frame and FIN, after what was queued for it, and
// returns cleanly.
func TestShutdownEndsAnIdleSubscriptionWithDraining(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "quiet"})
	qc := e.dial(0)
	s := e.authed(qc, 0, allFeatures, pubAll, "stream.subscribe:acme/prod/*")
	sub := e.subscribe(qc, s, "quiet")
	s.write(binPublish("quiet", true, 1, numbered(0), numbered(1)))
	if _, ok := s.recv().(*wire.PublishOK); !ok {
		t.Fatal("publish not acked")
	}
	checkOrder(t, sub.payloads(2), 2) // then the subscription idles

	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.srv.Shutdown(ctx) }()

	m, err := wire.ParseMessage(sub.frame().Payload)
	if err != nil {
		t.Fatal(err)
	}
	expectCode(t, m, wire.CodeDraining)
	if _, err := sub.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the draining frame: %v, want the stream finished (FIN)", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(time.Minute): // a hang detector, far below the half hour the old drain waited
		t.Fatal("Shutdown still waits for the idle subscriber's control stream")
	}
}
