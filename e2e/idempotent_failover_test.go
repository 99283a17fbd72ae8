package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// The spec's a_producer_publishing_through_its_leaders_death_loses_and_repeats_nothing
// (issue #19): a ClusterClient's IdempotentProducer publishes numbered
// batches to a factor-3 quorum stream under `always` fsync while the
// shard's leader is SIGKILLed. The producer follows the promoted
// follower and sends the batches in doubt again, identically; the new
// leader, whose producer table holds every batch its copy does, answers
// those that had landed with their first offsets. Every batch is in the
// log exactly once, in order, at the offset its answer named.
func TestAProducerPublishingThroughItsLeadersDeathLosesAndRepeatsNothing(t *testing.T) {
	d := startDev(t, 3, "FELIX_DURABLE_FSYNC=always")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const stream = "exactly-failover"
	ns := d.client.Namespace
	before := d.createQuorumStream(ctx, stream)
	oldName := nodeNameOf(before.NodeID)
	token := d.adminToken()
	cc := d.connectCluster(ctx, token)
	p, err := cc.IdempotentProducer(ctx)
	if err != nil {
		t.Fatal(err)
	}

	const batches = 300
	nb := produceNumbered(ctx, p, ns, stream, batches, 10)
	eventually(t, 60*time.Second, "a third of the batches before the kill", func() bool {
		return nb.done.Load() >= batches/3
	})
	d.kill9(oldName)
	killedAt := time.Now()
	offsets := nb.wait(ctx, t)
	t.Logf("the producer finished %v after the leader's SIGKILL", time.Since(killedAt))
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	if err := p.Close(cctx); err != nil {
		t.Fatalf("close: %v", err)
	}

	after := d.newLeaderOf(ctx, stream, before.NodeID, before.Generation)
	newName := nodeNameOf(after.NodeID)
	recs := readShard(ctx, t, d.connect(ctx, newName, token), ns, stream)
	gaps := checkNumbered(t, recs, offsets)
	if gaps != 1 {
		t.Errorf("%d gaps between batches, want one (the generation start)", gaps)
	}
	dups, _ := d.metric(newName, "felix_idempotent_duplicates_total")
	t.Logf("%d batches through the leader's death (%s → %s); the new leader answered %v re-sends from its table",
		batches, oldName, newName, dups)
}

// A stream deleted and created again at another width while a producer
// publishes keyed batches to it: the broker refuses the first batch
// declared by the old width (stale_width, nothing written), and the
// producer asks the width again and starts the stream's sequences again
// under a fresh producer id; every batch lands once, on the shard its key
// picks under the new width.
func TestAnIdempotentProducerStartsAFreshIdWhenItsStreamComesBackAtAnotherWidth(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const stream = "rewidth"
	n.mustFelix(ctx, "admin", "stream", "create", stream, "--durable", "--shards", "2")
	c := connectServing(t, ctx, n.sdkConfig(n.adminToken()), stream)
	p, err := c.IdempotentProducer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_ = p.Close(cctx)
	}()
	const batches = 12
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%d", i) }
	for i := range batches {
		if _, err := p.PublishKeyed(ctx, "default", stream, key(i), fmt.Appendf(nil, "old-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	first := p.ProducerIDFor("default", stream)
	n.mustFelix(ctx, "admin", "stream", "delete", stream, "--yes")
	n.mustFelix(ctx, "admin", "stream", "create", stream, "--durable", "--shards", "3")
	eventually(t, 20*time.Second, "the broker to serve the stream at 3 shards", func() bool {
		w, err := c.StreamShards(ctx, "default", stream)
		return err == nil && w == 3
	})
	for i := range batches {
		if _, err := p.PublishKeyed(ctx, "default", stream, key(i), fmt.Appendf(nil, "new-%d", i)); err != nil {
			t.Fatalf("batch %d under the new width: %v", i, err)
		}
	}
	if now := p.ProducerIDFor("default", stream); now == first || now == 0 || p.ProducerID() != first {
		t.Fatalf("ids: first %d, now %d, ProducerID %d", first, now, p.ProducerID())
	}
	got := map[string]uint32{}
	for shard := range uint32(3) {
		for _, r := range readAll(ctx, t, c, stream, shard) {
			if _, dup := got[string(r.Payload)]; dup {
				t.Fatalf("%q is in the log twice", r.Payload)
			}
			got[string(r.Payload)] = shard
		}
	}
	if len(got) != batches {
		t.Fatalf("the stream holds %d batches, want %d: %v", len(got), batches, got)
	}
	for i := range batches {
		p := fmt.Sprintf("new-%d", i)
		if sh, ok := got[p]; !ok || sh != wire.ShardForKey(key(i), 3) {
			t.Fatalf("%s on shard %d (present %v), its key picks %d", p, sh, ok, wire.ShardForKey(key(i), 3))
		}
	}
}
