package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// randomWrites applies n random puts and deletes over keys to s and the
// model, with values large enough to fill small segments.
func randomWrites(t testing.TB, s *CacheStore, model storeModel, keys []string, n int, rng *rand.Rand) {
	t.Helper()
	ctx := context.Background()
	for range n {
		k := keys[rng.IntN(len(keys))]
		if rng.IntN(5) == 0 {
			if _, _, err := s.Delete(ctx, k); err != nil {
				t.Fatal(err)
			}
			delete(model, k)
			continue
		}
		v := []byte(fmt.Sprintf("%s=%d%s", k, rng.Int(), strings.Repeat("x", rng.IntN(64))))
		ver, err := s.Put(ctx, k, v, 0)
		if err != nil {
			t.Fatal(err)
		}
		model[k] = CacheStoreValue{Value: v, Version: ver}
	}
}

func testKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%03d", i)
	}
	return keys
}

// TestCacheStoreCompactionKeepsEveryLatestValueAndVersion: compaction
// drops whole segments of superseded records and nothing else: every
// live key keeps its value and its version (the offset of its put),
// before and after a restart, and a history read into what it dropped
// is told it was compacted.
func TestCacheStoreCompactionKeepsEveryLatestValueAndVersion(t *testing.T) {
	ctx := context.Background()
	o := storeOptions(t, t.TempDir())
	o.SegmentBytes = 2048
	o.Fsync = flog.FsyncNone // the test is about compaction, not fsync
	s := mustOpenStore(t, o)
	rng := rand.New(rand.NewPCG(1, 2))
	keys := testKeys(40)
	model := storeModel{}
	now := time.Now()
	for round := range 5 {
		randomWrites(t, s, model, keys, 600, rng)
		segsBefore := s.log.Stats().Segments
		res, err := s.Compact(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Keys != len(model) || res.Dropped == 0 || s.log.Stats().Segments != segsBefore-res.Dropped {
			t.Fatalf("round %d: %+v with %d live keys, %d segments before", round, res, len(model), segsBefore)
		}
		if got := storeContents(t, s, keys, now); !sameModel(got, model) {
			t.Fatalf("round %d after compaction: %d keys, want %d", round, len(got), len(model))
		}
		if err := s.checkIndex(); err != nil {
			t.Fatal(err)
		}
	}
	start := s.StartOffset()
	if start == 0 {
		t.Fatal("nothing was compacted")
	}
	_, _, err := s.ReadChanges(start-1, s.NextOffset(), 0, 0)
	var ce *CacheCompactedError
	if !errors.Is(err, ErrCacheCompacted) || !errors.As(err, &ce) || ce.Start != start || ce.Requested != start-1 {
		t.Fatalf("history read below the start: %v", err)
	}
	if _, _, err := s.ReadChanges(start, s.NextOffset(), 0, 0); err != nil {
		t.Fatalf("history read from the start: %v", err)
	}
	s.Close()
	s = mustOpenStore(t, o)
	if got := storeContents(t, s, keys, now); !sameModel(got, model) {
		t.Fatalf("after restart: %d keys, want %d", len(got), len(model))
	}
}

// TestCacheStoreCompactionUnderLoad: writers keep writing while
// compactions run; every acknowledged write is read back with its
// version, then and after a restart.
func TestCacheStoreCompactionUnderLoad(t *testing.T) {
	ctx := context.Background()
	o := storeOptions(t, t.TempDir())
	o.SegmentBytes = 4096
	s := mustOpenStore(t, o)
	const writers = 4
	models := make([]storeModel, writers)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		models[w] = storeModel{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			keys := testKeys(30)
			for i := range keys {
				keys[i] = fmt.Sprintf("w%d-%s", w, keys[i])
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				randomWrites(t, s, models[w], keys, 20, rng)
			}
		}()
	}
	for range 10 {
		if _, err := s.Compact(ctx); err != nil {
			t.Error(err)
			break
		}
	}
	close(stop)
	wg.Wait()
	model := storeModel{}
	var keys []string
	for w := range writers {
		for k, v := range models[w] {
			model[k] = v
		}
		for _, k := range testKeys(30) {
			keys = append(keys, fmt.Sprintf("w%d-%s", w, k))
		}
	}
	now := time.Now()
	if got := storeContents(t, s, keys, now); !sameModel(got, model) {
		t.Fatalf("under load: %d keys, want %d", len(got), len(model))
	}
	s.Close()
	s = mustOpenStore(t, o)
	if got := storeContents(t, s, keys, now); !sameModel(got, model) {
		t.Fatalf("after restart: %d keys, want %d", len(got), len(model))
	}
}

