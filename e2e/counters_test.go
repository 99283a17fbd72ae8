package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	felix "github.com/felixmq/felix/sdk/felix"
)

// TestCountersEqualTheAcknowledgedAddsAfterSIGKILL: clients add positive
// deltas to shared counters of a cache (felix serve's data directory,
// fsync always) while the broker is SIGKILLed at random points. After
// every restart each counter is at least the sum of its acknowledged adds
// and at most that plus the adds whose answer was lost (at-least-once:
// those may or may not have counted), and a counter never added to reads
// as never written.
func TestCountersEqualTheAcknowledgedAddsAfterSIGKILL(t *testing.T) {
	dir := t.TempDir()
	env := []string{"FELIX_DURABLE_FSYNC=always", "FELIX_DURABLE_SEGMENT_BYTES=65536"}
	rng := rand.New(rand.NewPCG(23, 8))
	const clients, cycles, keys = 6, 4, 3
	var (
		mu      sync.Mutex
		acked   [keys]int64 // Σ acknowledged deltas per counter
		unknown [keys]int64 // Σ deltas whose answer was lost
		adds    int
	)
	for cycle := range cycles + 1 {
		n := startServeIn(t, dir, env...)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if cycle == 0 {
			n.mustFelix(ctx, "admin", "cache", "create", "tallies")
		}
		c := cacheReady(t, ctx, n, "tallies")
		for k := range keys {
			sum, ok, err := c.CounterGet(ctx, "default", "tallies", fmt.Sprintf("k%d", k))
			if err != nil {
				t.Fatalf("cycle %d: get k%d: %v", cycle, k, err)
			}
			if sum < acked[k] || sum > acked[k]+unknown[k] || (acked[k] > 0 && !ok) {
				t.Fatalf("cycle %d: k%d = %d (written %v), acknowledged %d, lost answers %d", cycle, k, sum, ok, acked[k], unknown[k])
			}
		}
		if _, ok, err := c.CounterGet(ctx, "default", "tallies", "never"); err != nil || ok {
			t.Fatalf("a counter never added to: written %v, %v", ok, err)
		}
		if cycle == cycles {
			t.Logf("%d acknowledged adds over %d kills", adds, cycles)
			c.Close()
			cancel()
			return
		}
		var wg sync.WaitGroup
		killAfter := time.Duration(500+rng.IntN(700)) * time.Millisecond
		go func() {
			time.Sleep(killAfter)
			n.stop(syscall.SIGKILL, 10*time.Second)
		}()
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cc := n.connect(ctx, n.adminToken())
				defer cc.Close()
				addUntilKilled(ctx, cc, i, func(k int, delta int64, ok bool) {
					mu.Lock()
					defer mu.Unlock()
					if ok {
						acked[k] += delta
						adds++
					} else {
						unknown[k] += delta
					}
				})
			}()
		}
		wg.Wait()
		n.stop(syscall.SIGKILL, 10*time.Second)
		c.Close()
		cancel()
	}
}

// addUntilKilled adds deltas of 1 to 3 to the counters k0..k2 in turn
// until an add fails, reporting each (ok false: the failed one, which may
// have counted).
func addUntilKilled(ctx context.Context, c *felix.Client, client int, report func(k int, delta int64, ok bool)) {
	for seq := 0; ; seq++ {
		k, delta := (client+seq)%3, int64(1+seq%3)
		if _, err := c.CounterAdd(ctx, "default", "tallies", fmt.Sprintf("k%d", k), delta); err != nil {
			report(k, delta, false)
			return
		}
		report(k, delta, true)
	}
}
