package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// Group state follows its shard across a failover (issues #19, #18): two
// ClusterClient consumers of one group ack the records of a factor-3
// quorum stream under `always` fsync while the shard's leader is
// SIGKILLed. They follow the promoted follower and go on. Every record is
// acked at least once, and none below P is delivered after the kill,
// where P is the longest prefix of offsets whose every ack was answered
// before the kill (on a quorum shard an ack is answered only once a
// majority holds the cursor it moved). Records acked above an unfinished
// one, and the dead leader's claims, may come again: they are not
// checked.
func TestGroupStateFollowsItsShardThroughALeadersSIGKILL(t *testing.T) {
	d := startDev(t, 3, "FELIX_DURABLE_FSYNC=always")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const stream, group, total = "group-failover", "workers", 300
	ns := d.client.Namespace
	before := d.createQuorumStream(ctx, stream)
	oldName := nodeNameOf(before.NodeID)
	cc := d.connectCluster(ctx, d.adminToken())
	for i := 0; i < total; i += 50 {
		var batch [][]byte
		for j := i; j < i+50; j++ {
			batch = append(batch, fmt.Appendf(nil, "r%d", j))
		}
		eventually(t, 20*time.Second, "a batch published", func() bool {
			_, err := cc.PublishBatchAcked(ctx, ns, stream, batch, felix.AckPerBatch)
			return err == nil
		})
	}

	var (
		mu          sync.Mutex
		acked       = map[uint64]bool{} // answered, any time
		ackedBefore = map[uint64]bool{} // answered before the kill
		floor       = uint64(0)         // P, set at the kill
		killed      atomic.Bool
		bad         error
		errs        atomic.Int64
	)
	consume := func(wg *sync.WaitGroup) {
		defer wg.Done()
		for ctx.Err() == nil {
			mu.Lock()
			finished := len(acked) == total || bad != nil
			mu.Unlock()
			if finished {
				return
			}
			wasKilled := killed.Load()
			recs, err := cc.GroupPoll(ctx, ns, stream, 0, group, 20, felix.GroupPollOptions{Wait: 100 * time.Millisecond, Visibility: 2 * time.Second})
			if err != nil {
				errs.Add(1)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			for _, r := range recs {
				mu.Lock()
				if wasKilled && r.Offset < floor {
					bad = fmt.Errorf("offset %d delivered after the kill, below %d, every ack of which was answered before it", r.Offset, floor)
				}
				mu.Unlock()
				if err := cc.GroupAck(ctx, ns, stream, 0, group, r.Offset); err != nil {
					errs.Add(1)
					continue // it comes round once its claim lapses
				}
				mu.Lock()
				acked[r.Offset] = true
				if !killed.Load() {
					ackedBefore[r.Offset] = true
				}
				mu.Unlock()
			}
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go consume(&wg)
	go consume(&wg)
	eventually(t, 30*time.Second, "a third of the records acked before the kill", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= total/3
	})
	mu.Lock()
	killed.Store(true)
	for ackedBefore[floor] {
		floor++
	}
	mu.Unlock()
	d.kill9(oldName)
	killedAt := time.Now()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if bad != nil {
		t.Fatal(bad)
	}
	if ctx.Err() != nil {
		t.Fatalf("the consumers did not finish: %d of %d records acked", len(acked), total)
	}
	after := d.newLeaderOf(ctx, stream, before.NodeID, before.Generation)
	info, err := cc.GroupDescribe(ctx, ns, stream, 0, group)
	if err != nil || info.Committed == nil || *info.Committed < total {
		t.Fatalf("the group on the new leader: %+v (%v)", info, err)
	}
	t.Logf("%d records acked before the kill (prefix %d), the rest through %s's death in %v on %s; %d calls failed and were retried",
		len(ackedBefore), floor, oldName, time.Since(killedAt), nodeNameOf(after.NodeID), errs.Load())
}
