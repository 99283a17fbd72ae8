package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// TestKeyedPublishesStayOnOneShardInOrder subscribes to every shard of a
// four-shard stream and publishes under several keys: each key's messages
// all arrive on one shard, in publish order, and unkeyed ones on shard 0.
func TestKeyedPublishesStayOnOneShardInOrder(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "orders", "--shards", "4")
	c := n.connect(ctx, n.adminToken())

	const shards, perKey = 4, 25
	keys := []string{"customer-1", "customer-2", "customer-3", "customer-4", "customer-5", "customer-6"}
	subs := make([]*felix.Subscription, shards)
	for s := range subs {
		var err error
		eventually(t, 10*time.Second, "subscribe", func() bool {
			subs[s], err = c.SubscribeFrom(ctx, "default", "orders", felix.SubscribeOptions{Shard: uint32(s)})
			return err == nil
		})
	}
	for i := 0; i < perKey; i++ {
		for _, k := range keys {
			if err := c.PublishKeyed(ctx, "default", "orders", []byte(k), []byte(fmt.Sprintf("%s/%03d", k, i)), felix.AckPerMessage); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Publish(ctx, "default", "orders", []byte(fmt.Sprintf("unkeyed/%03d", i)), felix.AckPerMessage); err != nil {
			t.Fatal(err)
		}
	}

	total := perKey * (len(keys) + 1)
	var mu sync.Mutex
	shardOf := map[string]int{}
	next := map[string]int{}
	got := 0
	var wg sync.WaitGroup
	recvCtx, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	for s, sub := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ev, err := sub.Next(recvCtx)
				if err != nil {
					return
				}
				key, seq, _ := strings.Cut(string(ev.Payload), "/")
				mu.Lock()
				if prev, ok := shardOf[key]; ok && prev != s {
					t.Errorf("key %s arrived on shards %d and %d", key, prev, s)
				}
				shardOf[key] = s
				if want := fmt.Sprintf("%03d", next[key]); seq != want {
					t.Errorf("key %s: got %s, want %s (out of order)", key, seq, want)
				}
				next[key]++
				got++
				if got == total {
					stop()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if got != total {
		t.Fatalf("received %d of %d messages", got, total)
	}
	if shardOf["unkeyed"] != 0 {
		t.Errorf("unkeyed publishes went to shard %d, want 0", shardOf["unkeyed"])
	}
	used := map[int]bool{}
	for _, s := range shardOf {
		used[s] = true
	}
	if len(used) < 2 {
		t.Errorf("six keys all landed on one shard: %v", shardOf)
	}
}
