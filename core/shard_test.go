package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

func TestOffsetsContiguousFromZero(t *testing.T) {
	_, st := newTestStream(t, Config{}, 2, "")
	sh := shard0(t, st)
	for i, n := range []int{1, 5, 3} {
		want := []uint64{0, 1, 6}[i]
		if off := publish(t, sh, payloads(n, "x")); off != want {
			t.Fatalf("batch %d at %d, want %d", i, off, want)
		}
	}
	if sh.NextOffset() != 9 {
		t.Fatalf("next %d", sh.NextOffset())
	}
	other, _ := st.Shard(1)
	if publish(t, other, payloads(1, "y")) != 0 {
		t.Fatal("offsets are per shard")
	}
	if _, err := sh.Publish(context.Background(), nil, ""); err == nil {
		t.Fatal("empty batch accepted")
	}
}

func TestReplayRingBounds(t *testing.T) {
	_, st := newTestStream(t, Config{ReplayRingMaxBatches: 4, ReplayRingMaxBytes: 100}, 1, "")
	sh := shard0(t, st)
	r := rand.New(rand.NewPCG(5, 6))
	var sizes []int64
	for range 200 {
		p := make([][]byte, 1+r.IntN(3))
		for i := range p {
			p[i] = make([]byte, r.IntN(60))
		}
		publish(t, sh, p)
		sizes = append(sizes, int64(payloadBytes(p)))
		if err := sh.check(); err != nil {
			t.Fatal(err)
		}
		// Naive model: the longest suffix of batches within both bounds.
		var bytes int64
		want := 0
		for i := len(sizes) - 1; i >= 0 && want < 4 && bytes+sizes[i] <= 100; i-- {
			bytes += sizes[i]
			want++
		}
		if sh.ring.n != want || sh.ring.bytes != bytes {
			t.Fatalf("ring holds %d batches/%d bytes, naive suffix %d/%d", sh.ring.n, sh.ring.bytes, want, bytes)
		}
	}
	publish(t, sh, [][]byte{make([]byte, 101)})
	if sh.ring.n != 0 || sh.ring.earliest(sh.next) != sh.next {
		t.Fatalf("oversized batch: ring holds %d", sh.ring.n)
	}
}

func TestSubscribeStartPositions(t *testing.T) {
	_, st := newTestStream(t, Config{ReplayRingMaxBatches: 3}, 1, "")
	sh := shard0(t, st)
	for range 5 {
		publish(t, sh, payloads(4, "b")) // batches at 0,4,8,12,16; ring keeps 8..19
	}
	latest := subscribe(t, sh, SubscribeOptions{})
	if n, _ := latest.Depth(); n != 0 || latest.StartOffset() != 20 || latest.LiveOffset() != 20 {
		t.Fatalf("latest: depth %d start %d live %d", n, latest.StartOffset(), latest.LiveOffset())
	}
	earliest := subscribe(t, sh, SubscribeOptions{Start: wire.StartPosition{Kind: wire.StartEarliest}})
	if end := checkContiguous(t, "earliest", drain(earliest), 8); end != 20 || earliest.StartOffset() != 8 {
		t.Fatalf("earliest backlog ends at %d, starts at %d", end, earliest.StartOffset())
	}
	mid := subscribe(t, sh, SubscribeOptions{Start: wire.StartPosition{Kind: wire.StartOffset, Offset: 10}})
	got := drain(mid)
	if checkContiguous(t, "offset 10", got, 10) != 20 || len(got) != 3 || string(got[0].Payloads[0]) != "b-2" {
		t.Fatalf("offset 10: %d batches", len(got))
	}
	atNext := subscribe(t, sh, SubscribeOptions{Start: wire.StartPosition{Kind: wire.StartOffset, Offset: 20}})
	if n, _ := atNext.Depth(); n != 0 {
		t.Fatalf("offset == next queued %d", n)
	}
	assertCursorErr(t, sh, 7, "too_old", "earliest", uint64(8))
	assertCursorErr(t, sh, 21, "in_future", "next", uint64(20))
}

func assertCursorErr(t *testing.T, sh *Shard, off uint64, reason, key string, val uint64) {
	t.Helper()
	_, err := sh.Subscribe(SubscribeOptions{Start: wire.StartPosition{Kind: wire.StartOffset, Offset: off}})
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeInvalidRequest || we.Detail["reason"] != reason || we.Detail[key] != val {
		t.Fatalf("offset %d: %v (detail %v)", off, err, we)
	}
}

func TestBacklogLargerThanCapacityIsNotDropped(t *testing.T) {
	_, st := newTestStream(t, Config{SubQueueMaxBytes: 10 + 2*PayloadOverhead}, 1, "")
	sh := shard0(t, st)
	for range 10 {
		publish(t, sh, payloads(1, "bb"))
	}
	s := subscribe(t, sh, SubscribeOptions{Start: wire.StartPosition{Kind: wire.StartEarliest}, Capacity: 2})
	if n, _ := s.Depth(); n != 10 {
		t.Fatalf("backlog of 10 queued as %d", n)
	}
	// Live batches still get the subscriber's own bounds on top.
	publish(t, sh, payloads(1, "cc"))
	publish(t, sh, payloads(1, "dd"))
	publish(t, sh, payloads(1, "ee"))
	if n, _ := s.Depth(); n != 12 || s.Dropped() != 1 {
		t.Fatalf("depth %d dropped %d, want 12 and 1", n, s.Dropped())
	}
	checkContiguous(t, "backlog+live", drain(s), 0)
}

