package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// newDurableStream makes a broker with storage under dir and one durable
// stream.
func newDurableStream(t testing.TB, dir string, cfg Config, spec wire.StreamSpec) (*Broker, *Stream) {
	t.Helper()
	if cfg.Storage == nil {
		cfg.Storage = &StorageConfig{}
	}
	cfg.Storage.Dir = dir
	b := NewBroker(cfg)
	t.Cleanup(b.Close)
	spec.TenantID, spec.Namespace, spec.Durable = "t", "ns", true
	if spec.Stream == "" {
		spec.Stream = "s"
	}
	if err := b.ApplyStream(spec); err != nil {
		t.Fatal(err)
	}
	st, ok := b.Stream(StreamKey{"t", "ns", spec.Stream})
	if !ok {
		t.Fatal("stream not registered")
	}
	if !st.Durable() {
		t.Fatal("stream is not durable")
	}
	return b, st
}

// consume reads what a durable subscriber gets, the log replay first and
// then its queue, until it has every offset below upTo; it returns the
// offsets and payloads in delivery order.
func consume(t *testing.T, s *Subscriber, upTo uint64) (offs []uint64, vals []string) {
	t.Helper()
	from, to := s.Replay()
	for from < to {
		recs, next, err := s.Shard().Read(from, to, 7, 1<<20)
		if err != nil {
			t.Fatalf("replay read at %d: %v", from, err)
		}
		for _, r := range recs {
			offs = append(offs, r.Offset)
			vals = append(vals, string(r.Payload))
		}
		from = next
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(offs) == 0 || offs[len(offs)-1]+1 < upTo {
		e, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("next after %d offsets (want up to %d): %v", len(offs), upTo, err)
		}
		for i, p := range e.Payloads {
			offs = append(offs, e.BaseOffset+uint64(i))
			vals = append(vals, string(p))
		}
	}
	return offs, vals
}

func wantContiguous(t *testing.T, who string, offs []uint64, from, to uint64) {
	t.Helper()
	if uint64(len(offs)) != to-from {
		t.Fatalf("%s: got %d offsets, want [%d,%d)", who, len(offs), from, to)
	}
	for i, o := range offs {
		if o != from+uint64(i) {
			t.Fatalf("%s: offset %d at position %d, want %d", who, o, i, from+uint64(i))
		}
	}
}

func TestDurableRestartContinuesOffsetsAndReplaysFromDisk(t *testing.T) {
	dir := t.TempDir()
	b, st := newDurableStream(t, dir, Config{}, wire.StreamSpec{Shards: 2})
	sh := shard0(t, st)
	for i := range 5 {
		if off := publish(t, sh, payloads(3, fmt.Sprint("b", i))); off != uint64(3*i) {
			t.Fatalf("batch %d at %d", i, off)
		}
	}
	b.Close()

	_, st = newDurableStream(t, dir, Config{}, wire.StreamSpec{Shards: 2})
	sh = shard0(t, st)
	if sh.NextOffset() != 15 {
		t.Fatalf("next after restart %d, want 15", sh.NextOffset())
	}
	s := subscribe(t, sh, SubscribeOptions{Start: wire.StartPosition{Kind: wire.StartOffset, Offset: 4}})
	if s.StartOffset() != 4 || s.LiveOffset() != 15 {
		t.Fatalf("start %d live %d", s.StartOffset(), s.LiveOffset())
	}
	if off := publish(t, sh, payloads(2, "after")); off != 15 {
		t.Fatalf("first publish after restart at %d", off)
	}
	offs, vals := consume(t, s, 17)
	wantContiguous(t, "resumed", offs, 4, 17)
	if vals[0] != "b1-1" || vals[len(vals)-1] != "after-1" {
		t.Fatalf("payloads %q ... %q", vals[0], vals[len(vals)-1])
	}
	if other, _ := st.Shard(1); other.NextOffset() != 0 {
		t.Fatal("shard 1 got records")
	}
}

