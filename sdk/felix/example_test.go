package felix_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

func Example() {
	ctx := context.Background()
	cfg := felix.ConfigFromEnv() // FELIX_BROKER_ADDR, FELIX_TENANT, FELIX_TOKEN, FELIX_CA_FILE, ...
	client, err := felix.Connect(ctx, cfg)
	if err != nil {
		fmt.Println("connect:", err)
		return
	}
	defer client.Close()

	// Wait for the broker's answer.
	if err := client.Publish(ctx, "prod", "orders", []byte(`{"id":1}`), felix.AckPerMessage); err != nil {
		var be *felix.BrokerError
		if errors.As(err, &be) && be.Retry == wire.RetryRetryAfter {
			fmt.Println("busy, try again later")
		}
		return
	}

	// Fire and forget, then flush.
	for i := range 100 {
		_ = client.Publish(ctx, "prod", "ticks", fmt.Appendf(nil, "tick %d", i), felix.AckNone)
	}
	if err := client.Finish(ctx); err != nil {
		fmt.Println("some ticks were not sent:", err)
	}
}

func ExampleClient_Subscribe() {
	ctx := context.Background()
	client, err := felix.Connect(ctx, felix.ConfigFromEnv())
	if err != nil {
		return
	}
	defer client.Close()
	sub, err := client.Subscribe(ctx, "prod", "orders")
	if err != nil {
		return
	}
	defer sub.Close()
	for {
		waitCtx, cancel := context.WithTimeout(ctx, time.Second)
		ev, err := sub.Next(waitCtx) // cancel-safe: a timeout loses nothing
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			continue
		case errors.Is(err, felix.ErrSubscriptionLost):
			return // resubscribe, from the last offset on a durable stream
		case err != nil:
			return
		}
		fmt.Printf("offset %d: %s\n", ev.Offset, ev.Payload)
	}
}

func ExampleClient_CacheGet() {
	ctx := context.Background()
	client, err := felix.Connect(ctx, felix.ConfigFromEnv())
	if err != nil {
		return
	}
	defer client.Close()
	_ = client.CachePut(ctx, "prod", "sessions", "user-1", []byte("token"), time.Minute)
	v, found, err := client.CacheGet(ctx, "prod", "sessions", "user-1")
	if err == nil && found {
		fmt.Printf("session %s\n", v)
	}
}

func ExampleConnectCluster() {
	ctx := context.Background()
	cfg := felix.ConfigFromEnv()
	cc, err := felix.ConnectCluster(ctx, []string{"10.0.0.1:5000", "10.0.0.2:5000"}, cfg)
	if err != nil {
		return
	}
	defer cc.Close()
	_ = cc.Publish(ctx, "prod", "orders", []byte("x"), felix.AckPerMessage)
}

// Read a fixed range of a durable stream page by page, then stop.
func ExampleClient_Read() {
	ctx := context.Background()
	client, err := felix.Connect(ctx, felix.ConfigFromEnv())
	if err != nil {
		fmt.Println("connect:", err)
		return
	}
	defer client.Close()
	from, end := uint64(1000), uint64(2000)
	for from < end {
		page, err := client.Read(ctx, "prod", "matches", 0, from, &end, 500)
		var cursor *felix.SubscribeCursorError
		if errors.As(err, &cursor) {
			fmt.Println("not retained any more; nearest offset is", cursor.Available)
			return
		}
		if err != nil || len(page.Records) == 0 {
			return // failed, or nothing committed past here yet
		}
		for _, r := range page.Records {
			fmt.Println(r.Offset, string(r.Payload))
		}
		from = page.NextOffset
	}
}

// A consumer that checkpoints offsets and survives lags and broker
// failures: the ClusterSubscription resumes on its own, so only a start
// lost to retention needs handling.
func ExampleClusterClient_SubscribeFrom() {
	ctx := context.Background()
	cluster, err := felix.ConnectCluster(ctx, []string{"broker-1:7700", "broker-2:7700"}, felix.ConfigFromEnv())
	if err != nil {
		fmt.Println("connect:", err)
		return
	}
	defer cluster.Close()
	start := felix.Earliest()
	for {
		sub, err := cluster.SubscribeFrom(ctx, "prod", "events", felix.SubscribeOptions{Start: start})
		var cursor *felix.SubscribeCursorError
		if errors.As(err, &cursor) {
			start = felix.AtOffset(cursor.Available) // the smallest gap there is
			continue
		}
		if err != nil {
			return
		}
		for {
			ev, err := sub.Next(ctx)
			if errors.As(err, &cursor) {
				start = felix.AtOffset(cursor.Available)
				break
			}
			if err != nil {
				sub.Close()
				return
			}
			fmt.Println(ev.Offset, string(ev.Payload)) // then checkpoint ev.Offset
			start = felix.AtOffset(ev.Offset + 1)
		}
		sub.Close()
	}
}

// Read every shard of a stream as one subscription, and carry on later
// from the per-shard positions.
func ExampleClusterClient_SubscribeSharded() {
	ctx := context.Background()
	cluster, err := felix.ConnectCluster(ctx, []string{"broker-1:7700"}, felix.ConfigFromEnv())
	if err != nil {
		fmt.Println("connect:", err)
		return
	}
	defer cluster.Close()
	sub, err := cluster.SubscribeSharded(ctx, "acme", "orders", felix.ShardedOptions{Start: felix.Earliest()})
	if err != nil {
		fmt.Println("subscribe:", err)
		return
	}
	defer sub.Close()
	for {
		ev, err := sub.Next(ctx)
		var notice *felix.ShardNotice
		switch {
		case errors.As(err, &notice):
			fmt.Println(notice) // a shard resumed elsewhere, or ended: the others carry on
			continue
		case err != nil:
			fmt.Println("next:", err)
			return
		}
		fmt.Printf("shard %d offset %d: %s\n", ev.Shard, ev.Offset, ev.Payload)
		_ = sub.Positions() // save these to resume with ShardedOptions.Positions
	}
}
