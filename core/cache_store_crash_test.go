package core

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/felixmq/felix/core/cachelog"
	"github.com/felixmq/felix/internal/faultfs"
	flog "github.com/felixmq/felix/log"
)

// crashOp is one step of the crash script.
type crashOp struct {
	kind    string // put, delete, compact, advance, sweep
	key     string
	value   []byte
	ttl     time.Duration
	advance time.Duration
}

// crashScript puts, overwrites, deletes, expires and compacts, over
// small segments so that rolls, copies of cold values and segment drops
// happen too.
func crashScript() []crashOp {
	// The cold key is written once, first: the script's compactions must
	// copy it forward for the log to start past it.
	ops := []crashOp{{kind: "put", key: "cold", value: []byte("written once")}}
	for i := range 60 {
		k := fmt.Sprintf("k%d", i%4)
		switch {
		case i%11 == 10:
			ops = append(ops, crashOp{kind: "compact"})
		case i%9 == 8:
			ops = append(ops, crashOp{kind: "delete", key: k})
		case i%13 == 12:
			ops = append(ops, crashOp{kind: "advance", advance: time.Minute}, crashOp{kind: "sweep"})
		default:
			var ttl time.Duration
			if i%5 == 0 {
				ttl = 30 * time.Second
			}
			ops = append(ops, crashOp{kind: "put", key: k, value: bytes.Repeat([]byte{byte('a' + i%26)}, 40+i), ttl: ttl})
		}
	}
	return ops
}

// crashRun runs the script on a store in dir whose file system crashes
// at the armed step. It returns the values acknowledged (key → value
// and version, absent keys missing), the keys the op in flight at the
// crash may have changed with what it may have left, and whether the
// crash point was reached.
func crashRun(t *testing.T, dir string, crashAt int, clk *storeClock) (acked storeModel, maybe map[string]*CacheStoreValue, crashed bool) {
	ctx := context.Background()
	cfs := faultfs.NewCrash(flog.OSFS())
	cfs.Arm(crashAt)
	o := storeOptions(t, dir)
	o.FS, o.Now, o.SegmentBytes = cfs, clk.Now, 512
	acked, maybe = storeModel{}, map[string]*CacheStoreValue{}
	s, err := OpenCacheStore(o)
	if err != nil {
		return acked, maybe, cfs.Crashed()
	}
	defer s.Close()
	for _, op := range crashScript() {
		switch op.kind {
		case "put":
			var exp int64
			if op.ttl > 0 {
				exp = clk.Now().Add(op.ttl).UnixNano()
			}
			w, err := s.AppendPut(op.key, op.value, exp)
			if err == nil {
				err = s.Wait(ctx, w)
			}
			if err != nil {
				maybe[op.key] = &CacheStoreValue{Value: op.value, Version: w.Offset, ExpiresAt: exp}
				return acked, maybe, cfs.Crashed()
			}
			acked[op.key] = CacheStoreValue{Value: op.value, Version: w.Offset, ExpiresAt: exp}
		case "delete":
			if _, _, err := s.Delete(ctx, op.key); err != nil {
				maybe[op.key] = nil
				return acked, maybe, cfs.Crashed()
			}
			delete(acked, op.key)
		case "compact":
			if _, err := s.Compact(ctx); err != nil {
				return acked, maybe, cfs.Crashed()
			}
		case "advance":
			clk.Add(op.advance)
			for k, v := range acked {
				if v.ExpiresAt != 0 && clk.Now().UnixNano() >= v.ExpiresAt {
					delete(acked, k)
				}
			}
		case "sweep":
			if _, err := s.SweepExpired(ctx, clk.Now()); err != nil {
				return acked, maybe, cfs.Crashed()
			}
		}
	}
	return acked, maybe, cfs.Crashed()
}

