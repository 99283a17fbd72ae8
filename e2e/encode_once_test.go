package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// TestOneBatchToFiftySubscribersIsEncodedOnce publishes one batch to a
// stream with 50 subscribers over the network and counts the event frames
// the broker encoded: one, shared by all 50, each of which receives the
// whole batch.
func TestOneBatchToFiftySubscribersIsEncodedOnce(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "shared")
	tok := n.adminToken()
	c := n.connect(ctx, tok)

	const subscribers = 50
	subs := make([]*felix.Subscription, subscribers)
	for i := range subs {
		var err error
		eventually(t, 10*time.Second, "subscribe", func() bool {
			subs[i], err = c.Subscribe(ctx, "default", "shared")
			return err == nil
		})
	}
	before := n.metric("felix_event_frames_encoded_total")
	batch := make([][]byte, 8)
	for i := range batch {
		batch[i] = []byte(fmt.Sprintf("record-%d", i))
	}
	if err := c.PublishBatch(ctx, "default", "shared", batch, felix.AckPerBatch); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, sub := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range batch {
				ev, err := sub.Next(ctx)
				if err != nil {
					t.Errorf("subscriber %d, record %d: %v", i, j, err)
					return
				}
				if string(ev.Payload) != string(batch[j]) {
					t.Errorf("subscriber %d got %q, want %q", i, ev.Payload, batch[j])
				}
			}
		}()
	}
	wg.Wait()
	if got := n.metric("felix_event_frames_encoded_total") - before; got != 1 {
		t.Fatalf("the broker encoded %v event frames for one batch to %d subscribers, want 1", got, subscribers)
	}
}
