package cli

import (
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
)

// writeStoreLog appends entries to the log in dir (created if needed).
func writeStoreLog(t *testing.T, dir string, entries []flog.Entry) {
	t.Helper()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	l, _, err := flog.Open(flog.Options{Dir: dir, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendEntries(entries, "", uint64(now.UnixMicro())); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func cacheEntry(r cachelog.CacheRecord) flog.Entry {
	return flog.Entry{Kind: r.Kind, Payload: r.Append(nil)}
}

func counterEntry(r cachelog.CounterRecord) flog.Entry {
	return flog.Entry{Kind: r.Kind, Payload: r.Append(nil)}
}

// writeCacheIncarnation writes a cache incarnation as the broker lays it
// out, with the stores' encoders: an offset base of 1000, a cache log
// (put k1 with an expiry, put k2, delete k1), an index snapshot at point
// 2, and a counter log (c +5, c -2, checkpoint c 3, remove d).
func writeCacheIncarnation(t *testing.T, storage string) string {
	t.Helper()
	dir := filepath.Join(storage, cachelog.CachesDir, "acme", "prod", "sessions", cachelog.IncarnationDirName("3"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, cachelog.OffsetBaseFile), cachelog.OffsetBaseBytes(1000), 0o644); err != nil {
		t.Fatal(err)
	}
	exp := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	writeStoreLog(t, filepath.Join(dir, cachelog.LogDir), []flog.Entry{
		cacheEntry(cachelog.CacheRecord{Kind: flog.KindCachePut, Key: "k1", ExpiresAt: exp, Value: []byte("hello")}),
		cacheEntry(cachelog.CacheRecord{Kind: flog.KindCachePut, Key: "k2", Value: []byte("a longer value")}),
		cacheEntry(cachelog.CacheRecord{Kind: flog.KindCacheTombstone, Key: "k1"}),
	})
	snap := cachelog.AppendSnapshotHeader(nil, 2, 2)
	snap = cachelog.AppendSnapshotEntry(snap, "k1", 0, exp)
	snap = cachelog.AppendSnapshotEntry(snap, "k2", 1, 0)
	snap = binary.BigEndian.AppendUint32(snap, crc32.Checksum(snap, cachelog.CRCTable))
	if err := os.WriteFile(filepath.Join(dir, cachelog.SnapshotFile), snap, 0o644); err != nil {
		t.Fatal(err)
	}
	writeStoreLog(t, filepath.Join(dir, cachelog.CounterDir, cachelog.LogDir), []flog.Entry{
		counterEntry(cachelog.CounterRecord{Kind: flog.KindCounterDelta, Key: "c", Value: 5}),
		counterEntry(cachelog.CounterRecord{Kind: flog.KindCounterDelta, Key: "c", Value: -2}),
		counterEntry(cachelog.CounterRecord{Kind: flog.KindCounterCheckpoint, Key: "c", Value: 3}),
		counterEntry(cachelog.CounterRecord{Kind: flog.KindCounterRemove, Key: "d"}),
	})
	return dir
}

func wantOutput(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestInspectSegmentsCacheAndCounterLogs: inspect segments lists a
// cache incarnation's cache log (with its index snapshot) and counter
// log beside the stream shard logs, each labelled, decodes their records
// with --records, keeps one kind with --kind, reads one incarnation or
// its counters with --dir, and refuses a log whose record does not
// decode.
func TestInspectSegmentsCacheAndCounterLogs(t *testing.T) {
	clearEnv(t)
	data := t.TempDir()
	storage := filepath.Join(data, "log")
	writeShardLog(t, storage, "default/default/events/0", 3, 1<<20)
	inc := writeCacheIncarnation(t, storage)

	r := run(t, toolkit{}, nil, "inspect", "segments", "--data-dir", data)
	if r.err != nil {
		t.Fatalf("exit %d %q\n%s", r.exitCode(), r.message(), r.stdout)
	}
	wantOutput(t, r.stdout,
		"stream default/default/events shard 0 (",
		"cache log acme/prod/sessions incarnation 3, offset base 1000 ("+filepath.Join(inc, "log")+")",
		"counter log acme/prod/sessions incarnation 3 ("+filepath.Join(inc, "counters", "log")+")",
		"cache-put:2 cache-tombstone:1", "counter-delta:2 counter-checkpoint:1 counter-remove:1",
		"index snapshot: ", "verifies; point offset 2 (the records below it are reflected), 2 keys; opening loads it",
		"verdict: open; offsets 0 to 2", "verdict: open; offsets 0 to 3")
	if strings.Index(r.stdout, "stream ") > strings.Index(r.stdout, "cache log") ||
		strings.Index(r.stdout, "cache log") > strings.Index(r.stdout, "counter log") {
		t.Errorf("logs out of order:\n%s", r.stdout)
	}

	r = run(t, toolkit{}, nil, "inspect", "segments", "--data-dir", data, "--kind", "cache", "--records")
	if r.err != nil {
		t.Fatalf("exit %d %q\n%s", r.exitCode(), r.message(), r.stdout)
	}
	wantOutput(t, r.stdout, "KEY", "VALUE BYTES", "EXPIRES", "2027-01-02T03:04:05Z", "1001", "never", "cache-tombstone")
	for _, absent := range []string{"stream default", "counter log", "delta +5"} {
		if strings.Contains(r.stdout, absent) {
			t.Errorf("--kind cache shows %q:\n%s", absent, r.stdout)
		}
	}
	r = run(t, toolkit{}, nil, "inspect", "segments", "--dir", filepath.Join(inc, cachelog.CounterDir), "--records")
	if r.err != nil || strings.Contains(r.stdout, "cache log") {
		t.Fatalf("--dir counters: %v\n%s", r.err, r.stdout)
	}
	wantOutput(t, r.stdout, "counter log acme/prod/sessions incarnation 3", "delta +5", "delta -2", "sum 3", "removed")
	if r := run(t, toolkit{}, nil, "inspect", "segments", "--data-dir", data, "--kind", "queue"); r.exitCode() != exitUsage ||
		!strings.Contains(r.message(), `--kind "queue"`) {
		t.Fatalf("bad --kind: exit %d %q", r.exitCode(), r.message())
	}

	// JSON: the incarnation with both logs, records decoded.
	r = run(t, toolkit{}, nil, "inspect", "segments", "--dir", inc, "--records", "-o", "json")
	var doc inspectDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.err != nil {
		t.Fatalf("json %q: %v %v", r.stdout, err, r.err)
	}
	if len(doc.Shards) != 0 || len(doc.Caches) != 1 {
		t.Fatalf("json %+v", doc)
	}
	c := doc.Caches[0]
	if c.Cache != "sessions" || c.Incarnation != "3" || c.OffsetBase == nil || *c.OffsetBase != 1000 || c.CacheLog == nil || c.CounterLog == nil ||
		c.Snapshot == nil || !c.Snapshot.Verifies || c.Snapshot.Point != 2 || c.Snapshot.Keys != 2 || !c.Snapshot.Usable {
		t.Fatalf("json cache %+v", c)
	}
	recs := c.CacheLog.Records
	if c.CacheLog.Verdict != "open" || c.CacheLog.Kind != kindCache || len(recs) != 3 || recs[1].Key != "k2" || recs[1].Version == nil ||
		*recs[1].Version != 1001 || *recs[1].ValueBytes != 14 || recs[0].ExpiresAt != "2027-01-02T03:04:05Z" || recs[2].Kind != "cache-tombstone" ||
		recs[2].Version != nil {
		t.Fatalf("json cache log %+v", c.CacheLog)
	}
	crecs := c.CounterLog.Records
	if c.CounterLog.Kind != kindCounter || len(crecs) != 4 || crecs[0].Delta == nil || *crecs[0].Delta != 5 || crecs[2].Sum == nil ||
		*crecs[2].Sum != 3 || crecs[3].Key != "d" || crecs[3].Delta != nil {
		t.Fatalf("json counter log %+v", c.CounterLog)
	}

	// A damaged snapshot of a log that starts at 0: not used, the store
	// replays the log, nothing is refused.
	flipByte(t, filepath.Join(inc, cachelog.SnapshotFile), 25)
	r = run(t, toolkit{}, nil, "inspect", "segments", "--data-dir", data, "--kind", "cache")
	if r.err != nil {
		t.Fatalf("exit %d %q\n%s", r.exitCode(), r.message(), r.stdout)
	}
	wantOutput(t, r.stdout, "does not verify: cache index snapshot is damaged", "opening does not use it and replays the whole log",
		"verdict: open; offsets 0 to 2")

	// A counter record that does not decode: the counter store would not
	// open, exit 2.
	writeStoreLog(t, filepath.Join(inc, cachelog.CounterDir, cachelog.LogDir), []flog.Entry{{Kind: flog.KindCounterDelta, Payload: []byte{1, 0, 9}}})
	r = run(t, toolkit{}, nil, "inspect", "segments", "--data-dir", data)
	if r.exitCode() != exitRefused || !strings.Contains(r.message(), "1 of 3 logs would be refused") {
		t.Fatalf("exit %d %q\n%s", r.exitCode(), r.message(), r.stdout)
	}
	wantOutput(t, r.stdout, "verdict: refuse: 1 records do not decode, the first at offset 4", "(the log alone: open)")
	r = run(t, toolkit{}, nil, "inspect", "segments", "--data-dir", data, "--kind", "counter", "--records", "-o", "json")
	doc = inspectDoc{}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.exitCode() != exitRefused || doc.Refused != 1 {
		t.Fatalf("json: exit %d %v %+v", r.exitCode(), err, doc)
	}
	cl := doc.Caches[0].CounterLog
	if doc.Caches[0].CacheLog != nil || cl.Verdict != "refuse" || cl.Undecodable != 1 || cl.Records[4].Error == "" {
		t.Fatalf("json counter log %+v", cl)
	}
}
