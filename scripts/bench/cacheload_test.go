package main

import (
	"bufio"
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// register is a naive versioned key, the model every peer's
// compare-and-set must behave like. Each call takes a millisecond of
// synctest's clock, so callers interleave between a read and a write.
// With lose set, every third applied write is acknowledged and dropped.
type register struct {
	mu      sync.Mutex
	value   []byte
	version uint64
	writes  int
	lose    bool
}

func (r *register) ops() kvCAS {
	return kvCAS{
		read: func(ctx context.Context) ([]byte, uint64, error) {
			time.Sleep(time.Millisecond)
			r.mu.Lock()
			defer r.mu.Unlock()
			return append([]byte(nil), r.value...), r.version, nil
		},
		write: func(ctx context.Context, v []byte, version uint64) (bool, error) {
			time.Sleep(time.Millisecond)
			r.mu.Lock()
			defer r.mu.Unlock()
			if version != r.version {
				return false, nil
			}
			r.writes++
			if !r.lose || r.writes%3 != 0 {
				r.value, r.version = v, r.version+1
			}
			return true, nil
		},
	}
}

func TestCASLoadCountsAgainstTheFinalCounter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := &register{value: make([]byte, 256)}
		f, err := casLoad(context.Background(), 8, time.Second, reg.ops())
		if err != nil {
			t.Fatal(err)
		}
		// casLoad itself fails unless the counter equals the updates applied.
		if f["applied_per_s"] <= 0 || casCounter(reg.value) == 0 || f["refused_per_s"] <= 0 || f["errors"] != 0 {
			t.Fatalf("figures %v, counter %d", f, casCounter(reg.value))
		}
		if f["update_p50_ms"] < 2 || f["writes_per_update"] <= 1 {
			t.Fatalf("an update is a read and a write of 1 ms each, and eight callers contend: %v", f)
		}
	})
}

func TestCASLoadFailsWhenAnAcknowledgedUpdateIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := &register{value: make([]byte, 8), lose: true}
		if _, err := casLoad(context.Background(), 4, time.Second, reg.ops()); err == nil ||
			!strings.Contains(err.Error(), "applied updates") {
			t.Fatalf("a store that drops acknowledged writes passed: %v", err)
		}
	})
}

func TestPutLoadCountsOnlyAcknowledgedPuts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		stored := map[string]int{}
		n := 0
		put := func(ctx context.Context, key string, v []byte) error {
			time.Sleep(time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			n++
			if n%2 == 0 {
				return context.DeadlineExceeded
			}
			stored[key] = len(v)
			return nil
		}
		f, err := putLoad(context.Background(), 4, 10, 256, time.Second, put)
		if err != nil {
			t.Fatal(err)
		}
		// Four callers, 1 ms a put, half failing: about 2,000 acked in 1 s.
		if f["puts_per_s"] < 1900 || f["puts_per_s"] > 2000 || f["errors"] < 1900 || f["p50_ms"] != 1 {
			t.Fatalf("figures %v", f)
		}
		if len(stored) != 10 || stored["k0"] != 256 {
			t.Fatalf("stored %v", stored)
		}
	})
}

func TestGaugeIn(t *testing.T) {
	page := "# HELP felix_cache_index_bytes x\nfelix_cache_index_bytes_total 9\nfelix_cache_index_bytes 1234\n"
	if v, ok := gaugeIn(bufio.NewScanner(strings.NewReader(page)), "felix_cache_index_bytes"); !ok || v != 1234 {
		t.Fatalf("got %v %v", v, ok)
	}
	if _, ok := gaugeIn(bufio.NewScanner(strings.NewReader("felix_other 1\n")), "felix_cache_index_bytes"); ok {
		t.Fatal("found a gauge that is not there")
	}
}

func TestCacheStorageNote(t *testing.T) {
	for _, tc := range []struct {
		s    cacheStorage
		want string
	}{
		{cacheStorage{files: true}, "log-backed"},
		{cacheStorage{indexMetric: true, indexBytes: true}, "log-backed"},
		{cacheStorage{indexMetric: true}, "in memory (nothing"},
		{cacheStorage{}, "no log-backed cache"},
	} {
		if got := tc.s.note(); !strings.Contains(got, tc.want) {
			t.Errorf("%+v: %q lacks %q", tc.s, got, tc.want)
		}
	}
}

func TestCacheWorkloadsAreListed(t *testing.T) {
	o, err := parseFlags([]string{"--workloads", "cache-put,cache-latency,cache-cas", "--cas-callers", "4"})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range allWorkloads() {
		if w.name != "cache-cas" {
			continue
		}
		cs := w.cases(o)
		if len(cs) != 2 || cs[0].name != "C=4 on one key; fsync always / sync_interval always" || cs[1].peerName != etcdOneMember {
			t.Fatalf("cache-cas cases: %+v", cs)
		}
		return
	}
	t.Fatal("no cache-cas workload")
}
