package e2e

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	felix "github.com/felixmq/felix/sdk/felix"
)

// watchRunEnv makes a log-backed cache compact often: small segments, a
// compaction check every 200 ms, a small in-memory watch history (so
// resumes read the log), and the periodic fsync (a SIGKILL keeps what was
// handed to the OS, which is every acknowledged write).
var watchRunEnv = []string{"FELIX_CACHE_COMPACT_INTERVAL_MS=200", "FELIX_DURABLE_SEGMENT_BYTES=65536",
	"FELIX_DURABLE_FSYNC=periodic", "FELIX_CACHE_WATCH_HISTORY_BYTES=16384"}

// TestCacheWatchGuaranteesAcrossRestartsAndCompaction is etcd's watch
// robustness run on Felix's log-backed cache: writers put, delete and let
// keys expire while fillers drive compaction, and watches of a prefix (the
// reference), one key, a retained prefix, and ones resumed from the very
// first offset, run across three SIGKILLs of felix serve, each resuming
// from its last offset; at the end every watch is checked for the ordered,
// unique, atomic, reliable and resumable guarantees (watch_validate_test.go).
func TestCacheWatchGuaranteesAcrossRestartsAndCompaction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(17, 20221))
	const kills, writers = 3, 3
	specs := []watchSpec{
		{name: "all", filter: felix.WatchPrefix("w/")},
		{name: "key", filter: felix.WatchKey("w/0/p1")},
		{name: "retained", filter: felix.WatchPrefix("w/1/"), retained: true},
	}
	var mu sync.Mutex
	logs := make([]*watchLog, len(specs))
	for i, s := range specs {
		logs[i] = &watchLog{Name: s.name}
	}
	var rewinds []*watchLog
	hist := newWriteHistory()
	kws := make([]*keyWriter, writers)
	for i := range kws {
		kws[i] = &keyWriter{id: i}
	}
	acked, filled := 0, 0
	for cycle := 0; cycle <= kills; cycle++ {
		n := startServeIn(t, dir, watchRunEnv...)
		if cycle == 0 {
			n.mustFelix(ctx, "admin", "cache", "create", "watched")
		}
		c := cacheReady(t, ctx, n, "watched")
		unpin(t, ctx, c, "watched")
		wctx, stopWatches := context.WithCancel(ctx)
		var watches sync.WaitGroup
		follow := func(spec watchSpec, rec *watchLog) {
			watches.Add(1)
			go func() {
				defer watches.Done()
				followWatch(wctx, t, &mu, c, "watched", spec, rec)
			}()
		}
		for i, s := range specs {
			follow(s, logs[i])
		}
		if cycle == 0 {
			// Writers must not start before the reference watch has.
			eventually(t, 10*time.Second, "the reference watch to start", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(logs[0].Sessions) > 0
			})
		}
		runFor := time.Duration(3000+rng.IntN(2000)) * time.Millisecond
		writeCtx, stopWrites := context.WithTimeout(ctx, runFor)
		var work sync.WaitGroup
		var wmu sync.Mutex
		for _, kw := range kws {
			work.Add(1)
			go func() {
				defer work.Done()
				wc := n.connect(ctx, n.adminToken())
				defer wc.Close()
				a := kw.run(writeCtx, wc, "watched", hist)
				wmu.Lock()
				acked += a
				wmu.Unlock()
			}()
		}
		work.Add(1)
		go func() {
			defer work.Done()
			fc := n.connect(ctx, n.adminToken())
			defer fc.Close()
			f := fillCache(writeCtx, fc, "watched", 32, 512)
			wmu.Lock()
			filled += f
			wmu.Unlock()
		}()
		// Halfway, a watch resumes from the reference watch's first offset:
		// read from the log, or a resnapshot once compaction dropped it.
		time.Sleep(runFor / 2)
		mu.Lock()
		first := logs[0].Sessions
		mu.Unlock()
		if len(first) > 0 {
			from := first[0].Start
			rw := &watchLog{Name: fmt.Sprintf("rewind-%d", cycle)}
			rewinds = append(rewinds, rw)
			follow(watchSpec{name: rw.Name, filter: felix.WatchPrefix("w/"), from: &from}, rw)
		}
		if cycle < kills {
			time.Sleep(runFor / 2)
			n.stop(syscall.SIGKILL, 10*time.Second)
			work.Wait()
			stopWrites()
			watches.Wait()
			stopWatches()
			c.Close()
			continue
		}
		work.Wait()
		stopWrites()
		// Compaction must have dropped part of the log by the end, so
		// that the run covers resumes into what it dropped.
		fillUntil(t, ctx, c, "watched", "compaction drops the log's first segment", func() bool {
			return firstSegmentBase(t, dir, "watched") > 0
		})
		// The last write, after every writer stopped: once the reference
		// watch has it, it has everything.
		if err := c.CachePut(ctx, "default", "watched", "w/end", []byte("end"), 0); err != nil {
			t.Fatal(err)
		}
		hist.add("w/end", writtenOp{Op: "put", Value: "end", Acked: true})
		eventually(t, 20*time.Second, "the reference watch to see the last write", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return sawPut(logs[0], "w/end")
		})
		time.Sleep(200 * time.Millisecond) // let the others read what they are sent
		stopWatches()
		watches.Wait()
		c.Close()
		n.stop(syscall.SIGTERM, 10*time.Second)
	}
	all := append(append([]*watchLog{}, logs...), rewinds...)
	complete := true
	sessions, resnapshots, events := 0, 0, 0
	for _, r := range all {
		for _, s := range r.Sessions {
			sessions++
			events += len(s.Items)
			if s.Resnapshot {
				resnapshots++
				if r == logs[0] {
					complete = false
				}
			}
		}
	}
	t.Logf("%d acknowledged writes, %d filler puts, %d kills; %d watch sessions (%d resnapshots) delivered %d items; the log starts at %d",
		acked, filled, kills, sessions, resnapshots, events, firstSegmentBase(t, dir, "watched"))
	if !complete {
		t.Logf("the reference watch was resnapshotted: acknowledged writes are checked only through the sessions")
	}
	reportWatchErrors(t, validateWatches(all, hist, complete))
}

// firstSegmentBase is the first offset of the oldest segment of cache's
// log in felix serve's data directory dir: above 0 once compaction has
// dropped segments.
func firstSegmentBase(t *testing.T, dir, cache string) uint64 {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "felix-data", "log", "caches", "default", "default", cache, "*", "log", "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segments of cache %s in %s (%v)", cache, dir, err)
	}
	first := uint64(math.MaxUint64)
	for _, s := range segs {
		base, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(s), ".log"), 10, 64)
		if err != nil {
			t.Fatalf("segment %s: %v", s, err)
		}
		first = min(first, base)
	}
	return first
}

// sawPut reports whether rec delivered a change to key.
func sawPut(rec *watchLog, key string) bool {
	for _, s := range rec.Sessions {
		for _, it := range s.Items {
			if it.Key == key && !it.Retained {
				return true
			}
		}
	}
	return false
}
