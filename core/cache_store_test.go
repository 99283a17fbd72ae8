package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// storeClock is a settable clock for expiries.
type storeClock struct{ ns atomic.Int64 }

func newStoreClock() *storeClock {
	c := &storeClock{}
	c.ns.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *storeClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *storeClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

func storeOptions(t testing.TB, dir string) CacheStoreOptions {
	return CacheStoreOptions{StoreLogOptions: StoreLogOptions{Dir: dir, Fsync: flog.FsyncAlways,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, CompactBytesPerSec: -1}
}

func mustOpenStore(t testing.TB, o CacheStoreOptions) *CacheStore {
	t.Helper()
	s, err := OpenCacheStore(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.checkIndex(); err != nil {
			t.Errorf("cache store %s: %v", o.Dir, err)
		}
		s.Close()
	})
	return s
}

// checkIndex verifies the store's invariants: every version is a
// retained put of its key, and the accounting matches the index.
func (s *CacheStore) checkIndex() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil
	}
	var bytes int64
	ttl := 0
	start, next := s.log.StartOffset(), s.log.NextOffset()
	for k, e := range s.index {
		bytes += indexCost(k)
		ttl += ttlCount(e)
		if e.loc < start || e.loc >= next {
			return fmt.Errorf("key %q: offset %d outside [%d, %d)", k, e.loc, start, next)
		}
		if _, _, err := s.readValue(k, e); err != nil {
			return fmt.Errorf("key %q: %v", k, err)
		}
	}
	if bytes != s.indexBytes || ttl != s.withTTL {
		return fmt.Errorf("accounted %d bytes, %d with ttl; index holds %d, %d", s.indexBytes, s.withTTL, bytes, ttl)
	}
	return nil
}

// storeModel is what a store must hold: key → value and version.
type storeModel map[string]CacheStoreValue

// contents reads every key of the model back from s.
func storeContents(t testing.TB, s *CacheStore, keys []string, now time.Time) storeModel {
	t.Helper()
	got := storeModel{}
	for _, k := range keys {
		v, ok, err := s.Get(context.Background(), k, now)
		if err != nil {
			t.Fatalf("get %q: %v", k, err)
		}
		if ok {
			got[k] = v
		}
	}
	return got
}

func sameModel(a, b storeModel) bool {
	return maps.EqualFunc(a, b, func(x, y CacheStoreValue) bool {
		return bytes.Equal(x.Value, y.Value) && x.Version == y.Version && x.ExpiresAt == y.ExpiresAt
	})
}

func TestCacheRecordRoundTrip(t *testing.T) {
	for _, r := range cacheRecordSeeds() {
		b := r.Append(nil)
		if len(b) != r.Len() {
			t.Fatalf("%+v: Len %d, encoded %d", r, r.Len(), len(b))
		}
		got, n, err := cachelog.ParseCacheRecord(r.Kind, b)
		if err != nil || n != len(b) || got.Key != r.Key || got.ExpiresAt != r.ExpiresAt || got.Version != r.Version || !bytes.Equal(got.Value, r.Value) {
			t.Fatalf("%+v: got %+v, %d, %v", r, got, n, err)
		}
	}
	if _, _, err := cachelog.ParseCacheRecord(flog.KindData, []byte{1, 0, 0}); err == nil {
		t.Fatal("a data record parsed as a cache record")
	}
	if _, _, err := cachelog.ParseCacheRecord(flog.KindCachePut, []byte{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}); err == nil {
		t.Fatal("an unknown layout version parsed")
	}
}

func cacheRecordSeeds() []cachelog.CacheRecord {
	return []cachelog.CacheRecord{
		{Kind: flog.KindCachePut, Key: "k", Value: []byte("v")},
		{Kind: flog.KindCachePut, Key: "", Value: nil, ExpiresAt: 1},
		{Kind: flog.KindCachePut, Key: "key", Value: bytes.Repeat([]byte{7}, 300), ExpiresAt: 1 << 62},
		{Kind: flog.KindCacheTombstone, Key: "gone"},
		{Kind: flog.KindCacheExpiry, Key: "lapsed"},
		{Kind: flog.KindCacheCopy, Key: "cold", Value: []byte("kept"), ExpiresAt: 5, Version: 12345},
	}
}

// FuzzParseCacheRecord: any payload decodes or is refused with an error,
// never a panic, and what decodes encodes back to the same bytes.
func FuzzParseCacheRecord(f *testing.F) {
	for _, r := range cacheRecordSeeds() {
		f.Add(uint8(r.Kind), r.Append(nil))
	}
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		r, n, err := cachelog.ParseCacheRecord(flog.Kind(kind), b)
		if err != nil {
			var re *cachelog.CacheRecordError
			if !errors.As(err, &re) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if n != len(b) {
			t.Fatalf("consumed %d of %d", n, len(b))
		}
		if again := r.Append(nil); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, was %x", again, b)
		}
	})
}

