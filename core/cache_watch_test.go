package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

func newWatchCache(t *testing.T, cfg Config) (*Broker, *Cache) {
	t.Helper()
	if cfg.CacheShards == 0 {
		cfg.CacheShards = 4
	}
	b := NewBroker(cfg)
	t.Cleanup(b.Close)
	if err := b.ApplyCache(wire.CacheSpec{TenantID: "t", Namespace: "ns", Cache: "c"}); err != nil {
		t.Fatal(err)
	}
	c, _ := b.Cache(CacheKey{"t", "ns", "c"})
	return b, c
}

func mustWatch(t *testing.T, c *Cache, opts CacheWatchOptions) (*CacheWatch, CacheWatchInfo) {
	t.Helper()
	w, info, err := c.Watch(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w, info
}

// watchLog is what one watch delivered.
type watchLog struct {
	initial []*CacheChange
	state   *CacheWatchState
	changes []*CacheChange
	end     error
}

// drainWatch takes every item ready now.
func drainWatch(w *CacheWatch, l *watchLog) {
	for {
		it, ok := w.Next()
		if !ok {
			return
		}
		switch {
		case it.Change != nil && it.Change.Retained:
			l.initial = append(l.initial, it.Change)
		case it.Change != nil:
			l.changes = append(l.changes, it.Change)
		case it.State != nil:
			l.state = it.State
		default:
			l.end = it.End
		}
	}
}

// drainUntil takes every item as it becomes ready until done is closed,
// then what is left.
func drainUntil(w *CacheWatch, l *watchLog, done <-chan struct{}) {
	for {
		select {
		case <-w.Ready():
			drainWatch(w, l)
		case <-done:
			drainWatch(w, l)
			return
		}
	}
}

type kv struct {
	value  string
	offset uint64
}

// apply replays changes onto state: a put sets, anything else removes.
func apply(state map[string]kv, chs ...*CacheChange) {
	for _, ch := range chs {
		if ch.Op == wire.CacheOpPut {
			state[ch.Key] = kv{string(ch.Value), ch.Offset}
		} else {
			delete(state, ch.Key)
		}
	}
}

func contents(c *Cache, match func(string) bool) map[string]kv {
	out := map[string]kv{}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k, e := range s.m {
			if match(k) {
				out[k] = kv{string(e.value), e.offset}
			}
		}
		s.mu.Unlock()
	}
	return out
}

func descChange(ch *CacheChange) string {
	return fmt.Sprintf("%d %s %s=%q exp %d retained %v", ch.Offset, ch.Op, ch.Key, ch.Value, ch.ExpiresAt, ch.Retained)
}

func sameChange(a, b *CacheChange) bool {
	return a.Offset == b.Offset && a.Op == b.Op && a.Key == b.Key && bytes.Equal(a.Value, b.Value) && a.ExpiresAt == b.ExpiresAt
}

// modelWatch is one watch of the model test and what it received.
type modelWatch struct {
	opts     CacheWatchOptions
	info     CacheWatchInfo
	start    uint64
	log      watchLog
	complete bool // open until every write was done
}

var modelFilters = []CacheWatchOptions{{Key: "a1"}, {Key: "ab"}, {Key: "a", Prefix: true}, {Key: "b", Prefix: true}, {Prefix: true}}

// TestCacheWatchModel runs random puts, deletes and expiries from several
// goroutines while watches with key and prefix filters, retained starts
// and resumes come and go, and checks every watch against the sequence a
// whole-cache watch saw (itself checked for gaps and against the final
// contents).
func TestCacheWatchModel(t *testing.T) {
	_, c := newWatchCache(t, Config{CacheWatchHistoryBytes: 2 << 10, CacheWatchMaxBytes: 64 << 20})
	testCacheWatchModel(t, c, false)
}

// TestDurableCacheWatchModel is the model test on a log-backed cache,
// where a resume older than the (small) history in memory is read from
// the log instead of starting over.
func TestDurableCacheWatchModel(t *testing.T) {
	_, c := newWatchCache(t, Config{CacheWatchHistoryBytes: 2 << 10, CacheWatchMaxBytes: 64 << 20,
		Storage: &StorageConfig{Dir: t.TempDir(), Fsync: flog.FsyncNone}})
	if c.store == nil {
		t.Fatal("the cache is not log-backed")
	}
	testCacheWatchModel(t, c, false)
}

