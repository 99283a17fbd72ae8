package core

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
)

// These tests run cachelog.Inspect (what `felix inspect segments` runs on
// cache and counter logs) over logs written by CacheStore and
// CounterStore in the broker's layout, and check that its verdict is the
// one opening the stores reaches.

// inspectFixture is one cache incarnation written by the stores.
type inspectFixture struct {
	storage, dir string
	base         uint64
	snapPoint    uint64 // the compaction's point
	liveKeys     int
	putOffsets   map[string]uint64 // the latest put (log offset) of each live key
	sums         map[string]int64
}

// writeInspectFixture writes, in small segments, puts (one with an
// expiry), deletes, a compaction that drops segments, more puts, and a
// counter log with deltas, a compaction's checkpoints and more deltas.
func writeInspectFixture(t *testing.T) inspectFixture {
	t.Helper()
	ctx := context.Background()
	storage := t.TempDir()
	dir, err := CacheDir(storage, CacheKey{Tenant: "acme", Namespace: "prod", Cache: "sessions"}, "7")
	if err != nil {
		t.Fatal(err)
	}
	base, err := readOffsetBase(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := inspectFixture{storage: storage, dir: dir, base: base, putOffsets: map[string]uint64{}, sums: map[string]int64{}}
	o := storeOptions(t, dir)
	o.SegmentBytes = 512
	s := mustOpenStore(t, o)
	expiry := time.Now().Add(time.Hour).UnixNano()
	put := func(key string, n int, exp int64) {
		v, err := s.Put(ctx, key, []byte(strings.Repeat("v", n)), exp)
		if err != nil {
			t.Fatal(err)
		}
		f.putOffsets[key] = v
	}
	for round := range 6 {
		for i := range 5 {
			put(fmt.Sprintf("k%d", i), 40+round, 0)
		}
	}
	put("ttl", 10, expiry)
	if _, _, err := s.Delete(ctx, "k4"); err != nil {
		t.Fatal(err)
	}
	delete(f.putOffsets, "k4")
	res, err := s.Compact(ctx)
	if err != nil || res.Dropped == 0 || s.StartOffset() == 0 {
		t.Fatalf("compaction %+v (start %d): %v", res, s.StartOffset(), err)
	}
	f.snapPoint = res.Point
	put("k0", 5, 0)
	put("late", 7, 0)
	f.liveKeys = s.Len()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	co := counterOptions(filepath.Join(dir, cachelog.CounterDir))
	co.SegmentBytes = 256
	cs, err := OpenCounterStore(co)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for i := range 30 {
		key := fmt.Sprintf("c%d", i%3)
		sum, err := cs.Add(ctx, key, int64(i-10))
		if err != nil {
			t.Fatal(err)
		}
		f.sums[key] = sum
	}
	if _, err := cs.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 20 { // past the checkpoints' segment: a sealed one before the tail
		key := fmt.Sprintf("c%d", i%3)
		sum, err := cs.Add(ctx, key, 100)
		if err != nil {
			t.Fatal(err)
		}
		f.sums[key] = sum
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

// inspectOnly finds the fixture's one incarnation and inspects it.
func (f inspectFixture) inspect(t *testing.T) *cachelog.Inspection {
	t.Helper()
	incs, err := cachelog.FindIncarnations(f.storage)
	if err != nil || len(incs) != 1 {
		t.Fatalf("incarnations %+v: %v", incs, err)
	}
	want := cachelog.Incarnation{Tenant: "acme", Namespace: "prod", Cache: "sessions", ID: "7", Dir: f.dir}
	if incs[0] != want {
		t.Fatalf("incarnation %+v, want %+v", incs[0], want)
	}
	in := cachelog.Inspect(incs[0], cachelog.InspectOptions{Cache: true, Counters: true, Records: true})
	if in.CacheLog == nil || in.CounterLog == nil || in.Snapshot == nil {
		t.Fatalf("inspection without its logs: %+v", in)
	}
	for _, l := range []*cachelog.LogInspection{in.CacheLog, in.CounterLog} {
		if l.Err != nil {
			t.Fatalf("%s: %v", l.Dir, l.Err)
		}
	}
	return in
}

// opens reports whether the stores open on the fixture (what a broker
// would do), closing them again.
func (f inspectFixture) opens(t *testing.T) (cacheErr, counterErr error) {
	t.Helper()
	s, cacheErr := OpenCacheStore(storeOptions(t, f.dir))
	if cacheErr == nil {
		s.Close()
	}
	cs, counterErr := OpenCounterStore(counterOptions(filepath.Join(f.dir, cachelog.CounterDir)))
	if counterErr == nil {
		cs.Close()
	}
	return cacheErr, counterErr
}

// fixtureSegments lists a log directory's segment files in offset order.
func fixtureSegments(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	sort.Strings(files)
	return files
}

func flipFileByte(t *testing.T, path string, at int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if at < 0 {
		at += int64(len(b))
	}
	b[at] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFileBytes(t *testing.T, path string, b []byte) {
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

func TestInspectCacheLogsHealthy(t *testing.T) {
	f := writeInspectFixture(t)
	in := f.inspect(t)
	if !in.HasOffsetBase || in.OffsetBase != f.base || in.OffsetBaseErr != nil {
		t.Fatalf("offset base %d %v %v, want %d", in.OffsetBase, in.HasOffsetBase, in.OffsetBaseErr, f.base)
	}
	for _, l := range []*cachelog.LogInspection{in.CacheLog, in.CounterLog} {
		if l.Report.Verdict != flog.VerdictOpen || l.Refused() || l.Undecodable != 0 || len(l.Report.Segments) < 2 {
			t.Fatalf("%s: verdict %v refusal %q undecodable %d, %d segments", l.Dir, l.Report.Verdict, l.Refusal, l.Undecodable, len(l.Report.Segments))
		}
	}
	sn := in.Snapshot
	if !sn.Present || sn.Damage != nil || !sn.Usable || sn.Point != f.snapPoint || sn.Bytes == 0 || sn.Leftover {
		t.Fatalf("snapshot %+v, want point %d", sn, f.snapPoint)
	}

	// The latest put of every live key is listed with its key, size and
	// version as clients see it; a copy carries the version of the put.
	latest := map[string]cachelog.Record{}
	var kinds = map[flog.Kind]int{}
	for _, r := range in.CacheLog.Records {
		if r.Err != "" || r.Key == "" {
			t.Fatalf("record %+v", r)
		}
		kinds[r.Kind]++
		if cachelog.HoldsValue(r.Kind) {
			latest[r.Key] = r
		} else {
			delete(latest, r.Key)
		}
	}
	if len(latest) != f.liveKeys {
		t.Fatalf("%d live keys in the listing, want %d (kinds %v)", len(latest), f.liveKeys, kinds)
	}
	for k, off := range f.putOffsets {
		r := latest[k]
		if r.Version != f.base+off {
			t.Errorf("key %s: version %d, want %d (%+v)", k, r.Version, f.base+off, r)
		}
	}
	if latest["ttl"].ExpiresAt == 0 || latest["k0"].ExpiresAt != 0 || latest["k0"].ValueBytes != 5 || kinds[flog.KindCacheTombstone] != 1 {
		t.Fatalf("ttl %+v k0 %+v kinds %v", latest["ttl"], latest["k0"], kinds)
	}

	// Folding the counter records gives every sum.
	sums := map[string]int64{}
	for _, r := range in.CounterLog.Records {
		switch r.Kind {
		case flog.KindCounterDelta:
			sums[r.Key] += r.Value
		case flog.KindCounterCheckpoint:
			sums[r.Key] = r.Value
		default:
			t.Fatalf("record %+v", r)
		}
	}
	if fmt.Sprint(sums) != fmt.Sprint(f.sums) {
		t.Fatalf("folded sums %v, want %v", sums, f.sums)
	}
	if cerr, kerr := f.opens(t); cerr != nil || kerr != nil {
		t.Fatalf("the stores do not open: %v / %v", cerr, kerr)
	}

	// The listing's bound.
	inc := cachelog.IncarnationAt(f.dir)
	if inc.Cache != "sessions" || inc.ID != "7" || inc.Tenant != "acme" || inc.Namespace != "prod" {
		t.Fatalf("IncarnationAt %+v", inc)
	}
	in = cachelog.Inspect(inc, cachelog.InspectOptions{Counters: true, Records: true, MaxRecords: 3})
	if in.CacheLog != nil || in.Snapshot != nil || len(in.CounterLog.Records) != 3 || !in.CounterLog.MoreRecords {
		t.Fatalf("counters only, 3 records: %+v", in)
	}
}

func TestInspectCacheLogsTornTail(t *testing.T) {
	f := writeInspectFixture(t)
	for _, dir := range []string{filepath.Join(f.dir, cachelog.LogDir), filepath.Join(f.dir, cachelog.CounterDir, cachelog.LogDir)} {
		segs := fixtureSegments(t, dir)
		appendFileBytes(t, segs[len(segs)-1], []byte{0, 0, 0, 77, 1, 2, 3})
	}
	in := f.inspect(t)
	for _, l := range []*cachelog.LogInspection{in.CacheLog, in.CounterLog} {
		if l.Report.Verdict != flog.VerdictTruncate || l.Report.Truncated == nil || l.Report.Truncated.Bytes != 7 || l.Refused() {
			t.Fatalf("%s: %+v refusal %q", l.Dir, l.Report, l.Refusal)
		}
	}
	if !in.Snapshot.Usable {
		t.Fatalf("snapshot %+v", in.Snapshot)
	}
	if cerr, kerr := f.opens(t); cerr != nil || kerr != nil {
		t.Fatalf("inspect says open, the stores do not: %v / %v", cerr, kerr)
	}
}

func TestInspectCacheLogsDamageBeforeTheTail(t *testing.T) {
	f := writeInspectFixture(t)
	for _, dir := range []string{filepath.Join(f.dir, cachelog.LogDir), filepath.Join(f.dir, cachelog.CounterDir, cachelog.LogDir)} {
		segs := fixtureSegments(t, dir)
		if len(segs) < 2 {
			t.Fatalf("%s: %d segments, the test needs a sealed one", dir, len(segs))
		}
		flipFileByte(t, segs[0], 40)
	}
	in := f.inspect(t)
	for _, l := range []*cachelog.LogInspection{in.CacheLog, in.CounterLog} {
		if l.Report.Verdict != flog.VerdictRefuse || l.Report.Corrupt == nil || !l.Refused() {
			t.Fatalf("%s: %+v", l.Dir, l.Report)
		}
	}
	if cerr, kerr := f.opens(t); cerr == nil || kerr == nil {
		t.Fatalf("inspect says refuse, the stores open: %v / %v", cerr, kerr)
	}
}

func TestInspectCacheLogsDamagedSnapshot(t *testing.T) {
	f := writeInspectFixture(t)
	snap := filepath.Join(f.dir, cachelog.SnapshotFile)
	flipFileByte(t, snap, -6) // inside the last entry
	if err := os.WriteFile(snap+".tmp", []byte("half a compaction"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := f.inspect(t)
	sn := in.Snapshot
	if !sn.Present || sn.Damage == nil || !strings.Contains(sn.Damage.Error(), "crc mismatch") || sn.Usable || !sn.Leftover {
		t.Fatalf("snapshot %+v", sn)
	}
	// The log starts past 0 (compaction dropped segments): without the
	// snapshot the store cannot open, and inspect says so.
	if in.CacheLog.Report.Verdict != flog.VerdictOpen || !in.CacheLog.Refused() ||
		!strings.Contains(in.CacheLog.Refusal, "index snapshot cannot be used") {
		t.Fatalf("cache log %+v refusal %q", in.CacheLog.Report, in.CacheLog.Refusal)
	}
	if in.CounterLog.Refused() {
		t.Fatalf("counter log refused: %q", in.CounterLog.Refusal)
	}
	cerr, kerr := f.opens(t)
	if cerr == nil || kerr != nil {
		t.Fatalf("inspect says the cache store is refused and the counter store opens: %v / %v", cerr, kerr)
	}
	if !strings.Contains(cerr.Error(), "index snapshot cannot be used") {
		t.Fatalf("the store's refusal %q is not inspect's %q", cerr, in.CacheLog.Refusal)
	}
}

// TestInspectCacheLogsDamagedSnapshotReplayable: a damaged snapshot of a
// log still starting at 0 is not used, and the store opens by replaying
// the whole log; a record that is not a cache record refuses it.
func TestInspectCacheLogsDamagedSnapshotReplayable(t *testing.T) {
	ctx := context.Background()
	storage := t.TempDir()
	dir, err := CacheDir(storage, CacheKey{Tenant: "t", Namespace: "n", Cache: "c"}, "")
	if err != nil {
		t.Fatal(err)
	}
	s := mustOpenStore(t, storeOptions(t, dir))
	for i := range 5 {
		if _, err := s.Put(ctx, fmt.Sprintf("k%d", i), []byte("value"), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Compact(ctx); err != nil || s.StartOffset() != 0 {
		t.Fatalf("compaction: %v (start %d)", err, s.StartOffset())
	}
	s.Close()
	flipFileByte(t, filepath.Join(dir, cachelog.SnapshotFile), 3) // the magic
	incs, err := cachelog.FindIncarnations(storage)
	if err != nil || len(incs) != 1 || incs[0].ID != "" || incs[0].Cache != "c" {
		t.Fatalf("incarnations %+v: %v", incs, err)
	}
	in := cachelog.Inspect(incs[0], cachelog.InspectOptions{Cache: true, Counters: true})
	if in.CounterLog != nil {
		t.Fatalf("a counter log where none was written: %+v", in.CounterLog)
	}
	if sn := in.Snapshot; sn.Damage == nil || sn.Usable || in.CacheLog.Refused() || in.CacheLog.Records != nil {
		t.Fatalf("snapshot %+v, refusal %q", sn, in.CacheLog.Refusal)
	}
	s2, err := OpenCacheStore(storeOptions(t, dir))
	if err != nil {
		t.Fatalf("inspect says open, the store does not: %v", err)
	}
	s2.Close()

	// A data record in the cache log.
	lg, _, err := flog.Open(flog.Options{Dir: filepath.Join(dir, cachelog.LogDir)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Append([][]byte{[]byte("not a cache record")}, "x"); err != nil {
		t.Fatal(err)
	}
	lg.Close()
	in = cachelog.Inspect(incs[0], cachelog.InspectOptions{Cache: true, Records: true})
	l := in.CacheLog
	if !l.Refused() || l.Undecodable != 1 || !strings.Contains(l.Refusal, "offset 5") || l.Records[5].Err == "" {
		t.Fatalf("undecodable record: refusal %q, %d undecodable, records %+v", l.Refusal, l.Undecodable, l.Records)
	}
	if _, err := OpenCacheStore(storeOptions(t, dir)); err == nil {
		t.Fatal("inspect says refuse, the store opens")
	}
}