func TestDurableCursorErrors(t *testing.T) {
	_, st := newDurableStream(t, t.TempDir(), Config{}, wire.StreamSpec{})
	sh := shard0(t, st)
	publish(t, sh, payloads(4, "x"))
	_, err := sh.Subscribe(SubscribeOptions{Start: wire.StartPosition{Kind: wire.StartOffset, Offset: 5}})
	var ce *wire.SubscribeCursorError
	if !errors.As(err, &ce) || ce.Reason != wire.CursorInFuture || ce.Requested != 5 || ce.Available != 4 {
		t.Fatalf("past the tail: %v", err)
	}
	if _, _, err := sh.Read(9, 20, 10, 1<<20); !errors.As(err, &ce) || ce.Reason != wire.CursorInFuture {
		t.Fatalf("read past the tail: %v", err)
	}
	s := subscribe(t, sh, SubscribeOptions{Start: wire.StartPosition{Kind: wire.StartOffset, Offset: 4}})
	if from, to := s.Replay(); from != to || s.StartOffset() != 4 {
		t.Fatalf("at the tail: replay [%d,%d) start %d", from, to, s.StartOffset())
	}
}

// A subscriber that joins while publishers run sees exactly the contiguous
// range from its start: history from the log, then the ring, then live.
func TestDurableGapFreeResumeUnderConcurrentPublishers(t *testing.T) {
	cfg := Config{ReplayRingMaxBatches: 8, SubQueueCapacity: 1 << 16, SubQueueMaxBytes: 1 << 30}
	_, st := newDurableStream(t, t.TempDir(), cfg, wire.StreamSpec{SubQueuePolicy: "block"})
	sh := shard0(t, st)
	const publishers, batches = 3, 60
	total := uint64(publishers * batches * 2)
	rng := rand.New(rand.NewPCG(1, 2))
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range batches {
				if _, err := sh.Publish(context.Background(), payloads(2, fmt.Sprint(p, "-", i)), ""); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	type joined struct {
		s     *Subscriber
		start uint64
	}
	var subs []joined
	for range 12 {
		tail := sh.NextOffset()
		start := uint64(0)
		if tail > 0 {
			start = rng.Uint64N(tail + 1)
		}
		s := subscribe(t, sh, SubscribeOptions{Start: wire.StartPosition{Kind: wire.StartOffset, Offset: start}})
		subs = append(subs, joined{s, start})
		time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
	}
	wg.Wait()
	for i, j := range subs {
		offs, _ := consume(t, j.s, total)
		wantContiguous(t, fmt.Sprintf("subscriber %d from %d", i, j.start), offs, j.start, total)
	}
}

func TestDurableSlowSubscriberEndsLagged(t *testing.T) {
	_, st := newDurableStream(t, t.TempDir(), Config{SubQueueCapacity: 2}, wire.StreamSpec{})
	sh := shard0(t, st)
	s := subscribe(t, sh, SubscribeOptions{EndOnLag: true})
	plain := subscribe(t, sh, SubscribeOptions{Capacity: 2})
	for i := range 5 {
		publish(t, sh, payloads(1, fmt.Sprint(i)))
	}
	var got []uint64
	var lag *LaggedError
	for {
		e, err := s.Next(context.Background())
		if err != nil {
			if !errors.As(err, &lag) {
				t.Fatalf("ended with %v, want *LaggedError", err)
			}
			break
		}
		got = append(got, e.BaseOffset)
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 1 || lag.ResumeFrom != 2 {
		t.Fatalf("delivered %v then lagged at %d; want [0 1] then 2", got, lag.ResumeFrom)
	}
	if plain.Err() != nil || plain.Dropped() != 3 {
		t.Fatalf("subscriber without EndOnLag: err %v dropped %d", plain.Err(), plain.Dropped())
	}
	// Resuming after the last delivered offset catches up from the log.
	again := subscribe(t, sh, SubscribeOptions{Start: wire.StartPosition{Kind: wire.StartOffset, Offset: got[1] + 1}})
	offs, _ := consume(t, again, 5)
	wantContiguous(t, "resumed", offs, 2, 5)
}

func TestDurableReadPagesAndOffsetForTime(t *testing.T) {
	_, st := newDurableStream(t, t.TempDir(), Config{}, wire.StreamSpec{})
	sh := shard0(t, st)
	for i := range 10 {
		c, err := sh.Claim(payloads(1, fmt.Sprint(i)), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Finish(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var all []uint64
	for from := uint64(0); from < 10; {
		recs, next, err := sh.Read(from, 8, 3, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		if len(recs) > 3 {
			t.Fatalf("page of %d records, cap 3", len(recs))
		}
		for _, r := range recs {
			all = append(all, r.Offset)
			if r.TimeMicros == 0 {
				t.Fatal("record has no time")
			}
		}
		from = next
	}
	wantContiguous(t, "read [0,8)", all, 0, 8)
	recs, _, err := sh.Read(0, 10, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	at := recs[6].TimeMicros
	off, ok, err := sh.OffsetForTime(at)
	if err != nil || !ok || recs[off].TimeMicros < at || (off > 0 && recs[off-1].TimeMicros >= at) {
		t.Fatalf("offset for %d: %d %v %v", at, off, ok, err)
	}
	if off, ok, _ := sh.OffsetForTime(0); !ok || off != 0 {
		t.Fatalf("a time before every record: %d %v", off, ok)
	}
	if _, ok, _ := sh.OffsetForTime(recs[9].TimeMicros + 1e9); ok {
		t.Fatal("a time after every record found an offset")
	}
}

func TestDurableRetentionAndTooOld(t *testing.T) {
	cfg := Config{Storage: &StorageConfig{SegmentBytes: 4 << 10}}
	b, st := newDurableStream(t, t.TempDir(), cfg, wire.StreamSpec{})
	sh := shard0(t, st)
	big := make([]byte, 1000)
	for range 40 {
		publish(t, sh, [][]byte{big})
	}
	if sh.StartOffset() != 0 {
		t.Fatal("retention acted without a bound")
	}
	limit := uint64(10 << 10)
	spec := st.Spec()
	spec.Retention.MaxSizeBytes = &limit
	if err := b.ApplyStream(spec); err != nil {
		t.Fatal(err)
	}
	b.ApplyRetention()
	start := sh.StartOffset()
	if start == 0 || start >= 40 {
		t.Fatalf("after a 10 KiB bound the log starts at %d", start)
	}
	_, err := sh.Subscribe(SubscribeOptions{Start: wire.StartPosition{Kind: wire.StartOffset, Offset: 0}})
	var ce *wire.SubscribeCursorError
	if !errors.As(err, &ce) || ce.Reason != wire.CursorTooOld || ce.Available != start {
		t.Fatalf("resume below retention: %v (start %d)", err, start)
	}
	s := subscribe(t, sh, SubscribeOptions{Start: wire.StartPosition{Kind: wire.StartEarliest}})
	offs, _ := consume(t, s, 40)
	wantContiguous(t, "earliest", offs, start, 40)
}

func TestDurableCorruptShardRefusedOthersServe(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Storage: &StorageConfig{SegmentBytes: 4 << 10}}
	b, st := newDurableStream(t, dir, cfg, wire.StreamSpec{Shards: 2})
	for i := range 2 {
		sh, _ := st.Shard(uint32(i))
		for range 20 {
			publish(t, sh, [][]byte{make([]byte, 500)})
		}
	}
	b.Close()
	// Flip a byte in the middle of shard 0's first (sealed) segment.
	seg := filepath.Join(ShardDir(dir, StreamKey{"t", "ns", "s"}, 0), fmt.Sprintf("%020d.log", 0))
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(seg, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, st = newDurableStream(t, dir, cfg, wire.StreamSpec{Shards: 2})
	bad, _ := st.Shard(0)
	good, _ := st.Shard(1)
	var ce *flog.CorruptionError
	if !errors.As(bad.Unavailable(), &ce) {
		t.Fatalf("shard 0 opened over a damaged sealed segment: %v", bad.Unavailable())
	}
	_, err = bad.Claim(payloads(1, "x"), "")
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeShardUnavailable {
		t.Fatalf("publish to the refused shard: %v", err)
	}
	if off := publish(t, good, payloads(1, "y")); off != 20 {
		t.Fatalf("shard 1 publish at %d, want 20", off)
	}
}

// noSpaceFS fails writes with ENOSPC while full is set.
type noSpaceFS struct {
	flog.FS
	mu   sync.Mutex
	full bool
}

func (f *noSpaceFS) setFull(v bool) { f.mu.Lock(); f.full = v; f.mu.Unlock() }

func (f *noSpaceFS) OpenFile(name string, flag int, perm os.FileMode) (flog.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &noSpaceFile{File: file, fs: f}, nil
}

type noSpaceFile struct {
	flog.File
	fs *noSpaceFS
}

func (f *noSpaceFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	full := f.fs.full
	f.fs.mu.Unlock()
	if full {
		// Part of the write lands before the disk fills.
		n, _ := f.File.Write(p[:len(p)/2])
		return n, &os.PathError{Op: "write", Path: "segment", Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

// A refused publish on a full disk writes nothing and takes no offset
// (the property of the reference's a_refused_publish_leaves_no_record_and_no_gap,
// for a refusal by the disk); publishing resumes when space returns.
func TestDurableFullDiskRefusesAndRecovers(t *testing.T) {
	dir := t.TempDir()
	fs := &noSpaceFS{FS: flog.OSFS()}
	cfg := Config{Storage: &StorageConfig{FS: fs}}
	b, st := newDurableStream(t, dir, cfg, wire.StreamSpec{})
	sh := shard0(t, st)
	publish(t, sh, payloads(3, "before"))
	fs.setFull(true)
	_, err := sh.Publish(context.Background(), payloads(2, "refused"), "")
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeOverloaded {
		t.Fatalf("publish on a full disk: %v", err)
	}
	if sh.NextOffset() != 3 {
		t.Fatalf("a refused publish moved the tail to %d", sh.NextOffset())
	}
	fs.setFull(false)
	if off := publish(t, sh, payloads(1, "after")); off != 3 {
		t.Fatalf("publish after space returned at %d, want 3", off)
	}
	b.Close()
	_, st = newDurableStream(t, dir, Config{}, wire.StreamSpec{})
	recs, _, err := shard0(t, st).Read(0, 10, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Payload))
	}
	if fmt.Sprint(got) != "[before-0 before-1 before-2 after-0]" {
		t.Fatalf("log holds %q", got)
	}
}

// Claims may be finished from any goroutine in any order; each waits for
// the claim before it, so subscribers see offset order and every Finish
// returns. The broker finishes Block-policy claims this way. The test runs
// in a synctest bubble so that it knows every other Finish has gone as far
// as it can before claim 0 finishes.
func TestDurableClaimsFinishedOutOfOrderDeliverInOrder(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{SubQueueCapacity: 1 << 12, SubQueueMaxBytes: 1 << 30}
		_, st := newDurableStream(t, dir, cfg, wire.StreamSpec{SubQueuePolicy: "block"})
		sh := shard0(t, st)
		s := subscribe(t, sh, SubscribeOptions{})
		const n = 300
		claims := make([]*Claimed, n)
		for i := range claims {
			c, err := sh.Claim(payloads(1, fmt.Sprint(i)), "")
			if err != nil {
				t.Fatal(err)
			}
			claims[i] = c
		}
		rng := rand.New(rand.NewPCG(3, 4))
		rng.Shuffle(n, func(i, j int) { claims[i], claims[j] = claims[j], claims[i] })
		// Every claim but 0 first: none may complete until claim 0 does.
		var wg sync.WaitGroup
		for _, c := range claims {
			if c.BaseOffset() == 0 {
				continue
			}
			wg.Go(func() {
				if err := c.Finish(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
		// Each of those Finish calls is now blocked for good: whatever it
		// could complete without claim 0, it has.
		synctest.Wait()
		if got := sh.NextOffset(); got != 0 {
			t.Fatalf("completed tail %d before claim 0 finished", got)
		}
		if depth, _ := s.q.depth(); depth != 0 {
			t.Fatalf("%d claims delivered before the claim ahead of them finished", depth)
		}
		for _, c := range claims {
			if c.BaseOffset() == 0 {
				if err := c.Finish(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
		wg.Wait()
		offs, vals := consume(t, s, n)
		wantContiguous(t, "subscriber", offs, 0, n)
		for i, v := range vals {
			if want := fmt.Sprint(i, "-0"); v != want {
				t.Fatalf("offset %d holds %q, want %q", i, v, want)
			}
		}
	})
}

// A finished claim is not kept alive by the claims after it: each claim
// links to the one before it so that it can wait for it, and a chain kept
// whole held every batch published on the shard since it opened (found
// as a durable publisher's broker growing by the gigabyte).
func TestFinishedClaimsAreNotRetained(t *testing.T) {
	_, st := newDurableStream(t, t.TempDir(), Config{}, wire.StreamSpec{})
	sh := shard0(t, st)
	first, err := sh.Claim(payloads(1, "first"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	gone := weak.Make(first.env)
	first = nil
	for i := range 100 {
		c, err := sh.Claim(payloads(1, fmt.Sprint(i)), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Finish(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// The replay ring may still hold the first batch; empty it.
	sh.ring.reset()
	runtime.GC()
	if gone.Value() != nil {
		t.Fatal("the first claim's batch is still reachable after 100 later claims finished")
	}
	n := 0
	for c := sh.lastClaim; c != nil; c = c.prev {
		n++
	}
	if n > 1 {
		t.Fatalf("the shard's last claim links back through %d claims", n)
	}
}
