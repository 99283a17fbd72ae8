package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// BenchmarkPublishFanout publishes one batch of 64 × 4 KiB payloads per
// op to N subscribers; each subscriber takes its envelope and the shared
// binary frame, as a subscription writer would.
func BenchmarkPublishFanout(b *testing.B) {
	const perBatch, size = 64, 4 << 10
	batch := make([][]byte, perBatch)
	for i := range batch {
		batch[i] = make([]byte, size)
	}
	flags := wire.FlagBinaryEventBatchShared
	for _, n := range []int{1, 10, 1000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			br := NewBroker(Config{})
			defer br.Close()
			br.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "n", Stream: "s"})
			st, _ := br.Stream(StreamKey{"t", "n", "s"})
			sh, _ := st.Shard(0)
			subs := make([]*Subscriber, n)
			for i := range subs {
				subs[i], _ = sh.Subscribe(SubscribeOptions{})
			}
			ctx := context.Background()
			b.SetBytes(perBatch * size)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sh.Publish(ctx, batch, "bench"); err != nil {
					b.Fatal(err)
				}
				for _, s := range subs {
					e, ok := s.TryNext()
					if !ok {
						b.Fatal("subscriber missed a batch")
					}
					_ = e.Frame(flags)
				}
			}
		})
	}
}

func BenchmarkCacheGetPut(b *testing.B) {
	br := NewBroker(Config{})
	defer br.Close()
	br.ApplyCache(wire.CacheSpec{TenantID: "t", Namespace: "n", Cache: "c"})
	c, _ := br.Cache(CacheKey{"t", "n", "c"})
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	value := make([]byte, 256)
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			k := keys[i%len(keys)]
			if i%4 == 0 {
				if err := c.Put(k, value, time.Minute, now); err != nil {
					b.Fatal(err)
				}
			} else {
				c.Get(k, now)
			}
			i++
		}
	})
}

// BenchmarkDurableFinishConcurrently claims batches of one 4 KiB record in
// rounds of 256 and finishes each round's claims on goroutines of their
// own, as the broker does under the Block policy. ns/op is per claim.
func BenchmarkDurableFinishConcurrently(b *testing.B) {
	const round = 256
	_, st := newDurableStream(b, b.TempDir(), Config{}, wire.StreamSpec{SubQueuePolicy: "block"})
	sh, _ := st.Shard(0)
	payload := [][]byte{make([]byte, 4<<10)}
	claims := make([]*Claimed, 0, round)
	b.SetBytes(4 << 10)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c, err := sh.Claim(payload, "")
		if err != nil {
			b.Fatal(err)
		}
		claims = append(claims, c)
		if len(claims) == round {
			finishAll(b, claims)
			claims = claims[:0]
		}
	}
	finishAll(b, claims)
}

func finishAll(b *testing.B, claims []*Claimed) {
	var wg sync.WaitGroup
	for i := len(claims) - 1; i >= 0; i-- {
		c := claims[i]
		wg.Go(func() {
			if err := c.Finish(context.Background()); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
}

// BenchmarkCacheWatchCloseAll opens 10,000 watches of one key and closes
// them all in random order, as when the connections holding them go.
// ns/op is per watch, opening included.
func BenchmarkCacheWatchCloseAll(b *testing.B) {
	br := NewBroker(Config{CacheShards: 4})
	defer br.Close()
	if err := br.ApplyCache(wire.CacheSpec{TenantID: "t", Namespace: "ns", Cache: "c"}); err != nil {
		b.Fatal(err)
	}
	c, _ := br.Cache(CacheKey{"t", "ns", "c"})
	openThenCloseAll(b, func() (func(), error) {
		w, _, err := c.Watch(CacheWatchOptions{Key: "k"})
		if err != nil {
			return nil, err
		}
		return w.Close, nil
	})
}

// BenchmarkSubscribeCloseAll registers 10,000 subscribers on one shard,
// then closes them in random order, as a reconnect storm does. ns/op is
// per subscriber, both halves included.
func BenchmarkSubscribeCloseAll(b *testing.B) {
	br := NewBroker(Config{})
	defer br.Close()
	br.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "n", Stream: "s"})
	st, _ := br.Stream(StreamKey{"t", "n", "s"})
	sh, _ := st.Shard(0)
	openThenCloseAll(b, func() (func(), error) {
		s, err := sh.Subscribe(SubscribeOptions{})
		if err != nil {
			return nil, err
		}
		return s.Close, nil
	})
}

// openThenCloseAll opens one thing per op; every 10,000 it closes them
// all in random order.
func openThenCloseAll(b *testing.B, open func() (closeIt func(), err error)) {
	const n = 10000
	closers := make([]func(), 0, n)
	rng := rand.New(rand.NewPCG(7, 8))
	closeAll := func() {
		rng.Shuffle(len(closers), func(i, j int) { closers[i], closers[j] = closers[j], closers[i] })
		for _, c := range closers {
			c()
		}
		closers = closers[:0]
	}
	b.ReportAllocs()
	for b.Loop() {
		c, err := open()
		if err != nil {
			b.Fatal(err)
		}
		if closers = append(closers, c); len(closers) == n {
			closeAll()
		}
	}
	closeAll()
}
