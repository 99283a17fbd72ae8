package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The watch-fanout peers: W watchers of one key, one writer putting it at
// a fixed rate, each value carrying its sequence number and intended send
// time (the same shape as `felix bench watch-fanout`).

// warmSeq marks the values written to check that every watcher is live
// before the measured updates start.
const warmSeq = ^uint64(0)

// watchValue is update seq's value: seq and its intended send time.
func watchValue(seq uint64, due time.Time) []byte {
	var v [16]byte
	binary.BigEndian.PutUint64(v[:8], seq)
	binary.BigEndian.PutUint64(v[8:], uint64(due.UnixNano()))
	return v[:]
}

// updateSeen is one update: how many watchers saw it, when the last did.
type updateSeen struct {
	watchers atomic.Int32
	lastNano atomic.Int64
	sentNano atomic.Int64
}

// watchTracker records what every watcher saw. Safe for concurrent use.
type watchTracker struct {
	watchers   int
	updates    []updateSeen
	deliveries atomic.Int64
	warm       atomic.Int64 // watchers that saw a warm-up value
}

func newWatchTracker(watchers, rate int, d time.Duration) *watchTracker {
	n := int(newSchedule(time.Now(), rate).count(d))
	return &watchTracker{watchers: watchers, updates: make([]updateSeen, n)}
}

// watcher returns the function one watcher calls with each value it sees.
func (t *watchTracker) watcher() func(value []byte) {
	sawWarm := false
	return func(value []byte) {
		now := time.Now().UnixNano()
		if len(value) < 16 {
			return
		}
		seq := binary.BigEndian.Uint64(value)
		if seq == warmSeq {
			if !sawWarm {
				sawWarm = true
				t.warm.Add(1)
			}
			return
		}
		if seq >= uint64(len(t.updates)) {
			return
		}
		u := &t.updates[seq]
		u.watchers.Add(1)
		for last := u.lastNano.Load(); now > last && !u.lastNano.CompareAndSwap(last, now); last = u.lastNano.Load() {
		}
		t.deliveries.Add(1)
	}
}

// warmUp puts warm-up values until every watcher saw one, at most 60 s.
func (t *watchTracker) warmUp(ctx context.Context, put func(ctx context.Context, value []byte) error) error {
	deadline := time.Now().Add(time.Minute)
	for t.warm.Load() < int64(t.watchers) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("only %d of %d watchers live after 60s", t.warm.Load(), t.watchers)
		}
		if err := put(ctx, watchValue(warmSeq, time.Now())); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// write puts every update on schedule, then waits for delivery to settle.
func (t *watchTracker) write(ctx context.Context, rate int, put func(ctx context.Context, value []byte) error) (figures, error) {
	sch := newSchedule(time.Now(), rate)
	var errs int
	for i := range t.updates {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		due := sch.due(int64(i))
		time.Sleep(time.Until(due))
		t.updates[i].sentNano.Store(due.UnixNano())
		if err := put(ctx, watchValue(uint64(i), due)); err != nil {
			errs++
		}
	}
	settle(ctx, t.deliveries.Load, int64(len(t.updates))*int64(t.watchers))
	f := t.figures(time.Since(sch.start))
	f["errors"] = float64(errs)
	return f, nil
}

// figures: time from each update's intended send until the last watcher
// saw it (over updates every watcher saw), and skipped, the updates some
// watcher never saw.
func (t *watchTracker) figures(elapsed time.Duration) figures {
	rec := newRecorder(len(t.updates) + 1)
	var skipped int
	var maxLat time.Duration
	for i := range t.updates {
		u := &t.updates[i]
		if int(u.watchers.Load()) < t.watchers {
			skipped++
			continue
		}
		d := time.Duration(u.lastNano.Load() - u.sentNano.Load())
		rec.add(d)
		maxLat = max(maxLat, d)
	}
	f := figures{"updates": float64(len(t.updates)), "skipped": float64(skipped),
		"deliveries_per_s": float64(t.deliveries.Load()) / elapsed.Seconds(),
		"all_seen_max_ms":  float64(maxLat) / float64(time.Millisecond)}
	if q := rec.quantilesMS(0.5, 0.99); q != nil {
		f["all_seen_p50_ms"], f["all_seen_p99_ms"] = q[0], q[1]
	}
	return f
}

// openSpread opens the watchers of a peer concurrently, one goroutine per
// connection: connection ci opens watchers ci, ci+conns, ... with open. It
// returns the first error; a connection stops at its own first error.
func openSpread(conns, watchers int, open func(ci, i int) error) error {
	var opened sync.WaitGroup
	errs := make(chan error, conns)
	for ci := range conns {
		opened.Add(1)
		go func() {
			defer opened.Done()
			for i := ci; i < watchers; i += conns {
				if err := open(ci, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	opened.Wait()
	close(errs)
	return <-errs
}
