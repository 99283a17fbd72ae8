package main

import (
	"context"
	"testing"
	"time"
)

func TestWatchTrackerCountsSkippedUpdates(t *testing.T) {
	tr := newWatchTracker(2, 100, 50*time.Millisecond) // 5 updates
	a, b := tr.watcher(), tr.watcher()
	put := func(_ context.Context, v []byte) error {
		a(v)
		if seq := v[7]; seq != 3 { // watcher b never sees update 3
			b(v)
		}
		return nil
	}
	if err := tr.warmUp(context.Background(), put); err != nil {
		t.Fatal(err)
	}
	f, err := tr.write(context.Background(), 100, put)
	if err != nil {
		t.Fatal(err)
	}
	if f["updates"] != 5 || f["skipped"] != 1 || f["errors"] != 0 {
		t.Fatalf("figures %v", f)
	}
	if _, ok := f["all_seen_p99_ms"]; !ok {
		t.Fatalf("no latency in %v", f)
	}
}
