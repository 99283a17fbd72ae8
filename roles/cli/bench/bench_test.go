package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestVMRSSOfThisProcess(t *testing.T) {
	rss, err := vmRSS(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if rss <= 0 {
		t.Fatalf("VmRSS = %d", rss)
	}
	if _, err := vmRSS(-1); err == nil {
		t.Fatal("a process that does not exist has no RSS")
	}
}

func TestDurableRejectsUnknownMode(t *testing.T) {
	_, err := runDurable(context.Background(), nil, "sometimes", pubsubParams{})
	if err == nil || !strings.Contains(err.Error(), "--mode") {
		t.Fatalf("want a --mode error, got %v", err)
	}
}

func TestStepKeptUp(t *testing.T) {
	d := time.Second
	for _, tc := range []struct {
		s    stepResult
		want bool
	}{
		{stepResult{sent: 100}, true},
		{stepResult{sent: 100, lost: 1}, false},
		{stepResult{sent: 100, lagMax: 200 * time.Millisecond}, false},
		{stepResult{sent: 0}, false},
	} {
		if got := tc.s.keptUp(d); got != tc.want {
			t.Errorf("%+v keptUp = %v, want %v", tc.s, got, tc.want)
		}
	}
}

func TestSleepCtxEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sleepCtx(ctx, time.Hour); err == nil {
		t.Fatal("a cancelled context should end the wait")
	}
	if err := sleepCtx(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
}

func TestUpdateSeenKeepsTheLatestArrival(t *testing.T) {
	g := &watchFanoutRig{p: watchFanoutParams{watchers: 2}, updates: make([]updateSeen, 3)}
	for i := range g.updates {
		g.updates[i].sentNano.Store(1000)
	}
	g.updates[0].seenBy(3000)
	g.updates[0].seenBy(2000)
	g.updates[1].seenBy(1500) // one watcher never saw update 1
	g.updates[2].seenBy(1100)
	g.updates[2].seenBy(1200)
	lat, maxLat, skipped := g.allSeen(3)
	if skipped != 1 || maxLat != 2000 || len(lat.samples) != 2 {
		t.Fatalf("skipped %d, max %v, %d samples", skipped, maxLat, len(lat.samples))
	}
}
