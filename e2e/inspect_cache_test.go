package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInspectSegmentsListsCacheAndCounterLogs: after felix serve has
// written a durable cache's keys and counters and stopped, `felix inspect
// segments --data-dir` lists its cache log and counter log, labelled
// with the cache's names, with records that verify, the verdict open,
// and the versions and sums the broker answered.
func TestInspectSegmentsListsCacheAndCounterLogs(t *testing.T) {
	dir := t.TempDir()
	n := startServeIn(t, dir, "FELIX_DURABLE_FSYNC=always")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "cache", "create", "sessions")
	c := cacheReady(t, ctx, n, "sessions")
	versions := map[string]uint64{}
	for i := range 4 {
		key := fmt.Sprintf("user-%d", i)
		if err := c.CachePut(ctx, "default", "sessions", key, []byte(strings.Repeat("v", 10+i)), time.Duration(i)*time.Hour); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		_, ver, found, err := c.CacheGetVersioned(ctx, "default", "sessions", key)
		if err != nil || !found {
			t.Fatalf("get %s: %v (found %v)", key, err, found)
		}
		versions[key] = ver
	}
	var sum int64
	for _, d := range []int64{3, 4, -2} {
		s, err := c.CounterAdd(ctx, "default", "sessions", "hits", d)
		if err != nil {
			t.Fatalf("counter add: %v", err)
		}
		sum = s
	}
	c.Close()
	if err := n.stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}

	out, _, code := n.felix(ctx, "inspect", "segments", "--data-dir", "felix-data", "--records")
	if code != 0 {
		t.Fatalf("inspect: exit %d\n%s", code, out)
	}
	for _, want := range []string{"cache log default/default/sessions incarnation ", "counter log default/default/sessions incarnation ",
		"user-3", "delta +3", "delta -2", "verdict: open"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}

	out, _, code = n.felix(ctx, "inspect", "segments", "--data-dir", "felix-data", "--kind", "cache", "--records", "-o", "json")
	var doc struct {
		Shards []json.RawMessage `json:"shards"`
		Caches []struct {
			Cache    string   `json:"cache"`
			CacheLog storeLog `json:"cache_log"`
			// CounterLog is absent with --kind cache.
			CounterLog *storeLog `json:"counter_log"`
		} `json:"caches"`
		Refused int `json:"refused"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("inspect -o json: exit %d, %v\n%s", code, err, out)
	}
	if len(doc.Shards) != 0 || len(doc.Caches) != 1 || doc.Refused != 0 || doc.Caches[0].Cache != "sessions" || doc.Caches[0].CounterLog != nil {
		t.Fatalf("inspect -o json:\n%s", out)
	}
	cl := doc.Caches[0].CacheLog
	cl.check(t, "cache log")
	got := map[string]uint64{}
	for _, r := range cl.Records {
		if r.Kind == "cache-put" && r.Version != nil {
			got[r.Key] = *r.Version
		}
	}
	for k, v := range versions {
		if got[k] != v {
			t.Errorf("%s: inspect shows version %d, the broker answered %d", k, got[k], v)
		}
	}

	out, _, code = n.felix(ctx, "inspect", "segments", "--data-dir", "felix-data", "--kind", "counter", "--records", "-o", "json")
	var cdoc struct {
		Caches []struct {
			CounterLog storeLog `json:"counter_log"`
		} `json:"caches"`
	}
	if err := json.Unmarshal([]byte(out), &cdoc); err != nil || code != 0 || len(cdoc.Caches) != 1 {
		t.Fatalf("inspect --kind counter: exit %d, %v\n%s", code, err, out)
	}
	cdoc.Caches[0].CounterLog.check(t, "counter log")
	var folded int64
	for _, r := range cdoc.Caches[0].CounterLog.Records {
		if r.Key == "hits" && r.Delta != nil {
			folded += *r.Delta
		}
	}
	if folded != sum {
		t.Fatalf("the counter log's deltas add up to %d, the broker answered %d", folded, sum)
	}
}

// storeLog is the part of inspect's JSON for one cache or counter log
// that the test reads.
type storeLog struct {
	Verdict  string `json:"verdict"`
	Segments []struct {
		RecordsOK bool `json:"records_ok"`
		IndexOK   bool `json:"index_ok"`
	} `json:"segments"`
	Records []struct {
		Kind    string  `json:"kind"`
		Key     string  `json:"key"`
		Version *uint64 `json:"version"`
		Delta   *int64  `json:"delta"`
		Error   string  `json:"error"`
	} `json:"records"`
}

// check: the log opens, every segment verifies, every record decodes.
func (l storeLog) check(t *testing.T, what string) {
	t.Helper()
	if l.Verdict != "open" || len(l.Segments) == 0 || len(l.Records) == 0 {
		t.Fatalf("%s: verdict %q, %d segments, %d records", what, l.Verdict, len(l.Segments), len(l.Records))
	}
	for _, s := range l.Segments {
		if !s.RecordsOK || !s.IndexOK {
			t.Fatalf("%s: a segment does not verify: %+v", what, l.Segments)
		}
	}
	for _, r := range l.Records {
		if r.Error != "" {
			t.Fatalf("%s: record %+v does not decode", what, r)
		}
	}
}
