package controlplane

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/felixmq/felix/wire"
)

func openBolt(t *testing.T, path string, opts ...BoltOption) *BoltStore {
	t.Helper()
	s, err := OpenBoltStore(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBoltStateSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.db")
	s := openBolt(t, path)
	seedNamespace(t, s, "acme", "prod")
	must(t, s.CreateStream(bg, wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: "orders", Shards: 3}))
	must(t, s.PutMeta(bg, "k", []byte("v")))
	must(t, s.Close())

	s = openBolt(t, path)
	defer s.Close()
	sp, ok, err := s.Stream(bg, "acme", "prod", "orders")
	must(t, err)
	if !ok || sp.Shards != 3 {
		t.Fatalf("after reopen: %+v, %v", sp, ok)
	}
	if v, ok, _ := s.Meta(bg, "k"); !ok || string(v) != "v" {
		t.Fatalf("meta after reopen: %q", v)
	}
	// The counter continues where it was.
	must(t, s.CreateStream(bg, wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: "more", Shards: 1}))
	p, err := s.Changes(bg, wire.KindStreams, 1, 0)
	must(t, err)
	if len(p.Items) != 1 || p.Items[0].Seq != 2 {
		t.Fatalf("changes after reopen = %+v", p)
	}
}

func TestBoltChangeLogTrimResets(t *testing.T) {
	s := openBolt(t, filepath.Join(t.TempDir(), "cp.db"), WithChangeLogKeep(3))
	defer s.Close()
	for _, id := range []string{"a", "b", "c", "d", "e"} { // seqs 1..5; 3,4,5 kept
		must(t, s.CreateTenant(bg, wire.Tenant{TenantID: id}))
	}
	p, err := s.Changes(bg, wire.KindTenants, 1, 0)
	must(t, err)
	if !p.Reset || len(p.Items) != 0 || p.Seq != 5 {
		t.Fatalf("changes since a trimmed cursor = %+v, want reset", p)
	}
	p, err = s.Changes(bg, wire.KindTenants, 2, 0) // next wanted is 3: still kept
	must(t, err)
	if p.Reset || len(p.Items) != 3 || p.Items[0].Seq != 3 || p.Seq != 5 {
		t.Fatalf("changes since 2 = %+v", p)
	}
	// A reader that resets re-snapshots and continues.
	snap, err := s.Snapshot(bg, wire.KindTenants)
	must(t, err)
	if len(snap.Items) != 5 || snap.Seq != 5 {
		t.Fatalf("snapshot = %+v", snap)
	}
}

func TestBoltCorruptEntryIsAnError(t *testing.T) {
	s := openBolt(t, filepath.Join(t.TempDir(), "cp.db"))
	defer s.Close()
	must(t, s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(liveBuckets[wire.KindTenants]).Put([]byte("bad"), []byte("{not json"))
	}))
	if _, _, err := s.Tenant(bg, "bad"); err == nil {
		t.Fatal("corrupt tenant read without error")
	}
	if _, err := s.Snapshot(bg, wire.KindTenants); err == nil {
		t.Fatal("corrupt snapshot without error")
	}
}
