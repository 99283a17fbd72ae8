package raftmeta

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/felixmq/felix/raftmeta/fsm"
)

func openTestKV(t *testing.T) *KV {
	t.Helper()
	kv, err := OpenKV(filepath.Join(t.TempDir(), "kv.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	return kv
}

func snapshotBytes(t testing.TB, sm StateMachine) ([]byte, uint64) {
	t.Helper()
	rc, idx, err := sm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b, idx
}

func kvScript() [][]byte {
	var cmds [][]byte
	for i := range 300 {
		k := []byte(fmt.Sprintf("key-%03d", i%97))
		switch i % 5 {
		case 0, 1, 2:
			cmds = append(cmds, KVPut(k, bytes.Repeat([]byte{byte(i)}, i%50)))
		case 3:
			cmds = append(cmds, KVDelete(k))
		case 4:
			cmds = append(cmds, KVCAS(k, nil, []byte("fresh")))
		}
	}
	return append(cmds, []byte{0xff}, nil) // malformed commands are deterministic errors too
}

func TestKVCommands(t *testing.T) {
	kv := openTestKV(t)
	if _, err := kv.Apply(1, KVPut([]byte("a"), []byte("1"))); err != nil {
		t.Fatal(err)
	}
	prev, err := kv.Apply(2, KVCAS([]byte("a"), []byte("1"), []byte("2")))
	if err != nil || string(prev) != "1" {
		t.Fatalf("cas: %q %v", prev, err)
	}
	if _, err := kv.Apply(3, KVCAS([]byte("a"), []byte("1"), []byte("3"))); !errors.Is(err, ErrKVCASMismatch) {
		t.Fatalf("stale cas: %v", err)
	}
	if _, err := kv.Apply(4, KVDelete([]byte("zz"))); !errors.Is(err, ErrKVNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
	if kv.AppliedIndex() != 4 {
		t.Fatalf("deterministic errors must advance the applied index: %d", kv.AppliedIndex())
	}
	if _, err := kv.Apply(4, KVPut([]byte("a"), []byte("again"))); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := kv.Get([]byte("a")); string(v) != "2" {
		t.Fatalf("re-applied index changed state: %q", v)
	}
	if _, err := kv.Apply(5, []byte{kvOpPut, 200}); !errors.Is(err, ErrKVBadCommand) {
		t.Fatalf("malformed: %v", err)
	}
}

func TestKVSnapshotsAreDeterministic(t *testing.T) {
	a, b := openTestKV(t), openTestKV(t)
	for i, cmd := range kvScript() {
		ra, ea := a.Apply(uint64(i+1), cmd)
		rb, eb := b.Apply(uint64(i+1), cmd)
		if !bytes.Equal(ra, rb) || fmt.Sprint(ea) != fmt.Sprint(eb) {
			t.Fatalf("command %d: results differ: %q/%v vs %q/%v", i, ra, ea, rb, eb)
		}
		if i == 150 {
			// A snapshot taken midway (an open read) must not change later bytes.
			snapshotBytes(t, a)
		}
	}
	sa, ia := snapshotBytes(t, a)
	sb, ib := snapshotBytes(t, b)
	if ia != ib || !bytes.Equal(sa, sb) {
		t.Fatalf("snapshots differ: index %d/%d, %d/%d bytes", ia, ib, len(sa), len(sb))
	}
}

func TestKVRestore(t *testing.T) {
	a, b := openTestKV(t), openTestKV(t)
	for i, cmd := range kvScript() {
		a.Apply(uint64(i+1), cmd)
	}
	b.Apply(1, KVPut([]byte("stale"), []byte("x")))
	sa, _ := snapshotBytes(t, a)
	if err := b.Restore(bytes.NewReader(sa)); err != nil {
		t.Fatal(err)
	}
	if b.AppliedIndex() != a.AppliedIndex() {
		t.Fatalf("applied %d, want %d", b.AppliedIndex(), a.AppliedIndex())
	}
	if _, ok, _ := b.Get([]byte("stale")); ok {
		t.Fatal("restore kept old state")
	}
	sb, _ := snapshotBytes(t, b)
	if !bytes.Equal(sa, sb) {
		t.Fatal("restored state differs")
	}
	// A corrupt snapshot is refused and leaves the state untouched.
	bad := bytes.Clone(sa)
	bad[len(bad)/2] ^= 0x55
	if err := b.Restore(bytes.NewReader(bad)); err == nil {
		t.Fatal("corrupt snapshot accepted")
	}
	for _, cut := range []int{0, 3, len(sa) / 3, len(sa) - 1} {
		if err := b.Restore(bytes.NewReader(sa[:cut])); !errors.Is(err, fsm.ErrBadSnapshot) {
			t.Fatalf("truncated at %d: %v", cut, err)
		}
	}
	if sc, _ := snapshotBytes(t, b); !bytes.Equal(sa, sc) {
		t.Fatal("failed restore changed the state")
	}
}

func FuzzRestoreBoltSnapshot(f *testing.F) {
	kv, err := OpenKV(filepath.Join(f.TempDir(), "seed.db"))
	if err != nil {
		f.Fatal(err)
	}
	for i, cmd := range kvScript()[:20] {
		kv.Apply(uint64(i+1), cmd)
	}
	rc, _, _ := kv.Snapshot()
	seed, _ := io.ReadAll(rc)
	rc.Close()
	kv.Close()
	f.Add(seed)
	f.Add([]byte("FXBS1\nZ")) // the format's magic and an end mark
	target, err := OpenKV(filepath.Join(f.TempDir(), "target.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { target.Close() })
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = target.Restore(bytes.NewReader(b)) // must not panic
	})
}

// AppliedIndex is the index of the last committed write: read from the
// file at open, unchanged by a write that failed, and still true after
// Close, when the file cannot be read any more.
func TestKVAppliedIndexAcrossReopenAndClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.db")
	kv, err := OpenKV(path, KVNoSync())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Apply(3, KVPut([]byte("a"), []byte("1"))); err != nil {
		t.Fatal(err)
	}
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Apply(4, KVPut([]byte("a"), []byte("2"))); err == nil {
		t.Fatal("Apply after Close succeeded")
	}
	if got := kv.AppliedIndex(); got != 3 {
		t.Fatalf("applied index after a failed apply and Close = %d, want 3", got)
	}
	kv, err = OpenKV(path, KVNoSync())
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	if got := kv.AppliedIndex(); got != 3 {
		t.Fatalf("applied index after reopen = %d, want 3", got)
	}
}