// TestCacheStoreDamagedSnapshot: a snapshot whose CRC fails is not used:
// while the log still starts at 0 the store replays all of it; once
// compaction dropped segments the open is refused, saying why.
func TestCacheStoreDamagedSnapshot(t *testing.T) {
	ctx := context.Background()
	o := storeOptions(t, t.TempDir())
	s := mustOpenStore(t, o)
	model := storeModel{}
	keys := testKeys(10)
	randomWrites(t, s, model, keys, 50, rand.New(rand.NewPCG(3, 4)))
	if res, err := s.Compact(ctx); err != nil || res.Dropped != 0 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	s.Close()
	flipSnapshotByte(t, o.Dir)
	s2, err := OpenCacheStore(o)
	if err != nil {
		t.Fatalf("open with a damaged snapshot and the whole log: %v", err)
	}
	if got := storeContents(t, s2, keys, time.Now()); !sameModel(got, model) || s2.snapPoint != 0 {
		t.Fatalf("replayed %d keys (snapshot point %d), want %d", len(got), s2.snapPoint, len(model))
	}
	s2.Close()

	o2 := storeOptions(t, t.TempDir())
	o2.SegmentBytes = 1024
	s3 := mustOpenStore(t, o2)
	randomWrites(t, s3, storeModel{}, keys, 300, rand.New(rand.NewPCG(5, 6)))
	if res, err := s3.Compact(ctx); err != nil || res.Dropped == 0 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	s3.Close()
	flipSnapshotByte(t, o2.Dir)
	if _, err := OpenCacheStore(o2); err == nil || !strings.Contains(err.Error(), "records before it are gone") {
		t.Fatalf("open with a damaged snapshot over a compacted log: %v", err)
	}
}

func flipSnapshotByte(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, cachelog.SnapshotFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCacheStoreIndexBoundRefusesNewKeys: once the index is at its
// bound a new key is refused with overloaded, reason cache_full, naming
// the limit, while existing keys can still be rewritten and deleted; a
// delete makes room again. The metric reports the accounted bytes.
func TestCacheStoreIndexBoundRefusesNewKeys(t *testing.T) {
	ctx := context.Background()
	m := newCoreMetrics()
	o := storeOptions(t, t.TempDir())
	o.MaxIndexBytes = 10 * indexCost("key-000")
	o.metrics = m
	s := mustOpenStore(t, o)
	keys := testKeys(11)
	for _, k := range keys[:10] {
		if _, err := s.Put(ctx, k, []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.Put(ctx, keys[10], []byte("v"), 0)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeOverloaded || we.Reason() != wire.ReasonCacheFull ||
		we.Detail["limit"] != "index_bytes" || we.Detail["limit_bytes"] != o.MaxIndexBytes ||
		!strings.Contains(we.Message, fmt.Sprint(o.MaxIndexBytes)) {
		t.Fatalf("new key past the bound: %v", err)
	}
	if _, err := s.Put(ctx, keys[3], bytes.Repeat([]byte("w"), 1000), 0); err != nil {
		t.Fatalf("rewrite at the bound: %v", err)
	}
	if used, limit := s.IndexBytes(); used != limit {
		t.Fatalf("used %d of %d", used, limit)
	}
	var buf bytes.Buffer
	m.set.WritePrometheus(&buf)
	if want := fmt.Sprintf("felix_cache_index_bytes %d\n", o.MaxIndexBytes); !strings.Contains(buf.String(), want) {
		t.Fatalf("metrics lack %q:\n%s", want, buf.String())
	}
	if _, _, err := s.Delete(ctx, keys[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, keys[10], []byte("v"), 0); err != nil {
		t.Fatalf("new key after a delete: %v", err)
	}
	// The bound holds across a restart too.
	s.Close()
	s = mustOpenStore(t, o)
	if _, err := s.Put(ctx, keys[0], []byte("v"), 0); !errors.As(err, &we) || we.Reason() != wire.ReasonCacheFull {
		t.Fatalf("new key past the bound after restart: %v", err)
	}
}

// TestCacheStoreCompactionCopiesColdValuesForward: a key written once and
// never again does not pin the log: compaction copies its value forward
// (keeping its version) once the records around it are mostly dead, and
// drops the old segments; the copy is no change to a history reader.
func TestCacheStoreCompactionCopiesColdValuesForward(t *testing.T) {
	ctx := context.Background()
	o := storeOptions(t, t.TempDir())
	o.SegmentBytes = 2048
	o.Fsync = flog.FsyncNone
	s := mustOpenStore(t, o)
	coldVer, err := s.Put(ctx, "cold", []byte("written once"), 0)
	if err != nil {
		t.Fatal(err)
	}
	model := storeModel{"cold": {Value: []byte("written once"), Version: coldVer}}
	keys := testKeys(10)
	rng := rand.New(rand.NewPCG(9, 9))
	copied := 0
	for range 3 {
		randomWrites(t, s, model, keys, 400, rng)
		res, err := s.Compact(ctx)
		if err != nil {
			t.Fatal(err)
		}
		copied += res.Copied
	}
	if copied == 0 || s.StartOffset() <= coldVer {
		t.Fatalf("copied %d values; the log still starts at %d, at or below the cold put at %d", copied, s.StartOffset(), coldVer)
	}
	all := append([]string{"cold"}, keys...)
	now := time.Now()
	if got := storeContents(t, s, all, now); !sameModel(got, model) {
		t.Fatalf("after copying forward: %v", got["cold"])
	}
	chs, _, err := s.ReadChanges(s.StartOffset(), s.NextOffset(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range chs {
		if ch.Key == "cold" {
			t.Fatalf("the copy of the cold value reads as a change: %+v", ch)
		}
	}
	s.Close()
	s = mustOpenStore(t, o)
	if got := storeContents(t, s, all, now); !sameModel(got, model) {
		t.Fatalf("after restart: %v", got["cold"])
	}
	var seen []uint64
	if err := s.ScanLive(func(k string, _ []byte, ver uint64, _ int64) {
		if k == "cold" {
			seen = append(seen, ver)
		}
	}); err != nil || len(seen) != 1 || seen[0] != coldVer {
		t.Fatalf("ScanLive gave the cold key at %v (%v), want once at %d", seen, err, coldVer)
	}
}
