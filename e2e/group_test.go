package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// durableClient creates a durable stream on n and returns a client of n
// once the broker serves it.
func durableClient(ctx context.Context, t *testing.T, n *node, stream string) *felix.Client {
	t.Helper()
	n.mustFelix(ctx, "admin", "stream", "create", stream, "--durable")
	c := n.connect(ctx, n.adminToken())
	eventually(t, 15*time.Second, "the durable stream to reach the broker", func() bool {
		_, err := c.Read(ctx, "default", stream, 0, 0, nil, 1)
		return err == nil
	})
	return c
}

// publishNumbered publishes n records "r<i>" to a durable stream in
// batches, acked.
func publishNumbered(t *testing.T, ctx context.Context, c *felix.Client, stream string, n int) {
	t.Helper()
	for i := 0; i < n; i += 50 {
		var batch [][]byte
		for j := i; j < min(i+50, n); j++ {
			batch = append(batch, fmt.Appendf(nil, "r%d", j))
		}
		if _, err := c.PublishBatchAcked(ctx, "default", stream, batch, felix.AckPerBatch); err != nil {
			t.Fatal(err)
		}
	}
}

// Two consumers share a group on a durable stream through the binary:
// every record is handed to one of them and acked exactly once, and the
// group's cursor reaches the tail. A consumer that dies without acking
// has its records redelivered, to another consumer, once their
// visibility lapses.
func TestGroupConsumersShareAStreamAndLapsedClaimsComeBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n := startServe(t)
	c := durableClient(ctx, t, n, "jobs")
	if !c.SupportsGroups() || c.ServerFeatures()&wire.FeatureGroupAdmin == 0 {
		t.Fatalf("felix serve does not advertise consumer groups: %#x", c.ServerFeatures())
	}
	const total = 300
	publishNumbered(t, ctx, c, "jobs", total)

	var mu sync.Mutex
	acked := map[uint64]int{}
	var wg sync.WaitGroup
	for w := range 2 {
		cl := n.connect(ctx, n.adminToken())
		wg.Go(func() {
			for range 2000 { // bounded
				recs, err := cl.GroupPoll(ctx, "default", "jobs", 0, "workers", 7+w, felix.GroupPollOptions{Wait: 200 * time.Millisecond, Visibility: 5 * time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				for _, r := range recs {
					if string(r.Payload) != fmt.Sprintf("r%d", r.Offset) {
						t.Errorf("offset %d carries %q", r.Offset, r.Payload)
					}
					if err := cl.GroupAck(ctx, "default", "jobs", 0, "workers", r.Offset); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					acked[r.Offset]++
					mu.Unlock()
				}
				if len(recs) == 0 {
					info, err := cl.GroupDescribe(ctx, "default", "jobs", 0, "workers")
					if err == nil && info.Committed != nil && *info.Committed == total {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if len(acked) != total {
		t.Fatalf("%d records acked, want %d", len(acked), total)
	}
	for o, k := range acked {
		if k != 1 {
			t.Fatalf("offset %d acked %d times", o, k)
		}
	}

	// A consumer that dies holding claims: they come back after their
	// visibility, to someone else, as second attempts.
	publishNumbered(t, ctx, c, "jobs", 5) // offsets 300..304 ("r0".."r4")
	dying := n.connect(ctx, n.adminToken())
	held, err := dying.GroupPoll(ctx, "default", "jobs", 0, "workers", 10, felix.GroupPollOptions{Visibility: time.Second})
	if err != nil || len(held) != 5 {
		t.Fatalf("the dying consumer got %d records: %v", len(held), err)
	}
	dying.Close()
	var again []felix.GroupRecord
	deadline := time.Now().Add(30 * time.Second)
	for len(again) < 5 && time.Now().Before(deadline) {
		recs, err := c.GroupPoll(ctx, "default", "jobs", 0, "workers", 10, felix.GroupPollOptions{Wait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, recs...)
	}
	if len(again) != 5 {
		t.Fatalf("%d of the dead consumer's 5 records came back", len(again))
	}
	for i, r := range again {
		if r.Offset != held[i].Offset || r.Attempts != 2 {
			t.Fatalf("redelivery %d: offset %d attempts %d, want %d attempts 2", i, r.Offset, r.Attempts, held[i].Offset)
		}
		if err := c.GroupAck(ctx, "default", "jobs", 0, "workers", r.Offset); err != nil {
			t.Fatal(err)
		}
	}
	out := n.mustFelix(ctx, "group", "describe", "jobs", "workers", "-o", "json")
	if want := `"committed":305`; !strings.Contains(out, want) {
		t.Fatalf("felix group describe = %s, want %s", out, want)
	}
}

// SIGKILL of the broker keeps the group's committed cursor: after the
// restart the group gets every record past it (claimed before the kill or
// not) and none before it.
func TestGroupCursorSurvivesSIGKILL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	n := startServeIn(t, dir)
	c := durableClient(ctx, t, n, "jobs")
	publishNumbered(t, ctx, c, "jobs", 100)
	recs, err := c.GroupPoll(ctx, "default", "jobs", 0, "workers", 70, felix.GroupPollOptions{})
	if err != nil || len(recs) != 70 {
		t.Fatalf("poll: %d records, %v", len(recs), err)
	}
	for o := uint64(0); o < 50; o++ {
		if err := c.GroupAck(ctx, "default", "jobs", 0, "workers", o); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.GroupAck(ctx, "default", "jobs", 0, "workers", 60); err != nil { // above a gap: not committed
		t.Fatal(err)
	}
	if err := c.GroupDeadLetter(ctx, "default", "jobs", 0, "workers", 55); err != nil {
		t.Fatal(err)
	}
	info, err := c.GroupDescribe(ctx, "default", "jobs", 0, "workers")
	if err != nil || info.Committed == nil || *info.Committed != 50 {
		t.Fatalf("before the kill: %+v %v", info, err)
	}
	addr := n.client.BrokerAddr
	c.Close()
	n.stop(syscall.SIGKILL, 10*time.Second)

	m := startServeOn(t, dir, addr)
	c2 := m.connect(ctx, m.adminToken())
	var info2 felix.GroupInfo
	eventually(t, 15*time.Second, "the group to be served again", func() bool {
		info2, err = c2.GroupDescribe(ctx, "default", "jobs", 0, "workers")
		return err == nil
	})
	if info2.Committed == nil || *info2.Committed != 50 || info2.DeadLetters != 1 {
		t.Fatalf("after the kill: %+v", info2)
	}
	got := map[uint64]bool{}
	for range 100 { // bounded
		recs, err := c2.GroupPoll(ctx, "default", "jobs", 0, "workers", 100, felix.GroupPollOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if r.Offset < 50 {
				t.Fatalf("offset %d, below the committed cursor, delivered again", r.Offset)
			}
			got[r.Offset] = true
			if err := c2.GroupAck(ctx, "default", "jobs", 0, "workers", r.Offset); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 50..99 but 55 (a dead letter, kept) came round; 60's ack before the
	// kill was memory above the cursor, so it may come again.
	for o := uint64(50); o < 100; o++ {
		if o != 55 && o != 60 && !got[o] {
			t.Fatalf("offset %d never came round after the restart (got %v)", o, got)
		}
	}
	if got[55] {
		t.Fatal("the dead letter was delivered again")
	}
	if dl, err := c2.GroupDeadLetters(ctx, "default", "jobs", 0, "workers"); err != nil || len(dl) != 1 || dl[0] != 55 {
		t.Fatalf("dead letters after restart: %v %v", dl, err)
	}
}

// A poison record is dead-lettered after FELIX_GROUP_MAX_ATTEMPTS
// deliveries, so the queue behind it moves on; felix group dead-letters
// lists it and felix group redrive brings it back as a first attempt.
func TestGroupPoisonRecordIsDeadLetteredAndRedriven(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n := startServe(t, "FELIX_GROUP_MAX_ATTEMPTS=2")
	c := durableClient(ctx, t, n, "jobs")
	publishNumbered(t, ctx, c, "jobs", 2)
	for attempt := uint32(1); attempt <= 2; attempt++ {
		recs, err := c.GroupPoll(ctx, "default", "jobs", 0, "workers", 1, felix.GroupPollOptions{})
		if err != nil || len(recs) != 1 || recs[0].Offset != 0 || recs[0].Attempts != attempt {
			t.Fatalf("attempt %d: %+v %v", attempt, recs, err)
		}
		if err := c.GroupNack(ctx, "default", "jobs", 0, "workers", recs[0], 0); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := c.GroupPoll(ctx, "default", "jobs", 0, "workers", 1, felix.GroupPollOptions{})
	if err != nil || len(recs) != 1 || recs[0].Offset != 1 {
		t.Fatalf("after the poison record's attempts: %+v %v", recs, err)
	}
	if err := c.GroupAck(ctx, "default", "jobs", 0, "workers", 1); err != nil {
		t.Fatal(err)
	}
	if out := strings.TrimSpace(n.mustFelix(ctx, "group", "dead-letters", "jobs", "workers")); out != "0" {
		t.Fatalf("felix group dead-letters = %q, want 0", out)
	}
	n.mustFelix(ctx, "group", "redrive", "jobs", "workers", "0")
	out := n.mustFelix(ctx, "group", "poll", "jobs", "workers", "-o", "json")
	if !strings.Contains(out, `"offset":0`) || !strings.Contains(out, `"attempts":1`) {
		t.Fatalf("felix group poll after redrive = %s", out)
	}
	n.mustFelix(ctx, "group", "ack", "jobs", "workers", "0")
	out = n.mustFelix(ctx, "group", "describe", "jobs", "workers", "-o", "json")
	if !strings.Contains(out, `"committed":2`) || !strings.Contains(out, `"dead_letters":0`) {
		t.Fatalf("felix group describe = %s", out)
	}
}

// Groups under SIGKILL loops: a consumer acks part of the stream, the
// broker is killed (claims standing), restarted, and so on; in the end
// every record has been acknowledged, none is lost, and nothing below a
// cursor the group reported before a kill is delivered after it.
func TestGroupEveryRecordIsDeliveredUntilAckedAcrossSIGKILLs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	dir := t.TempDir()
	n := startServeIn(t, dir)
	c := durableClient(ctx, t, n, "jobs")
	const total = 400
	publishNumbered(t, ctx, c, "jobs", total)
	acked := map[uint64]bool{}
	held := map[uint64]felix.GroupRecord{} // claimed and not acked in this broker's life
	floor := uint64(0)                     // the cursor the group reported before the last kill
	for round := 0; ; round++ {
		if round > 50 {
			t.Fatal("the group never finished")
		}
		// Consume a slice: claim 40, ack all but a few.
		for range 3 {
			recs, err := c.GroupPoll(ctx, "default", "jobs", 0, "workers", 40, felix.GroupPollOptions{Wait: 100 * time.Millisecond})
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			for i, r := range recs {
				if r.Offset < floor {
					t.Fatalf("round %d: offset %d delivered below the cursor %d reported before the kill", round, r.Offset, floor)
				}
				if i%7 == 3 {
					held[r.Offset] = r
					continue // a consumer that crashed before acking this one
				}
				delete(held, r.Offset)
				if err := c.GroupAck(ctx, "default", "jobs", 0, "workers", r.Offset); err != nil {
					t.Fatalf("round %d: ack %d: %v", round, r.Offset, err)
				}
				acked[r.Offset] = true
			}
		}
		info, err := c.GroupDescribe(ctx, "default", "jobs", 0, "workers")
		if err != nil {
			t.Fatal(err)
		}
		if info.Committed != nil && *info.Committed == total {
			break
		}
		if round < 3 {
			floor = *info.Committed
			addr := n.client.BrokerAddr
			c.Close()
			n.stop(syscall.SIGKILL, 10*time.Second)
			n = startServeOn(t, dir, addr)
			clear(held) // claims are the dead broker's memory
			c = n.connect(ctx, n.adminToken())
			eventually(t, 15*time.Second, "the group to be served again", func() bool {
				info, err := c.GroupDescribe(ctx, "default", "jobs", 0, "workers")
				if err == nil && (info.Committed == nil || *info.Committed < floor) {
					t.Fatalf("after kill %d: cursor %v, reported %d before it", round, info.Committed, floor)
				}
				return err == nil
			})
		} else {
			// Past the kills, unacked claims come back once they lapse:
			// hand them back at once instead of waiting 30 s.
			for o, r := range held {
				if err := c.GroupNack(ctx, "default", "jobs", 0, "workers", r, 0); err != nil {
					t.Fatalf("nack %d: %v", o, err)
				}
				delete(held, o)
			}
		}
	}
	for o := uint64(0); o < total; o++ {
		if !acked[o] {
			t.Fatalf("offset %d was never acknowledged", o)
		}
	}
}
