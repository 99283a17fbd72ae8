package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/felixmq/felix/core/cachelog"
	"github.com/felixmq/felix/internal/faultfs"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

func counterOptions(dir string) CounterStoreOptions {
	return CounterStoreOptions{StoreLogOptions{Dir: dir, Fsync: flog.FsyncAlways, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
}

func mustOpenCounters(t testing.TB, o CounterStoreOptions) *CounterStore {
	t.Helper()
	s, err := OpenCounterStore(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// checkSum asserts key's sum (ok false: never written).
func checkSum(t *testing.T, s *CounterStore, key string, want int64, wantOK bool) {
	t.Helper()
	got, ok, err := s.Get(context.Background(), key)
	if err != nil || ok != wantOK || got != want {
		t.Fatalf("counter %q = %d (written %v, err %v), want %d (written %v)", key, got, ok, err, want, wantOK)
	}
}

// TestCounterAddAnswersTheSumAndNeverWrittenIsNotZero: each add answers
// the sum including it; a counter never written reads as absent, one
// brought back to zero reads as zero.
func TestCounterAddAnswersTheSumAndNeverWrittenIsNotZero(t *testing.T) {
	s := mustOpenCounters(t, counterOptions(t.TempDir()))
	ctx := context.Background()
	checkSum(t, s, "hits", 0, false)
	for i, d := range []int64{5, -3, 10, -12} {
		sum, err := s.Add(ctx, "hits", d)
		want := []int64{5, 2, 12, 0}[i]
		if err != nil || sum != want {
			t.Fatalf("add %d = %d, %v; want %d", d, sum, err, want)
		}
	}
	checkSum(t, s, "hits", 0, true)
	checkSum(t, s, "other", 0, false)
}

// TestCounterOverflowIsRefusedAndAddsNothing: a delta that would pass
// int64 either way is refused with a clear error and leaves the sum.
func TestCounterOverflowIsRefusedAndAddsNothing(t *testing.T) {
	dir := t.TempDir()
	s := mustOpenCounters(t, counterOptions(dir))
	ctx := context.Background()
	if _, err := s.Add(ctx, "k", math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	next := s.NextOffset()
	_, err := s.Add(ctx, "k", 1)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeInvalidRequest || we.Reason() != "counter_overflow" {
		t.Fatalf("overflowing add: %v, want invalid_request counter_overflow", err)
	}
	if s.NextOffset() != next {
		t.Fatal("a refused add appended a record")
	}
	if _, err := s.Add(ctx, "n", math.MinInt64); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, "n", -1); !errors.As(err, &we) {
		t.Fatalf("underflowing add: %v", err)
	}
	checkSum(t, s, "k", math.MaxInt64, true)
	checkSum(t, s, "n", math.MinInt64, true)
}

// TestCounterSumsSurviveARestartByFolding: concurrent adders, a close,
// a reopen: every sum is the fold of its deltas.
func TestCounterSumsSurviveARestartByFolding(t *testing.T) {
	dir := t.TempDir()
	o := counterOptions(dir)
	o.Fsync = flog.FsyncAlways
	s, err := OpenCounterStore(o)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if _, err := s.Add(context.Background(), fmt.Sprintf("k%d", i%5), int64(g+1)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s.Close()
	s = mustOpenCounters(t, o)
	for k := range 5 {
		checkSum(t, s, fmt.Sprintf("k%d", k), 10*36, true) // 10 adds of each g+1, 1..8
	}
	if s.Len() != 5 {
		t.Fatalf("%d counters after the fold, want 5", s.Len())
	}
}

// TestCounterCompactionCollapsesDeltasIntoACheckpoint: after a
// compaction over small segments the log starts past the old deltas,
// nothing was renumbered (offsets only grow), and the sums are the same
// before and after a reopen, adds after the compaction included.
func TestCounterCompactionCollapsesDeltasIntoACheckpoint(t *testing.T) {
	dir := t.TempDir()
	o := counterOptions(dir)
	o.SegmentBytes = 256
	s, err := OpenCounterStore(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := map[string]int64{}
	for i := range 200 {
		k := fmt.Sprintf("c%d", i%3)
		d := int64(i%7) - 3
		if _, err := s.Add(ctx, k, d); err != nil {
			t.Fatal(err)
		}
		want[k] += d
	}
	before := s.NextOffset()
	res, err := s.Compact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Point != before || res.Checkpoints != 3 || res.Dropped == 0 || res.Start == 0 {
		t.Fatalf("compaction %+v: want point %d, 3 checkpoints and dropped segments", res, before)
	}
	if s.NextOffset() != before+3 {
		t.Fatalf("next offset %d after compaction, want %d: offsets were renumbered", s.NextOffset(), before+3)
	}
	sum, err := s.Add(ctx, "c0", 100)
	if err != nil || sum != want["c0"]+100 {
		t.Fatalf("add after compaction = %d, %v; want %d", sum, err, want["c0"]+100)
	}
	want["c0"] += 100
	s.Close()
	s = mustOpenCounters(t, o)
	if s.StartOffset() != res.Start {
		t.Fatalf("reopened log starts at %d, want %d", s.StartOffset(), res.Start)
	}
	for k, v := range want {
		checkSum(t, s, k, v, true)
	}
}

// counterCrashRun adds, and compacts every 10th step, over small
// segments on a file system that crashes at step crashAt. It returns the
// acknowledged sums, the delta in flight (its key and delta) and whether
// the crash was reached.
func counterCrashRun(dir string, crashAt int) (acked map[string]int64, flightKey string, flight int64, crashed bool) {
	cfs := faultfs.NewCrash(flog.OSFS())
	cfs.Arm(crashAt)
	o := counterOptions(dir)
	o.FS, o.SegmentBytes = cfs, 128
	acked = map[string]int64{}
	s, err := OpenCounterStore(o)
	if err != nil {
		return acked, "", 0, cfs.Crashed()
	}
	defer s.Close()
	ctx := context.Background()
	for i := range 40 {
		if i%10 == 9 {
			if _, err := s.Compact(ctx); err != nil {
				return acked, "", 0, cfs.Crashed()
			}
			continue
		}
		k, d := fmt.Sprintf("k%d", i%4), int64(i*7%11)-5
		if _, err := s.Add(ctx, k, d); err != nil {
			return acked, k, d, cfs.Crashed()
		}
		acked[k] += d
	}
	return acked, "", 0, cfs.Crashed()
}

// TestCounterStoreRecoversFromACrashAtEveryStep: the process dies at
// every mutating file operation of an add-and-compact script in turn.
// The log always reopens and every counter equals its acknowledged sum,
// the add in flight counted wholly or not at all.
func TestCounterStoreRecoversFromACrashAtEveryStep(t *testing.T) {
	root := t.TempDir()
	for step := 0; ; step++ {
		dir := filepath.Join(root, fmt.Sprint(step))
		acked, fk, fd, crashed := counterCrashRun(dir, step)
		s, err := OpenCounterStore(counterOptions(dir))
		if err != nil {
			t.Fatalf("crash at step %d: reopen: %v", step, err)
		}
		for i := range 4 {
			k := fmt.Sprintf("k%d", i)
			got, _, err := s.Get(context.Background(), k)
			if err != nil {
				t.Fatalf("crash at step %d: get %s: %v", step, k, err)
			}
			if got != acked[k] && (k != fk || got != acked[k]+fd) {
				t.Fatalf("crash at step %d: %s = %d, acknowledged %d (in flight %s %+d)", step, k, got, acked[k], fk, fd)
			}
		}
		start := s.StartOffset()
		s.Close()
		os.RemoveAll(dir)
		if !crashed {
			if step < 50 {
				t.Fatalf("the script ran through after %d steps: the crash points are not being reached", step)
			}
			if start == 0 {
				t.Fatal("the script's compactions dropped no segment")
			}
			t.Logf("crashed at each of %d steps", step)
			return
		}
	}
}

// FuzzCounterRecord: the decoder never panics, never reads past its
// input, and what it accepts re-encodes to the same bytes.
func FuzzCounterRecord(f *testing.F) {
	for _, r := range []cachelog.CounterRecord{
		{Kind: flog.KindCounterDelta, Key: "hits", Value: 1},
		{Kind: flog.KindCounterDelta, Key: "", Value: math.MinInt64},
		{Kind: flog.KindCounterCheckpoint, Key: "user:42:reqs", Value: math.MaxInt64},
	} {
		f.Add(uint8(r.Kind), r.Append(nil))
	}
	f.Add(uint8(flog.KindCachePut), []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(flog.KindCounterDelta), []byte{1, 0xff, 0xff})
	f.Add(uint8(flog.KindCounterDelta), []byte{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		r, n, err := cachelog.ParseCounterRecord(flog.Kind(kind), b)
		if err != nil {
			return
		}
		if n != len(b) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		if got := r.Append(nil); string(got) != string(b) || r.Len() != len(b) {
			t.Fatalf("re-encoded %x (len %d), read %x", got, r.Len(), b)
		}
	})
}