// TestDurableCacheWatchModelFsyncAlways is the model test on a log-backed
// cache under FsyncAlways, where a change reaches the watches only once
// an fsync covered it, well after its write was applied: resumes, retained
// starts (whose values wait for their offset to be durable) and the
// reference still agree exactly.
func TestDurableCacheWatchModelFsyncAlways(t *testing.T) {
	_, c := newWatchCache(t, Config{CacheWatchHistoryBytes: 2 << 10, CacheWatchMaxBytes: 64 << 20,
		Storage: &StorageConfig{Dir: t.TempDir(), Fsync: flog.FsyncAlways}})
	testCacheWatchModel(t, c, false)
}

// TestDurableCacheWatchModelWithCompaction is the model test on a
// log-backed cache whose log is compacted all along (small segments):
// values are copied forward and segments dropped under the watches, and
// every resume is still exact or a resnapshot.
func TestDurableCacheWatchModelWithCompaction(t *testing.T) {
	_, c := newWatchCache(t, Config{CacheWatchHistoryBytes: 2 << 10, CacheWatchMaxBytes: 64 << 20,
		Storage: &StorageConfig{Dir: t.TempDir(), Fsync: flog.FsyncNone, SegmentBytes: 4096, CacheCompactInterval: -1}})
	testCacheWatchModel(t, c, true)
}