// TestCacheStoreRecoversFromACrashAtEveryStep: the process is killed at
// every mutating file operation of a script in turn (the files stay as
// they were at that instant, the write in progress torn). The store
// always reopens, every acknowledged write is there with its version
// (the cold key's too, wherever compaction copied it), expiries included,
// and the write in flight is either wholly there or not at all.
func TestCacheStoreRecoversFromACrashAtEveryStep(t *testing.T) {
	root := t.TempDir()
	for step := 0; ; step++ {
		dir := filepath.Join(root, fmt.Sprint(step))
		clk := newStoreClock()
		acked, maybe, crashed := crashRun(t, dir, step, clk)
		o := storeOptions(t, dir)
		o.Now = clk.Now
		s, err := OpenCacheStore(o)
		if err != nil {
			t.Fatalf("crash at step %d: reopen: %v", step, err)
		}
		if err := s.checkIndex(); err != nil {
			t.Fatalf("crash at step %d: %v", step, err)
		}
		for _, k := range []string{"cold", "k0", "k1", "k2", "k3"} {
			got, ok, err := s.Get(context.Background(), k, clk.Now())
			if err != nil {
				t.Fatalf("crash at step %d: get %s: %v", step, k, err)
			}
			want, wantOK := acked[k]
			if m, inFlight := maybe[k]; inFlight {
				if (m == nil && !ok) || (m != nil && ok && bytes.Equal(got.Value, m.Value) && got.Version == m.Version) {
					continue
				}
			}
			if ok != wantOK || (ok && (!bytes.Equal(got.Value, want.Value) || got.Version != want.Version || got.ExpiresAt != want.ExpiresAt)) {
				t.Fatalf("crash at step %d: %s is %+v (%v), acknowledged %+v (%v), in flight %v", step, k, got, ok, want, wantOK, maybe)
			}
		}
		start := s.StartOffset()
		s.Close()
		os.RemoveAll(dir)
		if !crashed && start == 0 {
			t.Fatal("the script's compactions dropped no segment (the cold key was not copied forward)")
		}
		if !crashed {
			if step < 50 {
				t.Fatalf("the script ran through after %d steps: the crash points are not being reached", step)
			}
			t.Logf("crashed at each of %d steps", step)
			return
		}
	}
}

// fuzzStoreRecords are the records FuzzCacheStoreRecovery's log holds.
func fuzzStoreRecords() []cachelog.CacheRecord {
	var recs []cachelog.CacheRecord
	for i := range 14 {
		k := fmt.Sprintf("k%d", i%4)
		switch i % 5 {
		case 2:
			recs = append(recs, cachelog.CacheRecord{Kind: flog.KindCacheCopy, Key: k, Value: []byte(fmt.Sprint("c", i)), Version: uint64(i), ExpiresAt: 7})
		case 3:
			recs = append(recs, cachelog.CacheRecord{Kind: flog.KindCacheTombstone, Key: k})
		case 4:
			recs = append(recs, cachelog.CacheRecord{Kind: flog.KindCacheExpiry, Key: k})
		default:
			recs = append(recs, cachelog.CacheRecord{Kind: flog.KindCachePut, Key: k, Value: []byte(fmt.Sprint("v", i)), ExpiresAt: int64(i % 2)})
		}
	}
	return recs
}

// FuzzCacheStoreRecovery: a cache log cut anywhere and followed by any
// bytes, beside any snapshot file, either opens or is refused with an
// error, never a panic; when it opens, the index is exactly what the
// records it kept say, in order.
func FuzzCacheStoreRecovery(f *testing.F) {
	mem := faultfs.NewMem()
	o := storeOptions(f, "/base")
	o.FS = mem
	s, err := OpenCacheStore(o)
	if err != nil {
		f.Fatal(err)
	}
	recs := fuzzStoreRecords()
	for _, r := range recs {
		e := flog.Entry{Kind: r.Kind, Payload: r.Append(nil)}
		if _, err := s.log.AppendEntries([]flog.Entry{e}, "", 1); err != nil {
			f.Fatal(err)
		}
	}
	s.Close()
	seg, ok := mem.Bytes("/base/log/00000000000000000000.log")
	if !ok {
		f.Fatal("no segment written")
	}
	f.Add(uint16(len(seg)), []byte{}, []byte{})
	f.Add(uint16(len(seg)-3), []byte{0, 0, 0}, []byte{})
	f.Add(uint16(100), seg[100:], []byte("FXCI\x01"))
	f.Add(uint16(len(seg)), []byte{0, 0, 0, 30, 1, 2, 3, 4}, []byte{})
	f.Fuzz(func(t *testing.T, cut uint16, junk, snap []byte) {
		mem := faultfs.NewMem()
		mem.Put("/c/log/00000000000000000000.log", append(append([]byte(nil), seg[:min(int(cut), len(seg))]...), junk...))
		if len(snap) > 0 {
			mem.Put("/c/"+cachelog.SnapshotFile, snap)
		}
		o := storeOptions(t, "/c")
		o.FS = mem
		s, err := OpenCacheStore(o)
		if err != nil {
			return
		}
		defer s.Close()
		if err := s.checkIndex(); err != nil {
			t.Fatal(err)
		}
		kept := s.NextOffset()
		if kept > uint64(len(recs)) || s.snapPoint != 0 {
			return // the junk held valid records, or a valid snapshot: nothing to compare with
		}
		want := map[string]uint64{}
		for i, r := range recs[:kept] {
			if cachelog.HoldsValue(r.Kind) {
				want[r.Key] = uint64(i)
			} else {
				delete(want, r.Key)
			}
		}
		if len(want) != s.Len() {
			t.Fatalf("%d records kept: %d keys, want %d", kept, s.Len(), len(want))
		}
		for k, ver := range want {
			if e := s.index[k]; e.loc != ver {
				t.Fatalf("%d records kept: %s at %d, want %d", kept, k, e.loc, ver)
			}
		}
	})
}
