package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	felix "github.com/felixmq/felix/sdk/felix"
)

// cacheState is what a key must hold: a value and, when the client
// learnt it, its version; or nothing (deleted).
type cacheState struct {
	value   string
	version uint64 // 0: not known
	deleted bool
}

// cacheClientRun is one client's writes to its own keys until the broker
// is killed: the state each key was acknowledged in, and what the write
// in flight at the kill may have left.
type cacheClientRun struct {
	acked  map[string]cacheState
	maybe  map[string]cacheState
	writes int // acknowledged
}

// writeCacheUntilKilled runs puts, deletes and compare-and-sets on the
// client's keys (no other client writes them, so every compare-and-set
// must apply) until a call fails.
func writeCacheUntilKilled(ctx context.Context, t *testing.T, c *felix.Client, cache string, client, cycle int, acked map[string]cacheState) cacheClientRun {
	run := cacheClientRun{acked: acked, maybe: map[string]cacheState{}}
	for seq := 0; ; seq++ {
		key := fmt.Sprintf("c%d-k%d", client, seq%4)
		value := fmt.Sprintf("cy%d-%d", cycle, seq)
		switch seq % 5 {
		case 3:
			if _, _, err := c.CacheDelete(ctx, "default", cache, key); err != nil {
				run.maybe[key] = cacheState{deleted: true}
				return run
			}
			run.acked[key] = cacheState{deleted: true}
			run.writes++
		case 1, 4:
			cond := felix.IfAbsent()
			if cur, ok := run.acked[key]; ok && !cur.deleted {
				if cur.version == 0 {
					_, ver, found, err := c.CacheGetVersioned(ctx, "default", cache, key)
					if err != nil {
						return run
					}
					if !found {
						t.Errorf("%s: acknowledged %+v, read as absent", key, cur)
						return run
					}
					cur.version = ver
					run.acked[key] = cur
				}
				cond = felix.IfVersion(cur.version)
			}
			r, err := c.CachePutIf(ctx, "default", cache, key, []byte(value), 0, cond)
			if err != nil {
				run.maybe[key] = cacheState{value: value}
				return run
			}
			if !r.Applied {
				t.Errorf("%s: a compare-and-set on a key no one else writes was refused (%+v, cond %+v, acked %+v)", key, r, cond, run.acked[key])
				return run
			}
			run.acked[key] = cacheState{value: value, version: r.Version}
			run.writes++
		default:
			if err := c.CachePut(ctx, "default", cache, key, []byte(value), 0); err != nil {
				run.maybe[key] = cacheState{value: value}
				return run
			}
			run.acked[key] = cacheState{value: value}
			run.writes++
		}
	}
}

// checkCacheState reads every key back and checks it against what was
// acknowledged (or what the write in flight may have left). It returns
// the keys whose write in flight turned out to have landed, with the
// state it left: from now on that is what they hold.
func checkCacheState(ctx context.Context, t *testing.T, c *felix.Client, cache string, acked, maybe map[string]cacheState) map[string]cacheState {
	t.Helper()
	landed := map[string]cacheState{}
	keys := map[string]bool{}
	for k := range acked {
		keys[k] = true
	}
	for k := range maybe {
		keys[k] = true
	}
	for key := range keys {
		want, wasAcked := acked[key]
		if !wasAcked {
			want = cacheState{deleted: true}
		}
		v, ver, found, err := c.CacheGetVersioned(ctx, "default", cache, key)
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		got := cacheState{value: string(v), version: ver, deleted: !found}
		matches := func(s cacheState) bool {
			if s.deleted || got.deleted {
				return s.deleted == got.deleted
			}
			return s.value == got.value && (s.version == 0 || s.version == got.version)
		}
		if matches(want) {
			continue
		}
		if m, ok := maybe[key]; ok && matches(m) {
			landed[key] = got
			continue
		}
		t.Fatalf("%s after the kill: %+v, acknowledged %+v (in flight %+v)", key, got, want, maybe[key])
	}
	return landed
}

// TestAckedCacheWritesSurviveSIGKILL: clients put, delete and
// compare-and-set on a log-backed cache (felix serve's data directory,
// fsync always) while the broker is SIGKILLed at random points; after
// every restart each key holds what was last acknowledged (or what the
// write in flight left), at the version acknowledged, and compare-and-sets
// with versions learnt before a kill still apply after it.
func TestAckedCacheWritesSurviveSIGKILL(t *testing.T) {
	dir := t.TempDir()
	env := []string{"FELIX_DURABLE_FSYNC=always", "FELIX_DURABLE_SEGMENT_BYTES=65536"}
	rng := rand.New(rand.NewPCG(17, 4))
	const clients, cycles = 6, 4
	acked := make([]map[string]cacheState, clients)
	for i := range acked {
		acked[i] = map[string]cacheState{}
	}
	maybe := map[string]cacheState{}
	total := 0
	for cycle := range cycles + 1 {
		n := startServeIn(t, dir, env...)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if cycle == 0 {
			n.mustFelix(ctx, "admin", "cache", "create", "crash-cache")
		}
		c := cacheReady(t, ctx, n, "crash-cache")
		all := map[string]cacheState{}
		for _, a := range acked {
			for k, v := range a {
				all[k] = v
			}
		}
		for k, v := range checkCacheState(ctx, t, c, "crash-cache", all, maybe) {
			var client, j int
			fmt.Sscanf(k, "c%d-k%d", &client, &j)
			acked[client][k] = v
		}
		if cycle == cycles {
			t.Logf("%d acknowledged writes over %d kills", total, cycles)
			cancel()
			return
		}
		maybe = map[string]cacheState{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		killAfter := time.Duration(500+rng.IntN(700)) * time.Millisecond
		go func() {
			time.Sleep(killAfter)
			n.stop(syscall.SIGKILL, 10*time.Second)
		}()
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cc := n.connect(ctx, n.adminToken())
				defer cc.Close()
				run := writeCacheUntilKilled(ctx, t, cc, "crash-cache", i, cycle, acked[i])
				mu.Lock()
				for k, v := range run.maybe {
					maybe[k] = v
				}
				total += run.writes
				mu.Unlock()
			}()
		}
		wg.Wait()
		n.stop(syscall.SIGKILL, 10*time.Second)
		c.Close()
		cancel()
		if t.Failed() {
			return
		}
	}
}