// testCacheWatchModel runs writers and watchers against c and checks
// every watch against a reference watch; with compact, compactions of
// c's log run all along (and the offsets may skip those copies took).
func testCacheWatchModel(t *testing.T, c *Cache, compact bool) {
	ref, refInfo := mustWatch(t, c, CacheWatchOptions{Prefix: true})
	var clock atomic.Int64
	now := func() time.Time { return testNow.Add(time.Duration(clock.Load()) * time.Millisecond) }
	keys := []string{"a0", "a1", "a2", "ab", "b0", "b1", "b2", "c"}

	var refLog watchLog
	var writers, watchers sync.WaitGroup
	done := make(chan struct{})
	refDone := make(chan struct{})
	go func() { // the reference drains as it goes
		defer close(refDone)
		drainUntil(ref, &refLog, done)
	}()
	for g := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 1500 {
				if i%20 == 0 {
					time.Sleep(100 * time.Microsecond) // let watches come and go meanwhile
				}
				k := keys[rng.IntN(len(keys))]
				clock.Add(int64(rng.IntN(2)))
				switch r := rng.IntN(10); {
				case r < 5:
					ttl := time.Duration(0)
					if rng.IntN(2) == 0 {
						ttl = time.Duration(1+rng.IntN(20)) * time.Millisecond
					}
					if err := c.Put(k, []byte(fmt.Sprintf("%d-%d", g, i)), ttl, now()); err != nil {
						t.Error(err)
						return
					}
				case r < 7:
					c.Delete(k, now())
				case r < 9:
					c.Get(k, now())
				default:
					c.Sweep(now())
				}
			}
		}()
	}
	var mu sync.Mutex
	var all []*modelWatch
	for g := range 6 {
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			var resume *uint64
			for round := 0; ; round++ {
				m := &modelWatch{opts: modelFilters[rng.IntN(len(modelFilters))]}
				switch {
				case resume != nil && rng.IntN(3) > 0:
					m.opts.From = resume
				case rng.IntN(2) == 0:
					m.opts.Retained = true
				}
				m.opts.Now = now()
				w, info, err := c.Watch(m.opts)
				if err != nil {
					t.Error(err)
					return
				}
				m.info, m.start = info, info.Next
				if m.opts.From != nil && !info.Resnapshot {
					m.start = *m.opts.From
				}
				mu.Lock()
				all = append(all, m)
				mu.Unlock()
				last := rng.IntN(4) == 0
				for n := rng.IntN(50); n > 0 || last; n-- {
					select {
					case <-w.Ready():
						drainWatch(w, &m.log)
					case <-done:
						drainWatch(w, &m.log)
						m.complete = true
						w.Close()
						return
					default:
						time.Sleep(50 * time.Microsecond)
					}
				}
				drainWatch(w, &m.log)
				w.Close()
				next := m.start
				if n := len(m.log.changes); n > 0 {
					next = m.log.changes[n-1].Offset + 1
				}
				resume = &next
				time.Sleep(time.Duration(rng.IntN(400)) * time.Microsecond) // sometimes past the history
			}
		}()
	}
	compactions := make(chan int, 1)
	if compact {
		writersDone := make(chan struct{})
		go func() {
			n := 0
			defer func() { compactions <- n }()
			for {
				select {
				case <-writersDone:
					return
				default:
				}
				res, err := c.store.Compact(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if res.Dropped > 0 {
					n++
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		writers.Wait()
		close(writersDone)
	} else {
		writers.Wait()
		compactions <- 0
	}
	dropping := <-compactions
	c.Sweep(now().Add(time.Hour))                              // every remaining ttl ends with an expire
	if err := c.WaitStaged(context.Background()); err != nil { // the expiries reach watches once durable
		t.Fatal(err)
	}
	close(done)
	watchers.Wait()
	<-refDone

	// The reference saw every write, without a gap.
	if len(refLog.changes) == 0 || refLog.end != nil {
		t.Fatalf("reference: %d changes, end %v", len(refLog.changes), refLog.end)
	}
	for i, ch := range refLog.changes {
		switch {
		case !compact && ch.Offset != refInfo.Next+uint64(i):
			t.Fatalf("reference change %d has offset %d, want %d", i, ch.Offset, refInfo.Next+uint64(i))
		case compact && i > 0 && ch.Offset <= refLog.changes[i-1].Offset:
			t.Fatalf("reference change %d has offset %d after %d", i, ch.Offset, refLog.changes[i-1].Offset)
		}
	}
	if last := refLog.changes[len(refLog.changes)-1].Offset; c.log.next != last+1 {
		t.Fatalf("cache next %d, reference saw up to %d", c.log.next, last+1)
	}
	if compact && dropping == 0 {
		t.Fatal("no compaction dropped a segment while the watches ran")
	}
	final := map[string]kv{}
	apply(final, refLog.changes...)
	if got := contents(c, func(string) bool { return true }); fmt.Sprint(got) != fmt.Sprint(final) {
		t.Fatalf("replaying the reference gives\n%v\nthe cache holds\n%v", final, got)
	}
	resumes, retained, resnaps := 0, 0, 0
	for _, m := range all {
		checkModelWatch(t, c, m, refLog.changes)
		if m.opts.From != nil {
			resumes++
		}
		if m.info.Resnapshot {
			resnaps++
		} else if m.opts.Retained {
			retained++
		}
	}
	t.Logf("%d watches: %d resumes (%d resnapshots), %d retained; %d changes; %d compactions dropped segments", len(all), resumes, resnaps, retained, len(refLog.changes), dropping)
	if c.log.env.total.Load() != 0 {
		t.Errorf("queued bytes left after every watch closed: %d", c.log.env.total.Load())
	}
}

func checkModelWatch(t *testing.T, c *Cache, m *modelWatch, ref []*CacheChange) {
	t.Helper()
	w := &CacheWatch{key: m.opts.Key, prefix: m.opts.Prefix}
	name := fmt.Sprintf("watch %+v from %d (info %+v)", m.opts, m.start, m.info)
	if m.log.end != nil {
		t.Errorf("%s ended: %v", name, m.log.end)
	}
	var want []*CacheChange
	before := map[string]kv{} // the reference's state before start
	for _, ch := range ref {
		if !w.matches(ch.Key) {
			continue
		}
		if ch.Offset >= m.start {
			want = append(want, ch)
		} else {
			apply(before, ch)
		}
	}
	got := m.log.changes
	if len(got) > len(want) || (m.complete && len(got) != len(want)) {
		t.Fatalf("%s: got %d changes, want %d (complete %v)", name, len(got), len(want), m.complete)
	}
	for i := range got {
		if !sameChange(got[i], want[i]) {
			t.Fatalf("%s: change %d is %s, want %s", name, i, descChange(got[i]), descChange(want[i]))
		}
	}
	if !m.opts.Retained && !m.info.Resnapshot {
		if m.log.state != nil || len(m.log.initial) > 0 {
			t.Fatalf("%s: values without a retained start", name)
		}
		return
	}
	if m.log.state == nil {
		if m.complete {
			t.Fatalf("%s: no state item", name)
		}
		return
	}
	if m.log.state.Offset != m.info.Next || m.log.state.Count != uint64(len(m.log.initial)) {
		t.Fatalf("%s: state %+v after %d values", name, *m.log.state, len(m.log.initial))
	}
	for _, v := range m.log.initial {
		if b, ok := before[v.Key]; !ok || b.value != string(v.Value) || b.offset != v.Offset {
			t.Fatalf("%s: value %s, the key held %+v (%v) at the start", name, descChange(v), b, ok)
		}
	}
	if len(m.log.initial) != len(before) {
		got := map[string]kv{}
		apply(got, m.log.initial...)
		for k, b := range before {
			if _, ok := got[k]; !ok {
				t.Fatalf("%s: no value for %s, which held %+v at offset %d", name, k, b, m.log.state.Offset)
			}
		}
	}
	if m.complete {
		view := map[string]kv{}
		apply(view, m.log.initial...)
		apply(view, got...)
		if final := contents(c, w.matches); fmt.Sprint(view) != fmt.Sprint(final) {
			t.Fatalf("%s: values and changes give\n%v\nthe cache holds\n%v", name, view, final)
		}
	}
}

func TestCacheWatchLaggedResume(t *testing.T) {
	_, c := newWatchCache(t, Config{})
	one := (&CacheChange{Key: "k", Value: []byte("v0")}).size()
	w, info := mustWatch(t, c, CacheWatchOptions{Key: "k", MaxBytes: 3 * one})
	for i := range 10 {
		c.Put("k", []byte(fmt.Sprint("v", i)), 0, testNow)
		c.Put("other", []byte("x"), 0, testNow)
	}
	var l watchLog
	drainWatch(w, &l)
	var lag *LaggedError
	if len(l.changes) != 3 || !errors.As(l.end, &lag) {
		t.Fatalf("got %d changes, end %v; want 3 and lagged", len(l.changes), l.end)
	}
	if want := info.Next + 6; lag.ResumeFrom != want {
		t.Fatalf("resume from %d, want %d (the fourth put of k)", lag.ResumeFrom, want)
	}
	if _, ok := w.Next(); ok {
		t.Fatal("an item after the end")
	}
	c.Put("k", []byte("late"), 0, testNow)
	w2, info2 := mustWatch(t, c, CacheWatchOptions{Key: "k", From: &lag.ResumeFrom})
	if info2.Resnapshot {
		t.Fatal("resume within history read as a resnapshot")
	}
	var l2 watchLog
	drainWatch(w2, &l2)
	var vals []string
	for _, ch := range append(l.changes, l2.changes...) {
		vals = append(vals, string(ch.Value))
	}
	if fmt.Sprint(vals) != "[v0 v1 v2 v3 v4 v5 v6 v7 v8 v9 late]" {
		t.Fatalf("lagged then resumed watch saw %v", vals)
	}
	c.Put("k", []byte("live"), 0, testNow)
	drainWatch(w2, &l2)
	if n := len(l2.changes); n != 9 || string(l2.changes[n-1].Value) != "live" {
		t.Fatalf("resumed watch did not go on live: %d changes", n)
	}
}

func TestCacheWatchTotalBound(t *testing.T) {
	one := (&CacheChange{Key: "k", Value: []byte("v")}).size()
	_, c := newWatchCache(t, Config{CacheWatchMaxBytesTotal: 3 * one})
	a, _ := mustWatch(t, c, CacheWatchOptions{Key: "k"})
	b, _ := mustWatch(t, c, CacheWatchOptions{Key: "k"})
	c.Put("k", []byte("v"), 0, testNow) // a and b: one each
	c.Put("k", []byte("v"), 0, testNow) // a: two; b would pass the total
	var la, lb watchLog
	drainWatch(a, &la)
	drainWatch(b, &lb)
	var lag *LaggedError
	if la.end != nil || len(la.changes) != 2 {
		t.Fatalf("first watch: %d changes, end %v", len(la.changes), la.end)
	}
	if !errors.As(lb.end, &lag) || len(lb.changes) != 1 || lag.ResumeFrom != la.changes[1].Offset {
		t.Fatalf("second watch: %d changes, end %v", len(lb.changes), lb.end)
	}
	if got := c.log.env.total.Load(); got != 0 {
		t.Fatalf("%d bytes still counted after draining", got)
	}
}

func TestCacheWatchResnapshot(t *testing.T) {
	_, c := newWatchCache(t, Config{CacheWatchHistoryBytes: 600})
	first := c.log.next
	c.Put("gone", []byte("x"), 0, testNow)
	c.Delete("gone", testNow)
	mustWatch(t, c, CacheWatchOptions{Key: "k"}) // the history starts
	for i := range 20 {
		c.Put(fmt.Sprint("k", i%3), []byte(fmt.Sprint(i)), 0, testNow)
	}
	w, info := mustWatch(t, c, CacheWatchOptions{Key: "k", Prefix: true, From: &first})
	if !info.Resnapshot {
		t.Fatal("resume older than the history not a resnapshot")
	}
	var l watchLog
	drainWatch(w, &l)
	view := map[string]kv{}
	apply(view, l.initial...)
	if l.state == nil || l.state.Count != 3 || fmt.Sprint(view) != fmt.Sprint(contents(c, func(string) bool { return true })) {
		t.Fatalf("resnapshot gave %v, state %+v", view, l.state)
	}
	// Within the (small) history: served from it.
	from := c.log.next - 2
	w, info = mustWatch(t, c, CacheWatchOptions{Key: "k", Prefix: true, From: &from})
	l = watchLog{}
	drainWatch(w, &l)
	if info.Resnapshot || len(l.changes) != 2 || l.changes[0].Offset != from {
		t.Fatalf("resume in history: %+v, %d changes", info, len(l.changes))
	}
}

func TestCacheWatchNoHistory(t *testing.T) {
	_, c := newWatchCache(t, Config{CacheWatchHistoryBytes: -1})
	c.Put("k", []byte("v"), 0, testNow)
	old := c.log.next - 1
	if _, info := mustWatch(t, c, CacheWatchOptions{Key: "k", From: &old}); !info.Resnapshot {
		t.Fatal("resume with no history not a resnapshot")
	}
	next := c.log.next
	w, info := mustWatch(t, c, CacheWatchOptions{Key: "k", From: &next})
	c.Put("k", []byte("w"), 0, testNow)
	var l watchLog
	drainWatch(w, &l)
	if info.Resnapshot || len(l.changes) != 1 || l.changes[0].Offset != next {
		t.Fatalf("resume at next: %+v, %d changes", info, len(l.changes))
	}
	if c.log.history != nil {
		t.Fatal("history kept while disabled")
	}
}

func TestCacheWatchInFuture(t *testing.T) {
	_, c := newWatchCache(t, Config{})
	future := c.log.next + 1
	_, _, err := c.Watch(CacheWatchOptions{Key: "k", From: &future})
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeInvalidRequest || we.Detail["reason"] != "in_future" || we.Detail["next"] != future-1 {
		t.Fatalf("watch from the future: %v", err)
	}
}

func TestCacheWatchCacheRemoved(t *testing.T) {
	b, c := newWatchCache(t, Config{})
	w, _ := mustWatch(t, c, CacheWatchOptions{Key: "k"})
	c.Put("k", []byte("v"), 0, testNow)
	b.RemoveCache(c.Key())
	var l watchLog
	drainWatch(w, &l)
	if len(l.changes) != 1 || !errors.Is(l.end, ErrCacheDeleted) {
		t.Fatalf("after removal: %d changes, end %v", len(l.changes), l.end)
	}
	_, _, err := c.Watch(CacheWatchOptions{Key: "k"})
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeNotFound {
		t.Fatalf("watch of a removed cache: %v", err)
	}
}

func TestCacheWatchExpiry(t *testing.T) {
	_, c := newWatchCache(t, Config{})
	w, _ := mustWatch(t, c, CacheWatchOptions{Prefix: true})
	for _, k := range []string{"get", "delete", "sweep", "put"} {
		c.Put(k, []byte("v"), time.Second, testNow)
	}
	later := testNow.Add(time.Second)
	c.Get("get", later)
	c.Delete("delete", later)
	c.Sweep(later.Add(-time.Millisecond)) // nothing yet
	c.Sweep(later)
	var l watchLog
	drainWatch(w, &l)
	var ops []string
	for _, ch := range l.changes[4:] {
		ops = append(ops, fmt.Sprint(ch.Op, ":", ch.Key))
		if ch.Value != nil {
			t.Errorf("%s change with a value", ch.Op)
		}
	}
	if len(ops) != 4 || ops[0] != "expire:get" || ops[1] != "expire:delete" {
		t.Fatalf("expiry changes %v", ops)
	}
	if ms := uint64(l.changes[0].ExpiresAt / 1e6); ms != uint64(later.UnixMilli()) {
		t.Fatalf("put expiry %d, want %d", ms, later.UnixMilli())
	}
}

func TestCacheWatchCloseTwiceAndShared(t *testing.T) {
	_, c := newWatchCache(t, Config{})
	a, _ := mustWatch(t, c, CacheWatchOptions{Key: "k"})
	b, _ := mustWatch(t, c, CacheWatchOptions{Key: "k"})
	c.Put("k", []byte("v"), 0, testNow)
	ia, _ := a.Next()
	ib, _ := b.Next()
	if ia.Change != ib.Change || &ia.Change.Frame()[0] != &ib.Change.Frame()[0] {
		t.Fatal("two watches of one key got different changes or encodings")
	}
	m, err := wire.ParseMessage(ia.Change.Frame()[wire.HeaderLen:])
	if cc, ok := m.(*wire.CacheChange); err != nil || !ok || cc.Op != wire.CacheOpPut || string(cc.Value) != "v" {
		t.Fatalf("frame parses as %#v, %v", m, err)
	}
	c.Put("k", []byte("w"), 0, testNow)
	a.Close()
	a.Close()
	if _, ok := a.Next(); ok {
		t.Fatal("item after Close")
	}
	if n := len(c.log.keyed["k"]); n != 1 {
		t.Fatalf("%d watches registered for k", n)
	}
	b.Close()
	if c.log.env.total.Load() != 0 || len(c.log.keyed) != 0 {
		t.Fatalf("after Close: %d bytes queued, %d keys watched", c.log.env.total.Load(), len(c.log.keyed))
	}
}

// The broker-wide history bound: once every cache's history together is
// at it, a cache's new changes push out its own oldest, so a resume from
// before them is a resnapshot, and the total never passes the bound.
func TestCacheWatchHistoryTotal(t *testing.T) {
	change := (&CacheChange{Key: "k0", Value: []byte("v")}).size()
	b, a := newWatchCache(t, Config{CacheWatchHistoryBytes: 100 * change, CacheWatchHistoryBytesTotal: 10 * change})
	if err := b.ApplyCache(wire.CacheSpec{TenantID: "t", Namespace: "ns", Cache: "other"}); err != nil {
		t.Fatal(err)
	}
	o, _ := b.Cache(CacheKey{"t", "ns", "other"})
	mustWatch(t, a, CacheWatchOptions{Key: "k0"})
	mustWatch(t, o, CacheWatchOptions{Key: "k0"})
	start := a.log.next
	for range 8 {
		a.Put("k0", []byte("v"), 0, testNow)
	}
	for range 8 {
		o.Put("k0", []byte("v"), 0, testNow)
	}
	env := a.log.env
	if used := env.historyUsed.Load(); used > env.historyTotal {
		t.Fatalf("history holds %d bytes, over the total %d", used, env.historyTotal)
	}
	if _, info := mustWatch(t, a, CacheWatchOptions{Key: "k0", From: &start}); info.Resnapshot {
		t.Fatal("a cache's history was pushed out by another cache's changes")
	}
	ostart := o.log.next - 8
	if _, info := mustWatch(t, o, CacheWatchOptions{Key: "k0", From: &ostart}); !info.Resnapshot {
		t.Fatal("a resume from changes the total bound pushed out was not a resnapshot")
	}
	b.RemoveCache(CacheKey{"t", "ns", "other"})
	if used := env.historyUsed.Load(); used != 8*change {
		t.Fatalf("after removing a cache the history holds %d bytes, want %d", used, 8*change)
	}
}

// The byte gauges are what a broker's watches queue and keep as history,
// read when scraped: another broker's watches count for nothing, and a
// closed broker whose watches are closed holds nothing.
func TestCacheWatchByteGauges(t *testing.T) {
	watched := func() (*Broker, *CacheWatch) {
		b := NewBroker(Config{})
		if err := b.ApplyCache(wire.CacheSpec{TenantID: "t", Namespace: "ns", Cache: "c"}); err != nil {
			t.Fatal(err)
		}
		c, _ := b.Cache(CacheKey{"t", "ns", "c"})
		w, _, err := c.Watch(CacheWatchOptions{Key: "k"})
		if err != nil {
			t.Fatal(err)
		}
		c.Put("k", []byte("v"), 0, testNow)
		return b, w
	}
	gauges := func(b *Broker) (queued, history float64) {
		return metricValue(t, b, "felix_cache_watch_queued_bytes"), metricValue(t, b, "felix_cache_watch_history_bytes")
	}
	a, wa := watched()
	b, wb := watched()
	defer wb.Close()
	wb.Next() // b's change is delivered: its history keeps it, its queue does not
	size := float64((&CacheChange{Key: "k", Value: []byte("v")}).size())
	if q, h := gauges(a); q != size || h != size {
		t.Fatalf("a: queued %v, history %v; want %v each", q, h, size)
	}
	if q, h := gauges(b); q != 0 || h != size {
		t.Fatalf("b: queued %v, history %v; want 0, %v", q, h, size)
	}
	a.Close()
	wa.Close() // a watch the broker ended keeps its queue until its owner closes it
	if q, h := gauges(a); q != 0 || h != 0 {
		t.Fatalf("after Close: queued %v, history %v; want 0", q, h)
	}
	if q, h := gauges(b); q != 0 || h != size {
		t.Fatalf("b after a's Close: queued %v, history %v; want 0, %v", q, h, size)
	}
	b.Close()
}

// What a change counts against the bounds covers what it holds once
// delivered: its key and value and its encoded frame.
func TestCacheChangeSizeCoversItsFrame(t *testing.T) {
	for _, n := range []int{0, 10, 1000, 100000} {
		ch := &CacheChange{Offset: 1 << 60, Op: wire.CacheOpPut, Key: "some-key", Value: make([]byte, n)}
		if held := int64(len(ch.Key) + len(ch.Value) + len(ch.Frame())); ch.size() < held {
			t.Fatalf("value of %d bytes: size %d, but key, value and frame hold %d", n, ch.size(), held)
		}
	}
}

// A watch is signalled by every change, its end and Close, whether its
// owner polls Signalled or waits on Ready made late; and a queue emptied
// after a burst lets the burst's storage go.
func TestCacheWatchSignalAndQueueStorage(t *testing.T) {
	_, c := newWatchCache(t, Config{CacheWatchMaxBytes: 64 << 20})
	w, _ := mustWatch(t, c, CacheWatchOptions{Key: "k"})
	w.TakeSignal()
	if w.Signalled() {
		t.Fatal("signalled with nothing new")
	}
	for i := range 1000 {
		c.Put("k", []byte(fmt.Sprint(i)), 0, testNow)
	}
	if !w.Signalled() {
		t.Fatal("a put did not signal")
	}
	select {
	case <-w.Ready(): // made after the puts: it must still fire
	default:
		t.Fatal("Ready made after a signal holds no token")
	}
	w.TakeSignal()
	for n := 0; n < 1000; n++ {
		if _, ok := w.Next(); !ok {
			t.Fatalf("only %d of 1000 changes", n)
		}
	}
	w.mu.Lock()
	kept := cap(w.queue)
	w.mu.Unlock()
	if kept > keptFront {
		t.Fatalf("an emptied queue keeps room for %d changes", kept)
	}
	c.Put("k", []byte("after"), 0, testNow)
	select {
	case <-w.Ready():
	default:
		t.Fatal("a put after Ready was made did not signal it")
	}
	w.TakeSignal()
	w.Close()
	if !w.Signalled() {
		t.Fatal("Close did not signal")
	}
}

// Watches closed in any order leave every other watch of their key (or
// prefix) registered and delivering, and the registry empty at the end.
func TestCacheWatchesClosedInAnyOrderKeepTheRest(t *testing.T) {
	_, c := newWatchCache(t, Config{})
	var ws []*CacheWatch
	for i := range 60 {
		opts := CacheWatchOptions{Key: "k"}
		if i%4 == 0 {
			opts = CacheWatchOptions{Key: "k", Prefix: true}
		}
		w, _ := mustWatch(t, c, opts)
		ws = append(ws, w)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	rng.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
	for round := 0; len(ws) > 0; round++ {
		n := min(len(ws), 1+rng.IntN(9))
		for _, w := range ws[:n] {
			w.Close()
		}
		closed := ws[:n]
		ws = ws[n:]
		if err := c.Put("k", []byte(fmt.Sprint(round)), 0, testNow); err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			var got watchLog
			drainWatch(w, &got)
			if len(got.changes) != 1 || string(got.changes[0].Value) != fmt.Sprint(round) {
				t.Fatalf("round %d: an open watch got %d changes", round, len(got.changes))
			}
		}
		for _, w := range closed {
			if w.registered {
				t.Fatalf("round %d: a closed watch is still registered", round)
			}
		}
	}
	c.log.logMu.Lock()
	defer c.log.logMu.Unlock()
	if len(c.log.keyed) != 0 || len(c.log.prefix) != 0 {
		t.Fatalf("registry not empty: %d keys, %d prefix watches", len(c.log.keyed), len(c.log.prefix))
	}
}

// TestCacheWatchRetainedStateUnderWriters opens retained watches, key and
// prefix, while writers put, delete and expire keys, and checks that each
// watch's values are exactly the keys that held a value at its state's
// offset (none missing, none extra, each with the value it held), and
// that its changes are exactly those from that offset on. Each writer owns
// two keys under the watched prefix and writes them in turn; a thousand
// keys under another prefix make each scan long enough that writes land
// during it.
func TestCacheWatchRetainedStateUnderWriters(t *testing.T) {
	_, c := newWatchCache(t, Config{CacheShards: 16, CacheWatchMaxBytes: 64 << 20})
	for i := range 1000 {
		if err := c.Put(fmt.Sprint("filler-", i), []byte("x"), 0, testNow); err != nil {
			t.Fatal(err)
		}
	}
	early := c.log.next - 1
	ref, refInfo := mustWatch(t, c, CacheWatchOptions{Prefix: true})
	var clock atomic.Int64
	now := func() time.Time { return testNow.Add(time.Duration(clock.Load()) * time.Millisecond) }
	const writers, writes = 8, 400
	var refLog watchLog
	done := make(chan struct{})
	refDone := make(chan struct{})
	go func() {
		defer close(refDone)
		drainUntil(ref, &refLog, done)
	}()
	var wg, watchers sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for i := range writes {
				k := fmt.Sprintf("w/%d-%d", g, i%2)
				switch r := rng.IntN(10); {
				case r < 6:
					if err := c.Put(k, []byte(fmt.Sprint(i)), 0, now()); err != nil {
						t.Error(err)
						return
					}
				case r < 8:
					if err := c.Put(k, []byte(fmt.Sprint(i)), time.Millisecond, now()); err != nil {
						t.Error(err)
						return
					}
				case r < 9:
					c.Delete(k, now())
				default:
					clock.Add(1) // what a ttl'd put holds has now expired
				}
			}
		}()
	}
	var mu sync.Mutex
	var all []*modelWatch
	filters := []CacheWatchOptions{{Key: "w/", Prefix: true}, {Key: "w/3-", Prefix: true}, {Key: "w/5-1"}}
	for g := range 64 {
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			m := &modelWatch{opts: filters[g%len(filters)]}
			if g%4 == 3 { // older than the history: a resnapshot
				m.opts.From = &early
			} else {
				m.opts.Retained = true
			}
			m.opts.Now = now()
			w, info, err := c.Watch(m.opts)
			if err != nil {
				t.Error(err)
				return
			}
			defer w.Close()
			m.info, m.start = info, info.Next
			mu.Lock()
			all = append(all, m)
			mu.Unlock()
			drainUntil(w, &m.log, done)
			m.complete = true
		}()
	}
	wg.Wait()
	c.Sweep(now().Add(time.Hour))
	close(done)
	watchers.Wait()
	<-refDone
	for i, ch := range refLog.changes {
		if ch.Offset != refInfo.Next+uint64(i) {
			t.Fatalf("reference change %d has offset %d, want %d", i, ch.Offset, refInfo.Next+uint64(i))
		}
	}
	for _, m := range all {
		if m.opts.From != nil && !m.info.Resnapshot {
			t.Fatalf("a watch from %d, older than the history, was no resnapshot", *m.opts.From)
		}
		checkModelWatch(t, c, m, refLog.changes)
	}
}

