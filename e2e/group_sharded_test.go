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

// Two merged consumers share one group over every shard of a 3-shard
// durable stream on felix dev --nodes 3 (each shard led by its own
// broker): keyed records land on every shard, each is handled and acked
// exactly once by one of the consumers, and the group's cursor reaches
// the tail on every shard, as the SDK and felix group describe report.
func TestShardedGroupConsumersShareEveryShardOfAStream(t *testing.T) {
	d := startDev(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d.createPlaced(ctx, "jobs", 3, "--durable")
	token := d.adminToken()
	pub := d.connectCluster(ctx, token)
	const total = 300
	for i := range total {
		key, payload := []byte(fmt.Sprintf("k%d", i)), []byte(fmt.Sprintf("r%d", i))
		eventually(t, expiryWait, fmt.Sprintf("publish r%d", i), func() bool {
			_, err := pub.PublishKeyedAcked(ctx, "default", "jobs", key, payload, felix.AckPerMessage)
			return err == nil
		})
	}
	pos, err := pub.GroupCreateStream(ctx, "default", "jobs", "workers", felix.GroupEarliest)
	if err != nil || len(pos) != 3 {
		t.Fatalf("group create on every shard: %v %v", pos, err)
	}

	var mu sync.Mutex
	handled := map[string]int{}    // payload -> times handled
	shardsSeen := map[uint32]int{} // shard -> records
	var consumers sync.WaitGroup
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	for w := range 2 {
		cc := d.connectCluster(ctx, token)
		sg, err := cc.GroupSharded(ctx, "default", "jobs", "workers")
		if err != nil {
			t.Fatal(err)
		}
		if sg.Shards() != 3 {
			t.Fatalf("consumer %d reads %d shards, want 3", w, sg.Shards())
		}
		consumers.Go(func() {
			defer sg.Close()
			err := sg.Consume(cctx, func(_ context.Context, r felix.GroupRecord) error {
				mu.Lock()
				defer mu.Unlock()
				handled[string(r.Payload)]++
				shardsSeen[r.Shard]++
				return nil
			}, felix.ConsumeOptions{MaxRecords: 8, Wait: 500 * time.Millisecond, Visibility: 5 * time.Minute})
			if err != nil {
				t.Errorf("consumer %d: %v", w, err)
			}
		})
	}
	var infos []felix.GroupInfo
	eventually(t, 60*time.Second, "every shard's cursor at its tail", func() bool {
		infos, err = pub.GroupDescribeStream(ctx, "default", "jobs", "workers")
		if err != nil || len(infos) != 3 {
			return false
		}
		for _, i := range infos {
			if i.Committed == nil || *i.Committed != i.Tail {
				return false
			}
		}
		return true
	})
	stop()
	consumers.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(handled) != total {
		t.Fatalf("%d distinct records handled, want %d", len(handled), total)
	}
	for i := range total {
		if k := handled[fmt.Sprintf("r%d", i)]; k != 1 {
			t.Fatalf("r%d handled %d times", i, k)
		}
	}
	if len(shardsSeen) != 3 {
		t.Fatalf("records came from shards %v, want all three", shardsSeen)
	}
	out := d.mustFelix(ctx, "group", "describe", "jobs", "workers", "-o", "json")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 {
		t.Fatalf("felix group describe printed %d lines, want one per shard:\n%s", len(lines), out)
	}
	for _, i := range infos {
		if want := fmt.Sprintf(`"committed":%d`, *i.Committed); !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf(`"shard":%d`, i.Shard)) {
			t.Fatalf("felix group describe = %s, want shard %d %s", out, i.Shard, want)
		}
	}

	// The CLI consumes every shard too: six more records, consumed and
	// acked by felix group consume without --shard.
	for i := total; i < total+6; i++ {
		if _, err := pub.PublishKeyedAcked(ctx, "default", "jobs", []byte(fmt.Sprintf("k%d", i)), []byte(fmt.Sprintf("r%d", i)), felix.AckPerMessage); err != nil {
			t.Fatal(err)
		}
	}
	out = d.mustFelix(ctx, "group", "consume", "jobs", "workers", "--count", "6", "-o", "json")
	for i := total; i < total+6; i++ {
		if !strings.Contains(out, fmt.Sprintf(`"payload":"r%d"`, i)) {
			t.Fatalf("felix group consume printed %s, missing r%d", out, i)
		}
	}
	infos, err = pub.GroupDescribeStream(ctx, "default", "jobs", "workers")
	for _, i := range infos {
		if err != nil || i.Committed == nil || *i.Committed != i.Tail {
			t.Fatalf("after felix group consume: %+v %v", infos, err)
		}
	}
}
