package e2e

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// SIGTERM with one idle subscriber: the broker ends the subscription with
// a draining frame at once, instead of waiting for its control stream
// until half the drain budget has passed, and exits 0. The budget is made
// far longer than the test's wait, so a drain that still waited for the
// idle subscriber could not finish in time.
func TestShutdownWithAnIdleSubscriberEndsItDraining(t *testing.T) {
	n := startServe(t, "FELIX_SHUTDOWN_TIMEOUT=30m")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "idle")
	c := n.connect(ctx, n.adminToken())
	var sub *felix.Subscription
	eventually(t, 10*time.Second, "subscribe to the new stream", func() bool {
		s, err := c.Subscribe(ctx, "default", "idle")
		sub = s
		return err == nil
	})
	n.mustFelix(ctx, "pub", "--ack", "idle", "one")
	if ev, err := sub.Next(ctx); err != nil || string(ev.Payload) != "one" {
		t.Fatalf("first event: %q %v", ev.Payload, err)
	}
	// The subscription is idle now.
	ended := make(chan error, 1)
	go func() {
		_, err := sub.Next(ctx)
		ended <- err
	}()
	if err := n.stop(syscall.SIGTERM, time.Minute); err != nil {
		t.Errorf("felix serve exited with %v after SIGTERM; want 0", err)
	}
	err := <-ended
	var be *felix.BrokerError
	if !errors.As(err, &be) || be.Code != wire.CodeDraining {
		t.Fatalf("the subscription ended with %v; want the broker's draining frame", err)
	}
	if !errors.Is(err, felix.ErrSubscriptionLost) {
		t.Errorf("a draining end is not ErrSubscriptionLost (a ClusterSubscription would not resume): %v", err)
	}
}