// TestCacheWatchRetainedScanOverflowRunsAgain writes during a retained
// prefix start's read of the lock shards, more than the watch's bound
// each time, so every unlocked read overflows and the last one runs with
// every lock shard held; the values must still be those at the state's
// offset, and the changes those after it.
func TestCacheWatchRetainedScanOverflowRunsAgain(t *testing.T) {
	_, c := newWatchCache(t, Config{CacheShards: 4})
	for i := range 8 {
		c.Put(fmt.Sprint("k", i), []byte("start"), 0, testNow)
	}
	c.Put("gone", []byte("x"), 0, testNow)
	c.Put("ttl", []byte("x"), time.Second, testNow)
	one := (&CacheChange{Key: "k0", Value: []byte("write-00")}).size()
	var tries []string
	n := 0
	afterShardScan = func(try int, locked bool) {
		tries = append(tries, fmt.Sprint(try, locked))
		if locked {
			return // a write now would wait for the read
		}
		for range 3 {
			n++
			c.Put(fmt.Sprint("k", n%8), []byte(fmt.Sprintf("write-%02d", n)), 0, testNow)
		}
		c.Delete("gone", testNow)
	}
	t.Cleanup(func() { afterShardScan = nil })
	w, info := mustWatch(t, c, CacheWatchOptions{Prefix: true, Retained: true, MaxBytes: 4 * one, Now: testNow.Add(time.Second)})
	afterShardScan = nil
	if !slices.Contains(tries, "4 true") || slices.Contains(tries, "5 true") {
		t.Fatalf("reads %v: want the fourth, locked, to be the last", tries)
	}
	want := contents(c, func(string) bool { return true })
	c.Put("k0", []byte("after"), 0, testNow)
	var l watchLog
	drainWatch(w, &l)
	if l.state == nil || l.state.Offset != info.Next || l.end != nil {
		t.Fatalf("state %+v, info %+v, end %v", l.state, info, l.end)
	}
	got := map[string]kv{}
	apply(got, l.initial...)
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != 8 || int(l.state.Count) != len(got) {
		t.Fatalf("values\n%v\nwant\n%v", got, want)
	}
	if len(l.changes) != 1 || l.changes[0].Offset != info.Next || string(l.changes[0].Value) != "after" {
		t.Fatalf("changes after the state: %d", len(l.changes))
	}
	if c.log.env.total.Load() != 0 {
		t.Fatalf("%d bytes still counted", c.log.env.total.Load())
	}
}
