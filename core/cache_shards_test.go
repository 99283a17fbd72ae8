package core

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// keysOfShard returns n keys "k<i>" that fall in shard of shards.
func keysOfShard(shard, shards uint32, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprint("k", i)
		if wire.ShardForKey([]byte(k), shards) == shard {
			out = append(out, k)
		}
	}
	return out
}

// TestCachePrefixWatchShardFilter: a prefix watch limited to a shard gets
// the retained values and the changes of that shard's keys only.
func TestCachePrefixWatchShardFilter(t *testing.T) {
	_, c := newWatchCache(t, Config{})
	now := time.Now()
	in, out := keysOfShard(1, 3, 3), keysOfShard(2, 3, 3)
	for _, k := range append(append([]string{}, in[:2]...), out[:2]...) {
		if err := c.Put(k, []byte("v"), 0, now); err != nil {
			t.Fatal(err)
		}
	}
	one := uint32(1)
	w, _ := mustWatch(t, c, CacheWatchOptions{Prefix: true, Retained: true, Shard: &one, Shards: 3})
	for _, k := range []string{in[2], out[2]} {
		if err := c.Put(k, []byte("w"), 0, now); err != nil {
			t.Fatal(err)
		}
	}
	var l watchLog
	drainWatch(w, &l)
	if len(l.initial) != 2 || l.state == nil || l.state.Count != 2 {
		t.Fatalf("retained %d values (state %+v), want 2", len(l.initial), l.state)
	}
	for _, ch := range append(l.initial, l.changes...) {
		if wire.ShardForKey([]byte(ch.Key), 3) != 1 {
			t.Fatalf("watch of shard 1 got key %q of shard %d", ch.Key, wire.ShardForKey([]byte(ch.Key), 3))
		}
	}
	if len(l.changes) != 1 || l.changes[0].Key != in[2] {
		t.Fatalf("changes %v, want one to %s", l.changes, in[2])
	}
	three := uint32(3)
	if _, _, err := c.Watch(CacheWatchOptions{Prefix: true, Shard: &three, Shards: 3}); err == nil {
		t.Fatal("watched shard 3 of 3")
	}
}

// TestCacheDropShard: dropping a shard removes its keys silently, ends
// the watches reading it with the cause and leaves the rest alone.
func TestCacheDropShard(t *testing.T) {
	_, c := newWatchCache(t, Config{})
	now := time.Now()
	lost, kept := keysOfShard(0, 2, 3), keysOfShard(1, 2, 3)
	for _, k := range append(append([]string{}, lost...), kept...) {
		if err := c.Put(k, []byte("v"), 0, now); err != nil {
			t.Fatal(err)
		}
	}
	zero, one := uint32(0), uint32(1)
	keyLost, _ := mustWatch(t, c, CacheWatchOptions{Key: lost[0]})
	keyKept, _ := mustWatch(t, c, CacheWatchOptions{Key: kept[0]})
	prefLost, _ := mustWatch(t, c, CacheWatchOptions{Prefix: true, Shard: &zero, Shards: 2})
	prefKept, _ := mustWatch(t, c, CacheWatchOptions{Prefix: true, Shard: &one, Shards: 2})
	prefAll, _ := mustWatch(t, c, CacheWatchOptions{Prefix: true})
	cause := movedTo(0, nil)
	if n := c.DropShard(0, 2, cause); n != 3 {
		t.Fatalf("dropped %d entries, want 3", n)
	}
	if entries, _ := c.Len(); entries != 3 {
		t.Fatalf("%d entries left, want 3", entries)
	}
	for _, k := range lost {
		if _, ok := c.Get(k, now); ok {
			t.Fatalf("key %s of the dropped shard still held", k)
		}
	}
	for _, k := range kept {
		if _, ok := c.Get(k, now); !ok {
			t.Fatalf("key %s of the kept shard gone", k)
		}
	}
	if err := c.Put(kept[0], []byte("x"), 0, now); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]*CacheWatch{"key": keyLost, "prefix of shard 0": prefLost, "prefix of all": prefAll} {
		var l watchLog
		drainWatch(w, &l)
		var moved *ShardMovedError
		if !errors.As(l.end, &moved) || len(l.changes) != 0 {
			t.Errorf("%s watch: end %v after %d changes, want the moved cause and nothing else", name, l.end, len(l.changes))
		}
	}
	for name, w := range map[string]*CacheWatch{"key": keyKept, "prefix of shard 1": prefKept} {
		var l watchLog
		drainWatch(w, &l)
		if l.end != nil || len(l.changes) != 1 || l.changes[0].Key != kept[0] {
			t.Errorf("%s watch: end %v, changes %v; want one change to %s", name, l.end, l.changes, kept[0])
		}
	}
}

// TestDurableCacheDropShardForgetsItsCounters: on a log-backed cache,
// dropping a shard forgets its counters too (they read as never
// written, not 0), keeps the other shard's, and neither a compaction
// nor a restart brings them back; a forgotten counter can be added to
// again from nothing.
func TestDurableCacheDropShardForgetsItsCounters(t *testing.T) {
	st := StorageConfig{Dir: t.TempDir(), Fsync: flog.FsyncAlways, CacheCompactInterval: -1}
	b, c := openDurableCache(t, st, durableCacheSpec)
	lost, kept := keysOfShard(0, 2, 3), keysOfShard(1, 2, 3)
	add := func(c *Cache, k string, d int64) int64 {
		t.Helper()
		sum, err := c.CounterAddStaged(k, d)
		if err == nil {
			err = c.WaitStaged(context.Background())
		}
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	for i, k := range append(append([]string{}, lost...), kept...) {
		add(c, k, int64(i+1))
	}
	c.DropShard(0, 2, movedTo(0, nil))
	check := func(c *Cache, when string) {
		t.Helper()
		for _, k := range lost {
			if sum, ok, err := c.CounterGetStaged(k); err != nil || ok {
				t.Fatalf("%s: counter %s of the dropped shard = %d %v %v, want never written", when, k, sum, ok, err)
			}
		}
		for i, k := range kept {
			if sum, ok, err := c.CounterGetStaged(k); err != nil || !ok || sum != int64(len(lost)+i+1) {
				t.Fatalf("%s: counter %s of the kept shard = %d %v %v", when, k, sum, ok, err)
			}
		}
	}
	check(c, "after the drop")
	if _, err := c.counters.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	check(c, "after a compaction")
	b.Close()
	b, c = openDurableCache(t, st, durableCacheSpec)
	defer b.Close()
	check(c, "after a restart")
	if sum := add(c, lost[0], 5); sum != 5 {
		t.Fatalf("a forgotten counter added to again: %d, want 5", sum)
	}
}
