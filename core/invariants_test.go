package core

import (
	"context"
	"fmt"
	"testing"

	"github.com/felixmq/felix/wire"
)

// check verifies the shard's declared invariants; it takes the commit turn.
func (sh *Shard) check() error {
	if err := sh.acquireTurn(context.Background()); err != nil {
		return err
	}
	defer sh.releaseTurn()
	r := &sh.ring
	if r.n > r.maxBatches {
		return fmt.Errorf("ring holds %d batches, bound %d", r.n, r.maxBatches)
	}
	if r.bytes > r.maxBytes {
		return fmt.Errorf("ring holds %d bytes, bound %d", r.bytes, r.maxBytes)
	}
	var sum int64
	for i := 0; i < r.n; i++ {
		e := r.at(i)
		sum += int64(e.Size())
		if i > 0 && r.at(i-1).EndOffset() != e.BaseOffset {
			return fmt.Errorf("ring batch %d starts at %d, previous ends at %d", i, e.BaseOffset, r.at(i-1).EndOffset())
		}
	}
	if sum != r.bytes {
		return fmt.Errorf("ring bytes %d, sum of batches %d", r.bytes, sum)
	}
	if r.n > 0 && r.at(r.n-1).EndOffset() != sh.next {
		return fmt.Errorf("ring ends at %d, next is %d", r.at(r.n-1).EndOffset(), sh.next)
	}
	if sh.nextPub.Load() != sh.next {
		return fmt.Errorf("published next %d, next %d", sh.nextPub.Load(), sh.next)
	}
	return sh.checkRegistry()
}

// checkRegistry checks the subscriber registry: the snapshot is subs,
// gone counts the entries that left, live the rest, and compaction keeps
// the departed at most half.
func (sh *Shard) checkRegistry() error {
	sh.subsMu.Lock()
	defer sh.subsMu.Unlock()
	snap := *sh.snapshot.Load()
	if len(snap) != len(sh.subs) || (len(snap) > 0 && &snap[0] != &sh.subs[0]) {
		return fmt.Errorf("snapshot of %d is not the registry of %d", len(snap), len(sh.subs))
	}
	left := 0
	for _, s := range sh.subs {
		if !s.registered {
			left++
		}
	}
	if left != sh.gone || int64(len(sh.subs)-left) != sh.live.Load() {
		return fmt.Errorf("registry of %d: %d left, gone %d, live %d", len(sh.subs), left, sh.gone, sh.live.Load())
	}
	if sh.gone*2 > len(sh.subs) {
		return fmt.Errorf("%d of %d subscribers left and were not compacted away", sh.gone, len(sh.subs))
	}
	return nil
}

// mustCheck registers an invariant check of every shard of st at cleanup.
func mustCheck(t *testing.T, st *Stream) {
	t.Helper()
	t.Cleanup(func() {
		for _, sh := range st.openShards() {
			if err := sh.check(); err != nil {
				t.Errorf("shard %d: %v", sh.index, err)
			}
		}
	})
}

// newTestStream makes a broker with cfg and one stream with the given
// shard count and policy.
func newTestStream(t *testing.T, cfg Config, shards uint32, policy string) (*Broker, *Stream) {
	t.Helper()
	b := NewBroker(cfg)
	t.Cleanup(b.Close)
	spec := wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s", Shards: shards, SubQueuePolicy: policy}
	if err := b.ApplyStream(spec); err != nil {
		t.Fatal(err)
	}
	st, ok := b.Stream(StreamKey{"t", "ns", "s"})
	if !ok {
		t.Fatal("stream not registered")
	}
	mustCheck(t, st)
	return b, st
}

func shard0(t *testing.T, st *Stream) *Shard {
	t.Helper()
	sh, err := st.Shard(0)
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

func subscribe(t *testing.T, sh *Shard, opts SubscribeOptions) *Subscriber {
	t.Helper()
	s, err := sh.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func payloads(n int, tag string) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("%s-%d", tag, i))
	}
	return out
}

func publish(t *testing.T, sh *Shard, p [][]byte) uint64 {
	t.Helper()
	off, err := sh.Publish(context.Background(), p, "test")
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// drain pops everything queued for s.
func drain(s *Subscriber) []*Envelope {
	var out []*Envelope
	for {
		e, ok := s.TryNext()
		if !ok {
			return out
		}
		out = append(out, e)
	}
}
