package core

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
)

// fillStore writes n puts of distinct 16-byte keys with valueBytes-byte
// values straight to the store's log, 1000 records an append (the
// benchmark measures the restart, not the writes), then closes it.
func fillStore(b *testing.B, o CacheStoreOptions, n, valueBytes int) {
	b.Helper()
	o.Fsync = flog.FsyncNone
	s, err := OpenCacheStore(o)
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, valueBytes)
	entries := make([]flog.Entry, 0, 1000)
	for i := 0; i < n; i++ {
		binary.BigEndian.PutUint64(value, uint64(i))
		rec := cachelog.CacheRecord{Kind: flog.KindCachePut, Key: fmt.Sprintf("key-%012d", i), Value: value}
		entries = append(entries, flog.Entry{Kind: flog.KindCachePut, Payload: rec.Append(nil)})
		if len(entries) == cap(entries) || i == n-1 {
			if _, err := s.log.AppendEntries(entries, "", 1); err != nil {
				b.Fatal(err)
			}
			entries = entries[:0]
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCacheStoreRestart1M times OpenCacheStore on a shard of
// 1,000,000 live keys (16-byte keys, 100-byte values): from the snapshot
// a compaction wrote, and, for comparison, replaying the whole log.
func BenchmarkCacheStoreRestart1M(b *testing.B) {
	const keys = 1_000_000
	for _, snapshot := range []bool{true, false} {
		b.Run(fmt.Sprintf("snapshot=%v", snapshot), func(b *testing.B) {
			o := storeOptions(b, b.TempDir())
			o.MaxIndexBytes = 1 << 30
			fillStore(b, o, keys, 100)
			if snapshot {
				s, err := OpenCacheStore(o)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Compact(context.Background()); err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
			b.ResetTimer()
			for b.Loop() {
				s, err := OpenCacheStore(o)
				if err != nil {
					b.Fatal(err)
				}
				if s.Len() != keys {
					b.Fatalf("%d keys after restart", s.Len())
				}
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkCacheStoreIndexMemory measures what a key really costs the
// index (heap after a rebuild of n keys, less the heap before, per key)
// beside what the store accounts (cacheIndexEntryBytes + len(key)).
func BenchmarkCacheStoreIndexMemory(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			o := storeOptions(b, b.TempDir())
			o.MaxIndexBytes = 1 << 30
			fillStore(b, o, n, 8)
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				s, err := OpenCacheStore(o)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				used, _ := s.IndexBytes()
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heap-B/key")
				b.ReportMetric(float64(used)/float64(n), "accounted-B/key")
				runtime.KeepAlive(s)
				s.Close()
			}
		})
	}
}

// BenchmarkCacheStorePut measures acknowledged puts of 256-byte values
// under each fsync policy, with 64 writers (32 per core) sharing fsyncs.
func BenchmarkCacheStorePut(b *testing.B) {
	for _, p := range []flog.FsyncPolicy{flog.FsyncAlways, flog.FsyncPeriodic} {
		b.Run(p.String(), func(b *testing.B) {
			o := storeOptions(b, b.TempDir())
			o.Fsync = p
			s := mustOpenStore(b, o)
			value := make([]byte, 256)
			b.SetParallelism(32)
			var writers atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				id := writers.Add(1)
				for pb.Next() {
					if _, err := s.Put(context.Background(), fmt.Sprintf("k-%d-%d", id, i%10000), value, 0); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}

// BenchmarkDurableCacheRestart1M times what a broker restart does for a
// log-backed cache of 1,000,000 live keys (16-byte keys, 100-byte
// values): ApplyCache opens the store (from its snapshot) and loads every
// value into the cache.
func BenchmarkDurableCacheRestart1M(b *testing.B) {
	const keys = 1_000_000
	st := StorageConfig{Dir: b.TempDir(), CacheIndexBytes: 1 << 30, CacheCompactInterval: -1}
	dir, err := CacheDir(st.Dir, CacheKey{"t", "ns", "c"}, durableCacheSpec.Incarnation)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := readOffsetBase(dir); err != nil {
		b.Fatal(err)
	}
	o := storeOptions(b, dir)
	o.MaxIndexBytes = 1 << 30
	fillStore(b, o, keys, 100)
	s, err := OpenCacheStore(o)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Compact(context.Background()); err != nil {
		b.Fatal(err)
	}
	s.Close()
	spec := durableCacheSpec
	spec.MaxEntries, spec.MaxBytes = 2*keys, 1<<30
	b.ResetTimer()
	for b.Loop() {
		br := NewBroker(Config{Storage: &st})
		if err := br.ApplyCache(spec); err != nil {
			b.Fatal(err)
		}
		c, _ := br.Cache(CacheKey{"t", "ns", "c"})
		if n, _ := c.Len(); n != keys {
			b.Fatalf("%d entries after restart", n)
		}
		b.StopTimer()
		br.Close()
		b.StartTimer()
	}
}
