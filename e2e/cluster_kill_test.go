package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// pubOutcome is one publish of the kill test's publisher.
type pubOutcome struct {
	shard   uint32
	payload string
	err     error
	took    time.Duration
	at      time.Time
}

// acceptablePublishFailure reports whether a publish failed as a
// ClusterClient publisher may during a broker's death: with a class that
// says nothing was applied (retry, retry_after, redirect) or that it may
// have been (outcome_unknown, or the call's own deadline passing).
func acceptablePublishFailure(err error) bool {
	var be *felix.BrokerError
	if errors.As(err, &be) {
		return be.Retry.Retryable() || be.Retry == wire.RetryOutcomeUnknown
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// kill -9 one broker while a ClusterClient publishes keyed across every
// shard of a durable and an in-memory stream: subscribers to its
// in-memory shards end with a clear error (ErrSubscriptionLost on a
// plain client, a ShardNotice from SubscribeSharded); ClusterClient
// subscribers to its durable shards resume once it is back and get every
// acknowledged record once; every publish succeeds or fails retryable or
// outcome-unknown, never hanging past its context; every acknowledged
// record of the durable stream is read back once.
func TestClusterKillPublishersCarryOnAndSubscribersEndOrResume(t *testing.T) {
	d := startDev(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const shards = 6
	memV, durV := d.createPlaced(ctx, "mem", shards), d.createPlaced(ctx, "dur", shards, "--durable")
	token := d.adminToken()
	cc := d.connectCluster(ctx, token)

	// The victim owns shards of both streams.
	var victim devNode
	var memShards, durShards []uint32
	for _, n := range d.nodes {
		memShards, durShards = nil, nil
		for _, a := range memV.Shards {
			if a.NodeID == n.NodeID {
				memShards = append(memShards, a.Shard)
			}
		}
		for _, a := range durV.Shards {
			if a.NodeID == n.NodeID {
				durShards = append(durShards, a.Shard)
			}
		}
		if len(memShards) > 0 && len(durShards) > 0 {
			victim = n
			break
		}
	}
	if victim.Name == "" {
		t.Fatalf("no broker owns shards of both streams: %+v %+v", memV.Shards, durV.Shards)
	}

	// Subscribers on the victim's in-memory shards: a plain client's on
	// the victim, and the ClusterClient's merged one over every shard.
	plain := d.connect(ctx, victim.Name, token)
	memSub, err := plain.SubscribeFrom(ctx, "default", "mem", felix.SubscribeOptions{Shard: memShards[0]})
	if err != nil {
		t.Fatalf("subscribe to mem shard %d on %s: %v", memShards[0], victim.Name, err)
	}
	defer memSub.Close()
	sharded, err := cc.SubscribeSharded(ctx, "default", "mem", felix.ShardedOptions{})
	if err != nil {
		t.Fatalf("SubscribeSharded mem: %v", err)
	}
	defer sharded.Close()
	// ClusterClient subscribers on the victim's durable shards, from the
	// start.
	durSubs := map[uint32]*felix.ClusterSubscription{}
	for _, s := range durShards {
		sub, err := cc.SubscribeFrom(ctx, "default", "dur", felix.SubscribeOptions{Start: felix.Earliest(), Shard: s})
		if err != nil {
			t.Fatalf("subscribe to dur shard %d: %v", s, err)
		}
		defer sub.Close()
		durSubs[s] = sub
	}

	// The publisher: keyed across every shard of both streams, each call
	// bounded by its own context.
	const callTimeout = 5 * time.Second
	var (
		mu       sync.Mutex
		outcomes []pubOutcome
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			shard := uint32(i % shards)
			stream := "dur"
			if i%(2*shards) >= shards {
				stream = "mem"
			}
			payload := fmt.Sprintf("%s/%d/%d", stream, shard, i)
			pctx, pcancel := context.WithTimeout(ctx, callTimeout)
			start := time.Now()
			_, err := cc.PublishKeyedAcked(pctx, "default", stream, keyForShard(shard, shards), []byte(payload), felix.AckPerMessage)
			pcancel()
			o := pubOutcome{shard: shard, payload: payload, err: err, took: time.Since(start), at: time.Now()}
			mu.Lock()
			outcomes = append(outcomes, o)
			mu.Unlock()
			if err != nil {
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
	stopPublisher := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopPublisher()
	acksSince := func(since time.Time, stream string) map[uint32]int {
		mu.Lock()
		defer mu.Unlock()
		n := map[uint32]int{}
		for _, o := range outcomes {
			var s string
			var sh uint32
			var i int
			fmt.Sscanf(o.payload, "%3s/%d/%d", &s, &sh, &i)
			if o.err == nil && o.at.After(since) && s == stream {
				n[o.shard]++
			}
		}
		return n
	}
	eventually(t, expiryWait, "the publisher to be acked on every shard", func() bool {
		return len(acksSince(time.Time{}, "dur")) == shards && len(acksSince(time.Time{}, "mem")) == shards
	})

	d.kill9(victim.Name)
	killedAt := time.Now()

	// The plain client's subscription ends with ErrSubscriptionLost.
	nctx, ncancel := context.WithTimeout(ctx, expiryWait)
	for {
		_, err = memSub.Next(nctx)
		if err != nil {
			break
		}
	}
	ncancel()
	if !errors.Is(err, felix.ErrSubscriptionLost) {
		t.Fatalf("a subscription on the killed broker ended with %v, want ErrSubscriptionLost", err)
	}
	// The merged one reports a ShardNotice for a victim's shard and
	// carries on.
	victimMem := map[uint32]bool{}
	for _, s := range memShards {
		victimMem[s] = true
	}
	nctx, ncancel = context.WithTimeout(ctx, expiryWait)
	for {
		_, err = sharded.Next(nctx)
		var notice *felix.ShardNotice
		if errors.As(err, &notice) && victimMem[notice.Shard] {
			t.Logf("merged subscription: %v", notice)
			break
		}
		if err != nil && !errors.As(err, &notice) {
			t.Fatalf("the merged subscription ended with %v, want a ShardNotice for one of shards %v", err, memShards)
		}
	}
	ncancel()

	// The victim's in-memory shards move; the publisher is acked on all
	// of them again.
	eventually(t, expiryWait, "the victim's in-memory shards owned elsewhere and acked", func() bool {
		return len(acksSince(killedAt.Add(time.Second), "mem")) == shards
	})

	d.restart(victim.Name)
	restartedAt := time.Now()
	eventually(t, 2*expiryWait, "the publisher acked on every durable shard after the restart", func() bool {
		return len(acksSince(restartedAt, "dur")) == shards
	})
	stopPublisher()

	mu.Lock()
	final := append([]pubOutcome(nil), outcomes...)
	mu.Unlock()
	ackedDur := map[uint32]map[string]bool{}
	failures := 0
	for _, o := range final {
		if o.took > callTimeout+2*time.Second {
			t.Errorf("publish %s took %v, past its %v context", o.payload, o.took, callTimeout)
		}
		if o.err != nil {
			failures++
			if !acceptablePublishFailure(o.err) {
				t.Errorf("publish %s failed with %v: neither retryable nor outcome-unknown", o.payload, o.err)
			}
			continue
		}
		if o.payload[:3] == "dur" {
			if ackedDur[o.shard] == nil {
				ackedDur[o.shard] = map[string]bool{}
			}
			ackedDur[o.shard][o.payload] = true
		}
	}
	t.Logf("%d publishes, %d failed", len(final), failures)

	// An end marker per durable shard: reading up to it covers every
	// record published before.
	for s := uint32(0); s < shards; s++ {
		if _, err := cc.PublishKeyedAcked(ctx, "default", "dur", keyForShard(s, shards), []byte("end"), felix.AckPerMessage); err != nil {
			t.Fatalf("end marker on dur shard %d: %v", s, err)
		}
	}
	checkOnce := func(what string, next func(context.Context) (felix.Event, error), shard uint32) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 2*expiryWait)
		defer rcancel()
		seen := map[string]bool{}
		for {
			ev, err := next(rctx)
			if err != nil {
				t.Fatalf("%s, dur shard %d, after %d records: %v", what, shard, len(seen), err)
			}
			p := string(ev.Payload)
			if p == "end" {
				break
			}
			if seen[p] {
				t.Fatalf("%s, dur shard %d: %q delivered twice", what, shard, p)
			}
			seen[p] = true
		}
		for p := range ackedDur[shard] {
			if !seen[p] {
				t.Errorf("%s, dur shard %d: acknowledged %q never delivered", what, shard, p)
			}
		}
	}
	// The subscribers that lived through the kill resumed and got every
	// acknowledged record once.
	for s, sub := range durSubs {
		checkOnce("the subscriber through the kill", sub.Next, s)
		if sub.Resumes() == 0 {
			t.Errorf("the subscriber to dur shard %d never resumed", s)
		}
	}
	// Every acknowledged record of every durable shard reads back once.
	for s := uint32(0); s < shards; s++ {
		sub, err := cc.SubscribeFrom(ctx, "default", "dur", felix.SubscribeOptions{Start: felix.Earliest(), Shard: s})
		if err != nil {
			t.Fatalf("subscribe to dur shard %d after the restart: %v", s, err)
		}
		checkOnce("read back", sub.Next, s)
		sub.Close()
	}
}
