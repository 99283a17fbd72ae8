package core

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/felixmq/felix/wire"
)

// checkContiguous checks that envs carry contiguous offsets starting at from and
// returns where they end.
func checkContiguous(t *testing.T, who string, envs []*Envelope, from uint64) uint64 {
	t.Helper()
	for _, e := range envs {
		if e.BaseOffset != from {
			t.Fatalf("%s: batch at %d, want %d", who, e.BaseOffset, from)
		}
		from = e.EndOffset()
	}
	return from
}

func TestDropNewIsolatesSlowConsumer(t *testing.T) {
	for _, policy := range []string{"drop_new", "drop_old"} {
		t.Run(policy, func(t *testing.T) {
			b, st := newTestStream(t, Config{}, 1, policy)
			sh := shard0(t, st)
			slow := subscribe(t, sh, SubscribeOptions{Capacity: 4})
			fast := subscribe(t, sh, SubscribeOptions{Capacity: 4})
			m := b.cfg.metrics
			var got []*Envelope
			for i := range 100 {
				publish(t, sh, payloads(2, "b"))
				if i%3 == 0 { // the fast consumer keeps up, batching reads
					got = append(got, drain(fast)...)
				}
			}
			got = append(got, drain(fast)...)
			if len(got) != 100 || checkContiguous(t, "fast", got, 0) != 200 {
				t.Fatalf("fast consumer got %d batches", len(got))
			}
			if fast.Dropped() != 0 {
				t.Errorf("fast consumer dropped %d", fast.Dropped())
			}
			if slow.Dropped() != 96 {
				t.Errorf("slow consumer dropped %d, want 96", slow.Dropped())
			}
			if n, _ := slow.Depth(); n != 4 {
				t.Errorf("slow queue depth %d, want 4", n)
			}
			checkContiguous(t, "slow", drain(slow), 0) // keeps the oldest four
			if d := m.subQueueDropped.Get(); d != 96 {
				t.Errorf("felix_sub_queue_dropped_total grew by %d", d)
			}
			wantOld := uint64(0)
			if policy == "drop_old" {
				wantOld = 96
			}
			if d := m.dropOldEmulated.Get(); d != wantOld {
				t.Errorf("felix_sub_queue_drop_old_emulated_total grew by %d, want %d", d, wantOld)
			}
		})
	}
}

func TestBlockWaitsForSlowConsumerAndLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, st := newTestStream(t, Config{}, 1, "block")
		sh := shard0(t, st)
		slow := subscribe(t, sh, SubscribeOptions{Capacity: 2})
		fast := subscribe(t, sh, SubscribeOptions{Capacity: 64})
		const batches = 20

		var fastGot []*Envelope
		var fastN atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() {
			for len(fastGot) < batches {
				e, err := fast.Next(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				fastGot = append(fastGot, e)
				fastN.Add(1)
			}
		})
		published := make(chan struct{})
		go func() {
			defer close(published)
			for range batches {
				if _, err := sh.Publish(context.Background(), payloads(1, "b"), "p"); err != nil {
					t.Error(err)
				}
			}
		}()
		synctest.Wait()
		select {
		case <-published:
			t.Fatal("publisher finished while the slow subscriber was full")
		default:
		}
		// The fast subscriber has every batch up to the one the publisher
		// waits on: the slow one's 2 queued plus the blocked third.
		if n := fastN.Load(); n != 3 {
			t.Fatalf("fast subscriber has %d batches while the publisher waits, want 3", n)
		}
		var slowGot []*Envelope
		for len(slowGot) < batches {
			e, err := slow.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			slowGot = append(slowGot, e)
		}
		<-published
		wg.Wait()
		checkContiguous(t, "fast", fastGot, 0)
		checkContiguous(t, "slow", slowGot, 0)
		if slow.Dropped()+fast.Dropped() != 0 {
			t.Errorf("drops under Block: slow %d fast %d", slow.Dropped(), fast.Dropped())
		}
	})
}

// Port of block_policy_stalls_every_publisher_of_the_shard_without_a_commit_turn:
// under Block one stalled subscriber makes every publisher of the shard
// wait, not just the one whose batch is stuck.
func TestBlockStallsEveryPublisherOfTheShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, st := newTestStream(t, Config{}, 1, "block")
		sh := shard0(t, st)
		stalled := subscribe(t, sh, SubscribeOptions{Capacity: 1})
		publish(t, sh, payloads(1, "first")) // fills the queue

		doneA, doneB := make(chan uint64, 1), make(chan uint64, 1)
		pub := func(tag string, done chan<- uint64) {
			off, err := sh.Publish(context.Background(), payloads(1, tag), tag)
			if err != nil {
				t.Error(err)
			}
			done <- off
		}
		go pub("a", doneA)
		synctest.Wait()
		go pub("b", doneB)
		synctest.Wait()
		if len(doneA)+len(doneB) != 0 {
			t.Fatal("a publisher returned while the only subscriber was stalled")
		}
		for i, want := range []string{"first-0", "a-0", "b-0"} {
			e, err := stalled.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if string(e.Payloads[0]) != want || e.BaseOffset != uint64(i) {
				t.Fatalf("batch %d = %q at %d, want %q", i, e.Payloads[0], e.BaseOffset, want)
			}
		}
		if a, b := <-doneA, <-doneB; a != 1 || b != 2 {
			t.Fatalf("offsets a=%d b=%d", a, b)
		}
	})
}

func TestBlockWaitEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, st := newTestStream(t, Config{}, 1, "block")
		sh := shard0(t, st)
		stalled := subscribe(t, sh, SubscribeOptions{Capacity: 1})
		other := subscribe(t, sh, SubscribeOptions{Capacity: 8})
		publish(t, sh, payloads(1, "x"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := sh.Publish(ctx, payloads(1, "y"), "p")
			done <- err
		}()
		synctest.Wait()
		cancel()
		err := <-done
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.CodeOverloaded || we.Retry != wire.RetryOutcomeUnknown {
			t.Fatalf("publish after ctx end: %v", err)
		}
		if stalled.Dropped() != 1 || other.Dropped() != 0 {
			t.Fatalf("drops: stalled %d other %d", stalled.Dropped(), other.Dropped())
		}
		if n, _ := other.Depth(); n != 2 {
			t.Fatalf("subscriber with room got %d batches, want 2", n)
		}
		if sh.NextOffset() != 2 {
			t.Fatalf("next offset %d: the batch stays published", sh.NextOffset())
		}
	})
}

func TestBlockWaiterReleasedWhenSubscriberCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, st := newTestStream(t, Config{}, 1, "block")
		sh := shard0(t, st)
		stalled, err := sh.Subscribe(SubscribeOptions{Capacity: 1})
		if err != nil {
			t.Fatal(err)
		}
		publish(t, sh, payloads(1, "x"))
		done := make(chan error, 1)
		go func() {
			_, err := sh.Publish(context.Background(), payloads(1, "y"), "p")
			done <- err
		}()
		synctest.Wait()
		stalled.Close()
		if err := <-done; err != nil {
			t.Fatalf("publish released by close: %v", err)
		}
		if _, err := stalled.Next(context.Background()); !errors.Is(err, ErrSubscriberClosed) {
			t.Fatalf("Next after Close: %v", err)
		}
		if sh.Subscribers() != 0 {
			t.Fatalf("%d subscribers after close", sh.Subscribers())
		}
	})
}

func TestSubscriberQueueByteBound(t *testing.T) {
	// Each record is charged its bytes plus PayloadOverhead.
	const o = PayloadOverhead
	_, st := newTestStream(t, Config{SubQueueMaxBytes: 100 + 3*o}, 1, "")
	sh := shard0(t, st)
	s := subscribe(t, sh, SubscribeOptions{Capacity: 100})
	big := [][]byte{make([]byte, 150+3*o)}
	publish(t, sh, big) // larger than the bound, but the queue is empty
	publish(t, sh, [][]byte{make([]byte, 10)})
	if n, b := s.Depth(); n != 1 || b != 150+4*o || s.Dropped() != 1 {
		t.Fatalf("depth %d/%d dropped %d", n, b, s.Dropped())
	}
	drain(s)
	for range 5 {
		publish(t, sh, [][]byte{make([]byte, 30)})
	}
	if n, b := s.Depth(); n != 3 || b != 90+3*o || s.Dropped() != 3 {
		t.Fatalf("depth %d/%d dropped %d, want 3/%d dropped 3", n, b, s.Dropped(), 90+3*o)
	}
}

func TestOrderUnderConcurrentPublishers(t *testing.T) {
	_, st := newTestStream(t, Config{}, 1, "block")
	sh := shard0(t, st)
	const pubs, perPub = 4, 200
	subs := make([]*Subscriber, 3)
	for i := range subs {
		subs[i] = subscribe(t, sh, SubscribeOptions{Capacity: 8})
	}
	got := make([][]*Envelope, len(subs))
	var consumers, producers sync.WaitGroup
	for i, s := range subs {
		consumers.Go(func() {
			for len(got[i]) < pubs*perPub {
				e, err := s.Next(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				got[i] = append(got[i], e)
			}
		})
	}
	for p := range pubs {
		producers.Go(func() {
			for i := range perPub {
				sh.Publish(context.Background(), [][]byte{{byte(p), byte(i >> 8), byte(i)}}, "")
			}
		})
	}
	producers.Wait()
	consumers.Wait()
	for i := range subs {
		checkContiguous(t, "subscriber", got[i], 0)
		last := map[byte]int{}
		for j, e := range got[i] {
			if e != got[0][j] {
				t.Fatalf("subscriber %d batch %d differs from subscriber 0", i, j)
			}
			p, seq := e.Payloads[0][0], int(e.Payloads[0][1])<<8|int(e.Payloads[0][2])
			if prev, ok := last[p]; ok && seq != prev+1 {
				t.Fatalf("publisher %d: %d after %d", p, seq, prev)
			}
			last[p] = seq
		}
	}
}

// Notify is called for every queued batch and for the end, so a consumer
// can run only while there is work.
func TestSubscriberNotify(t *testing.T) {
	_, st := newTestStream(t, Config{}, 1, "")
	sh := shard0(t, st)
	var calls atomic.Int64
	s := subscribe(t, sh, SubscribeOptions{Notify: func() { calls.Add(1) }})
	publish(t, sh, payloads(1, "a"))
	publish(t, sh, payloads(2, "b"))
	if got := calls.Load(); got != 2 {
		t.Fatalf("notified %d times for two batches", got)
	}
	if len(drain(s)) != 2 {
		t.Fatal("queue does not hold both batches")
	}
	s.Close()
	if calls.Load() != 3 {
		t.Fatalf("notified %d times after close, want 3", calls.Load())
	}
}