// TestCacheStoreKeepsWritesAcrossRestart: puts, overwrites and deletes
// read back with their versions, before and after a reopen, from the log
// alone and from a snapshot plus the records after it.
func TestCacheStoreKeepsWritesAcrossRestart(t *testing.T) {
	ctx := context.Background()
	o := storeOptions(t, t.TempDir())
	s := mustOpenStore(t, o)
	model := storeModel{}
	var keys []string
	put := func(k, v string) {
		ver, err := s.Put(ctx, k, []byte(v), 0)
		if err != nil {
			t.Fatal(err)
		}
		model[k] = CacheStoreValue{Value: []byte(v), Version: ver}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	put("a", "1")
	put("b", "2")
	put("a", "3")
	if old, ok, err := s.Delete(ctx, "b"); err != nil || !ok || string(old) != "2" {
		t.Fatalf("delete b: %q %v %v", old, ok, err)
	}
	delete(model, "b")
	if _, ok, err := s.Delete(ctx, "nope"); ok || err != nil {
		t.Fatalf("delete of an absent key: %v %v", ok, err)
	}
	now := time.Now()
	if got := storeContents(t, s, keys, now); !sameModel(got, model) {
		t.Fatalf("before restart %v, want %v", got, model)
	}
	s.Close()
	s = mustOpenStore(t, o)
	if got := storeContents(t, s, keys, now); !sameModel(got, model) {
		t.Fatalf("after restart %v, want %v", got, model)
	}
	if _, err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	put("c", "4")
	put("a", "5")
	s.Close()
	s = mustOpenStore(t, o)
	if s.snapPoint == 0 {
		t.Fatal("the reopened store did not load the snapshot")
	}
	if got := storeContents(t, s, keys, now); !sameModel(got, model) {
		t.Fatalf("after snapshot and restart %v, want %v", got, model)
	}
}

// TestCacheStoreReadChangesIsTheWriteHistory: the log read as changes
// gives every write in order with its offset, op, key and value.
func TestCacheStoreReadChangesIsTheWriteHistory(t *testing.T) {
	ctx := context.Background()
	clk := newStoreClock()
	o := storeOptions(t, t.TempDir())
	o.Now = clk.Now
	s := mustOpenStore(t, o)
	exp := clk.Now().Add(time.Minute).UnixNano()
	v0, _ := s.Put(ctx, "k", []byte("x"), exp)
	s.Delete(ctx, "k")
	s.Put(ctx, "t", []byte("y"), exp)
	clk.Add(2 * time.Minute)
	if n, err := s.SweepExpired(ctx, clk.Now()); n != 1 || err != nil {
		t.Fatalf("sweep: %d %v", n, err)
	}
	chs, next, err := s.ReadChanges(v0, s.log.DurableOffset(), 0, 0)
	if err != nil || next != v0+4 || len(chs) != 4 {
		t.Fatalf("read: %d changes, next %d, %v", len(chs), next, err)
	}
	want := []struct {
		op  wire.CacheChangeOp
		key string
	}{{wire.CacheOpPut, "k"}, {wire.CacheOpDelete, "k"}, {wire.CacheOpPut, "t"}, {wire.CacheOpExpire, "t"}}
	for i, ch := range chs {
		if ch.Offset != v0+uint64(i) || ch.Op != want[i].op || ch.Key != want[i].key {
			t.Fatalf("change %d: %+v, want %+v", i, ch, want[i])
		}
		if _, err := ch.EncodedFrame(); err != nil {
			t.Fatalf("change %d does not encode: %v", i, err)
		}
	}
	if chs[0].ExpiresAt != exp || string(chs[0].Value) != "x" {
		t.Fatalf("put change %+v", chs[0])
	}
	var we *wire.Error
	if _, _, err := s.ReadChanges(next+1, next+1, 0, 0); !errors.As(err, &we) || we.Reason() != "in_future" {
		t.Fatalf("read past the tail: %v", err)
	}
}

// TestCacheStoreExpirySurvivesRestart: an expiry is absolute: it holds
// across a reopen, the entry reads absent once it passes, and the sweep
// appends an expiry record that removes it for good.
func TestCacheStoreExpirySurvivesRestart(t *testing.T) {
	ctx := context.Background()
	clk := newStoreClock()
	o := storeOptions(t, t.TempDir())
	o.Now = clk.Now
	s := mustOpenStore(t, o)
	exp := clk.Now().Add(10 * time.Second).UnixNano()
	ver, err := s.Put(ctx, "session", []byte("v"), exp)
	if err != nil {
		t.Fatal(err)
	}
	s.Put(ctx, "forever", []byte("w"), 0)
	s.Close()

	clk.Add(5 * time.Second)
	s = mustOpenStore(t, o)
	if v, ok, _ := s.Get(ctx, "session", clk.Now()); !ok || v.ExpiresAt != exp || v.Version != ver {
		t.Fatalf("before expiry after restart: %+v %v", v, ok)
	}
	if n, _ := s.SweepExpired(ctx, clk.Now()); n != 0 {
		t.Fatalf("swept %d before the expiry", n)
	}
	clk.Add(5 * time.Second)
	if _, ok, _ := s.Get(ctx, "session", clk.Now()); ok {
		t.Fatal("read at its expiry")
	}
	s.Close()
	s = mustOpenStore(t, o)
	if _, ok, _ := s.Get(ctx, "session", clk.Now()); ok {
		t.Fatal("expired entry read after a restart")
	}
	next := s.NextOffset()
	if n, err := s.SweepExpired(ctx, clk.Now()); n != 1 || err != nil {
		t.Fatalf("sweep: %d %v", n, err)
	}
	chs, _, err := s.ReadChanges(next, s.log.DurableOffset(), 0, 0)
	if err != nil || len(chs) != 1 || chs[0].Op != wire.CacheOpExpire || chs[0].Key != "session" {
		t.Fatalf("the sweep's change: %+v %v", chs, err)
	}
	if s.Len() != 1 {
		t.Fatalf("%d keys after the sweep", s.Len())
	}
	if _, ok, _ := s.Get(ctx, "forever", clk.Now()); !ok {
		t.Fatal("an entry without expiry was swept")
	}
}

// TestCacheStoreGetWaitsForDurability: under always, a Get does not
// return before the writes appended ahead of it are durable.
func TestCacheStoreGetWaitsForDurability(t *testing.T) {
	o := storeOptions(t, t.TempDir())
	s := mustOpenStore(t, o)
	w, err := s.AppendPut("k", []byte("v"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Get(context.Background(), "k", time.Now()); !ok || err != nil {
		t.Fatalf("get: %v %v", ok, err)
	}
	if d := s.log.DurableOffset(); d <= w.Offset {
		t.Fatalf("get returned with durable offset %d, put at %d", d, w.Offset)
	}
}

// fullFS fails every write with ENOSPC while full is set.
type fullFS struct {
	flog.FS
	full atomic.Bool
}

func (f *fullFS) OpenFile(name string, flag int, perm os.FileMode) (flog.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &fullFile{File: file, fs: f}, nil
}

type fullFile struct {
	flog.File
	fs *fullFS
}

func (f *fullFile) Write(b []byte) (int, error) {
	if f.fs.full.Load() {
		return 0, &os.PathError{Op: "write", Path: "fullFS", Err: syscall.ENOSPC}
	}
	return f.File.Write(b)
}

// TestCacheStoreFullDiskRefusesAndRecovers: a write the disk has no room
// for is refused overloaded (reason storage_full, retry_after), changes
// nothing, and writes go on once there is room.
func TestCacheStoreFullDiskRefusesAndRecovers(t *testing.T) {
	ctx := context.Background()
	fsys := &fullFS{FS: flog.OSFS()}
	o := storeOptions(t, t.TempDir())
	o.FS = fsys
	s := mustOpenStore(t, o)
	if _, err := s.Put(ctx, "k", []byte("v1"), 0); err != nil {
		t.Fatal(err)
	}
	fsys.full.Store(true)
	_, err := s.Put(ctx, "k", []byte("v2"), 0)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeOverloaded || we.Reason() != "storage_full" || we.Retry != wire.RetryRetryAfter {
		t.Fatalf("put on a full disk: %v", err)
	}
	if _, _, err := s.Delete(ctx, "k"); !errors.As(err, &we) || we.Reason() != "storage_full" {
		t.Fatalf("delete on a full disk: %v", err)
	}
	if v, ok, _ := s.Get(ctx, "k", time.Now()); !ok || string(v.Value) != "v1" {
		t.Fatalf("after the refusals k = %q %v", v.Value, ok)
	}
	fsys.full.Store(false)
	if _, err := s.Put(ctx, "k", []byte("v3"), 0); err != nil {
		t.Fatalf("put once there is room: %v", err)
	}
}
