package cli

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	flog "github.com/felixmq/felix/log"
)

// writeShardLog creates a shard log under storage/streams/... holding n
// records in segments of segBytes, and returns its directory.
func writeShardLog(t *testing.T, storage, path string, n int, segBytes int64) string {
	t.Helper()
	dir := filepath.Join(storage, "streams", filepath.FromSlash(path))
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	l, _, err := flog.Open(flog.Options{Dir: dir, SegmentBytes: segBytes, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := l.Append([][]byte{fmt.Appendf(nil, "record-%03d-%s", i, strings.Repeat("x", 40))}, "svc"); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// segmentFiles lists dir's segment files in offset order.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	sort.Strings(files)
	return files
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestInspectSegmentsVerdicts(t *testing.T) {
	clearEnv(t)
	data := t.TempDir()
	storage := filepath.Join(data, "log")
	writeShardLog(t, storage, "default/default/events/0", 20, 1<<20)
	torn := writeShardLog(t, storage, "default/default/events/1", 5, 1<<20)
	segs := segmentFiles(t, torn)
	appendFile(t, segs[len(segs)-1], []byte{0, 0, 0, 99, 1, 2}) // a partial record at the tail

	// Healthy and torn: every shard would open, exit 0.
	r := run(t, toolkit{}, nil, "inspect", "segments", "--data-dir", data)
	if r.err != nil {
		t.Fatalf("exit %d %q\n%s", r.exitCode(), r.message(), r.stdout)
	}
	for _, want := range []string{
		"default/default/events shard 0", "00000000000000000000.log", "verdict: open; offsets 0 to 19",
		"default/default/events shard 1", "verdict: truncate torn tail at 00000000000000000000.log position",
		"SEGMENT", "RECORDS OK", "TIME INDEX OK",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}

	// Damage inside a sealed segment: refused, exit 2.
	bad := writeShardLog(t, storage, "acme/prod/orders/0", 30, 512)
	segs = segmentFiles(t, bad)
	if len(segs) < 2 {
		t.Fatalf("want several segments, got %d", len(segs))
	}
	before, _ := os.ReadFile(segs[0])
	flipByte(t, segs[0], 30)
	r = run(t, toolkit{}, nil, "inspect", "segments", "--data-dir", data)
	if r.exitCode() != exitRefused || !strings.Contains(r.message(), "1 of 3 logs would be refused") {
		t.Fatalf("exit %d %q", r.exitCode(), r.message())
	}
	if !strings.Contains(r.stdout, "acme/prod/orders shard 0") || !strings.Contains(r.stdout, "verdict: refuse: segment 00000000000000000000.log position") {
		t.Fatalf("refusal not shown:\n%s", r.stdout)
	}
	after, _ := os.ReadFile(segs[0])
	if len(after) != len(before) {
		t.Fatal("inspect changed a segment file")
	}

	// JSON, and one directory alone.
	r = run(t, toolkit{}, nil, "inspect", "segments", "--dir", torn, "-o", "json")
	var doc inspectDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.err != nil {
		t.Fatalf("json %q: %v %v", r.stdout, err, r.err)
	}
	sh := doc.Shards[0]
	if len(doc.Shards) != 1 || sh.Verdict != flog.VerdictTruncate.String() || sh.Truncated == nil || sh.Truncated.Bytes != 6 ||
		sh.NextOffset != 5 || len(sh.Segments) != 1 || sh.Segments[0].Records != 5 || sh.Segments[0].FirstTime != "2026-11-29T08:00:00Z" {
		t.Fatalf("json %+v", doc)
	}
	r = run(t, toolkit{}, nil, "inspect", "segments", "--storage-dir", storage, "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.exitCode() != exitRefused || doc.Refused != 1 || len(doc.Shards) != 3 {
		t.Fatalf("json over everything: exit %d %+v %v", r.exitCode(), doc, err)
	}
}

func TestInspectSegmentsWithoutLogs(t *testing.T) {
	clearEnv(t)
	data := t.TempDir()
	if err := os.Mkdir(filepath.Join(data, "log"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := run(t, toolkit{}, nil, "inspect", "segments", "--data-dir", data)
	if r.err != nil || !strings.HasPrefix(r.stdout, "no stream shard, cache or counter logs under ") {
		t.Fatalf("empty storage: %q %v", r.stdout, r.err)
	}
	r = run(t, toolkit{}, nil, "inspect", "segments", "--data-dir", filepath.Join(data, "absent"))
	if r.exitCode() != 1 || !strings.Contains(r.message(), "no durable storage at") {
		t.Fatalf("missing storage: exit %d %q", r.exitCode(), r.message())
	}
	if r := run(t, toolkit{}, nil, "inspect", "segments", "extra"); r.exitCode() != exitUsage {
		t.Fatalf("extra argument: exit %d", r.exitCode())
	}
}

// TestInspectSegmentsRecordKinds: the segment table counts records per
// layout version and kind with their generations, --records lists each
// record's kind, version and generation, and a truncation a crash
// interrupted shows as pending.
func TestInspectSegmentsRecordKinds(t *testing.T) {
	clearEnv(t)
	dir := filepath.Join(t.TempDir(), "shard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Old-format records, as the previous release wrote them.
	for _, name := range []string{"00000000000000000000.log", "00000000000000000008.log"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "log", "testdata", "v0", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, _, err := flog.Open(flog.Options{Dir: dir, SegmentBytes: 300})
	if err != nil {
		t.Fatal(err)
	}
	entries := []flog.Entry{{Kind: flog.KindGenerationStart, Generation: 4}, {Kind: flog.KindCachePut, Generation: 4, Payload: []byte("v")},
		{Kind: flog.KindCacheTombstone, Generation: 5}}
	if _, err := l.AppendEntries(entries, "lead", 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	r := run(t, toolkit{}, nil, "inspect", "segments", "--dir", dir, "--records")
	if r.err != nil {
		t.Fatalf("exit %d %q\n%s", r.exitCode(), r.message(), r.stdout)
	}
	for _, want := range []string{
		"VERSIONS", "KINDS", "GENERATIONS", "v0:8 ", "v0:4 v1:3", "data:4 generation-start:1 cache-put:1 cache-tombstone:1", "0..5",
		"OFFSET", "KIND", "GENERATION", "cache-tombstone", "verdict: open; offsets 0 to 14",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}

	r = run(t, toolkit{}, nil, "inspect", "segments", "--dir", dir, "--records", "--max-records", "13", "-o", "json")
	var doc inspectDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.err != nil {
		t.Fatalf("json %q: %v %v", r.stdout, err, r.err)
	}
	sh := doc.Shards[0]
	if len(sh.Records) != 13 || !sh.MoreRecords || sh.Records[0].Version != 0 || sh.Records[0].Kind != "data" {
		t.Fatalf("json records %+v", sh)
	}
	last := sh.Records[12]
	if last.Offset != 12 || last.Kind != "generation-start" || last.KindCode != 1 || last.Version != 1 || last.Generation != 4 || last.Publisher != "lead" {
		t.Fatalf("record 12 %+v", last)
	}
	seg := sh.Segments[1]
	if seg.Versions["0"] != 4 || seg.Versions["1"] != 3 || seg.Kinds["cache-put"] != 1 || seg.FirstGeneration != 0 || seg.LastGeneration != 5 {
		t.Fatalf("segment json %+v", seg)
	}

	// A truncation marker (docs/storage.md: "FXTR", offset u64, CRC32C)
	// left by a crash: inspect shows what opening will do and keeps it.
	marker := binary.BigEndian.AppendUint64([]byte("FXTR"), 5)
	marker = binary.BigEndian.AppendUint32(marker, crc32.Checksum(marker, crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(filepath.Join(dir, "truncate-to"), marker, 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, toolkit{}, nil, "inspect", "segments", "--dir", dir)
	if r.err != nil || !strings.Contains(r.stdout, "pending truncation to offset 5, which opening finishes (deleting 1 later segment files)") ||
		!strings.Contains(r.stdout, "offsets 0 to 4") {
		t.Fatalf("pending truncation: %v\n%s", r.err, r.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "truncate-to")); err != nil {
		t.Fatalf("inspect removed the marker: %v", err)
	}
}
