package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// TestGaugesReturnToZeroAfterChurn opens and closes many connections that
// publish, subscribe and use the cache, some closing abruptly mid-stream,
// then checks that the broker's gauges of live things are back at zero:
// anything left there would be an entry never reclaimed.
func TestGaugesReturnToZeroAfterChurn(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "churn")
	n.mustFelix(ctx, "admin", "cache", "create", "churn-cache")
	tok := n.adminToken()
	eventually(t, 10*time.Second, "the catalog to reach the broker", func() bool {
		c, err := felix.Connect(ctx, n.sdkConfig(tok))
		if err != nil {
			return false
		}
		defer c.Close()
		return c.CachePut(ctx, "default", "churn-cache", "k", []byte("v"), 0) == nil
	})

	const rounds, parallel = 10, 8
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		for p := 0; p < parallel; p++ {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				c, err := felix.Connect(ctx, n.sdkConfig(tok))
				if err != nil {
					t.Errorf("connect: %v", err)
					return
				}
				defer c.Close()
				sub, err := c.Subscribe(ctx, "default", "churn")
				if err != nil {
					t.Errorf("subscribe: %v", err)
					return
				}
				for i := 0; i < 20; i++ {
					msg := []byte(fmt.Sprintf("%d-%d-%d", r, p, i))
					if err := c.Publish(ctx, "default", "churn", msg, felix.AckPerMessage); err != nil {
						t.Errorf("publish: %v", err)
						return
					}
					if err := c.CachePut(ctx, "default", "churn-cache", string(msg), msg, time.Minute); err != nil {
						t.Errorf("cache put: %v", err)
						return
					}
				}
				if p%2 == 0 {
					sub.Close() // the rest end with the connection
				}
			}(p)
		}
		wg.Wait()
	}
	for _, g := range []string{"felix_broker_connections", "felix_broker_subscriptions",
		"felix_sub_active_connections", "felix_broker_ingress_queue_depth", "felix_broker_out_ack_depth"} {
		eventually(t, 15*time.Second, g+" to return to 0", func() bool { return n.metric(g) == 0 })
	}
}