// Property: a StartEarliest subscriber joining at any moment while
// publishers run sees one gap-free, duplicate-free run of offsets from
// its StartOffset to the final tail. Publishers are paced by tokens so
// that some subscribers join mid-run at known points and others race
// with publishing.
func TestEarliestSubscribeIsGapFree(t *testing.T) {
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 99))
		_, st := newTestStream(t, Config{ReplayRingMaxBatches: 1 + r.IntN(64)}, 1, "")
		sh := shard0(t, st)
		const pubs, total = 3, 900
		tokens := make(chan struct{}, total)
		var published atomic.Int64
		var producers sync.WaitGroup
		for range pubs {
			producers.Go(func() {
				for range tokens {
					sh.Publish(context.Background(), payloads(1+rand.IntN(3), "x"), "")
					published.Add(1)
				}
			})
		}
		type result struct {
			s    *Subscriber
			envs []*Envelope
		}
		results := make([]*result, 8)
		var consumers sync.WaitGroup
		sent := 0
		for i := range results {
			for range 1 + r.IntN(100) {
				tokens <- struct{}{}
				sent++
			}
			if i%2 == 0 {
				for published.Load() < int64(sent) {
					runtime.Gosched()
				}
			}
			s, err := sh.Subscribe(SubscribeOptions{Start: wire.StartPosition{Kind: wire.StartEarliest}, Capacity: 4096})
			if err != nil {
				t.Fatal(err)
			}
			res := &result{s: s}
			results[i] = res
			consumers.Go(func() {
				for {
					e, err := s.Next(context.Background())
					if err != nil {
						if !errors.Is(err, ErrStreamDeleted) {
							t.Error(err)
						}
						if n, _ := s.Depth(); n > 0 {
							t.Errorf("Next reported %v with %d envelopes still queued", err, n)
						}
						return
					}
					res.envs = append(res.envs, e)
				}
			})
		}
		for ; sent < total; sent++ {
			tokens <- struct{}{}
		}
		close(tokens)
		producers.Wait()
		end := sh.NextOffset()
		// Ending the shard lets each consumer read what is queued, then stop.
		sh.close(ErrStreamDeleted, false)
		consumers.Wait()
		joins := map[uint64]bool{}
		for i, res := range results {
			joins[res.s.LiveOffset()] = true
			if got := checkContiguous(t, "earliest subscriber", res.envs, res.s.StartOffset()); got != end {
				t.Fatalf("seed %d subscriber %d: ends at %d, tail %d (start %d live %d dropped %d err %v, %d envs, depth %v)", seed, i, got, end, res.s.StartOffset(), res.s.LiveOffset(), res.s.Dropped(), res.s.Err(), len(res.envs), fmt.Sprint(res.s.Depth()))
			}
			if res.s.Dropped() != 0 {
				t.Fatalf("seed %d subscriber %d dropped %d", seed, i, res.s.Dropped())
			}
		}
		if len(joins) < 4 {
			t.Fatalf("seed %d: subscribers joined at only %d points", seed, len(joins))
		}
	}
}

// Subscribers leaving in any order, interleaved with new ones, leave the
// rest registered and receiving; one that left gets nothing more, counts
// no drop and, though its one-slot queue was full when it left, never
// holds up a Block publisher. The registry stays compact.
func TestSubscribersLeaveInAnyOrder(t *testing.T) {
	for _, policy := range []string{"drop_new", "block"} {
		t.Run(policy, func(t *testing.T) {
			_, st := newTestStream(t, Config{SubQueueCapacity: 1}, 1, policy)
			sh := shard0(t, st)
			rng := rand.New(rand.NewPCG(11, 12))
			var open, left []*Subscriber
			for round := range 40 {
				for range rng.IntN(12) {
					open = append(open, subscribe(t, sh, SubscribeOptions{}))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := sh.Publish(ctx, payloads(1, fmt.Sprint(round)), "test")
				cancel()
				if err != nil {
					t.Fatalf("round %d: publish: %v", round, err)
				}
				// Some leave with the batch still queued, the rest take it.
				rng.Shuffle(len(open), func(i, j int) { open[i], open[j] = open[j], open[i] })
				n := rng.IntN(len(open)/2 + 1)
				for _, s := range open[:n] {
					s.Close()
				}
				left = append(left, open[:n]...)
				open = open[n:]
				for i, s := range open {
					e, ok := s.q.pop()
					if !ok || string(e.Payloads[0]) != fmt.Sprint(round, "-0") {
						t.Fatalf("round %d: open subscriber %d did not get the batch", round, i)
					}
				}
				if err := sh.check(); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if sh.Subscribers() != len(open) {
					t.Fatalf("round %d: %d subscribers, want %d", round, sh.Subscribers(), len(open))
				}
			}
			for _, s := range left {
				if s.Dropped() != 0 {
					t.Fatal("a subscriber that left counted a drop")
				}
				if _, ok := s.q.pop(); ok {
					t.Fatal("a subscriber that left still holds a batch")
				}
			}
		})
	}
}
