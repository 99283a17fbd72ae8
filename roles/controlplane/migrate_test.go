package controlplane

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/felixmq/felix/wire"
)

// writeLegacyCatalog writes a catalog file the way the single-node bbolt
// store of earlier releases laid it out.
func writeLegacyCatalog(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	must(t, err)
	defer db.Close()
	put := func(tx *bolt.Tx, bucket, key string, v any) {
		b, err := tx.CreateBucketIfNotExists([]byte(bucket))
		must(t, err)
		raw, ok := v.([]byte)
		if !ok {
			raw, err = json.Marshal(v)
			must(t, err)
		}
		must(t, b.Put([]byte(key), raw))
	}
	must(t, db.Update(func(tx *bolt.Tx) error {
		put(tx, "tenants", "acme", wire.CatalogItem{Seq: 1, Op: wire.OpPut, Tenant: &wire.Tenant{TenantID: "acme"}})
		put(tx, "namespaces", "acme/prod", wire.CatalogItem{Seq: 1, Op: wire.OpPut, Namespace: &wire.Namespace{TenantID: "acme", Namespace: "prod"}})
		put(tx, "streams", "acme/prod/orders", wire.CatalogItem{Seq: 7, Op: wire.OpPut, Stream: &wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: "orders", Shards: 4}})
		put(tx, "caches", "acme/prod/sessions", wire.CatalogItem{Seq: 2, Op: wire.OpPut, Cache: &wire.CacheSpec{TenantID: "acme", Namespace: "prod", Cache: "sessions"}})
		put(tx, "meta", metaBootstrapped, []byte("2025-01-01T00:00:00Z"))
		put(tx, "meta", "signing_key", []byte("old-key-pem"))
		_, err := tx.CreateBucketIfNotExists([]byte("log/streams"))
		return err
	}))
}

func TestMigrateLegacyCatalogOnce(t *testing.T) {
	dataDir := t.TempDir()
	legacy := filepath.Join(dataDir, LegacyCatalogFile)
	writeLegacyCatalog(t, legacy)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	s := openTestRaft(t, filepath.Join(dataDir, "raft"))
	defer s.Close()
	must(t, MigrateLegacyCatalog(bg, s, legacy, log))
	if !strings.Contains(logs.String(), "moved the single-node catalog into the Raft store") || !strings.Contains(logs.String(), "streams=1") {
		t.Fatalf("log = %s", logs.String())
	}
	if _, err := os.Stat(legacy + ".migrated"); err != nil {
		t.Fatalf("old file not renamed: %v", err)
	}
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Fatalf("old file still there: %v", err)
	}
	sp, ok, err := s.Stream(bg, "acme", "prod", "orders")
	must(t, err)
	if !ok || sp.Shards != 4 {
		t.Fatalf("migrated stream = %+v, %v", sp, ok)
	}
	if v, ok, _ := s.Meta(bg, "signing_key"); !ok || string(v) != "old-key-pem" {
		t.Fatalf("migrated signing key = %q", v)
	}
	created, err := s.Bootstrap(bg, metaBootstrapped, wire.Tenant{TenantID: "default"}, wire.Namespace{TenantID: "default", Namespace: "default"})
	must(t, err)
	if created {
		t.Fatal("bootstrap ran again after migrating a bootstrapped catalog")
	}

	// A second legacy file (e.g. restored by hand) is not loaded over a
	// store that has a catalog.
	writeLegacyCatalog(t, legacy)
	logs.Reset()
	must(t, MigrateLegacyCatalog(bg, s, legacy, log))
	if !strings.Contains(logs.String(), "not moving") {
		t.Fatalf("log = %s", logs.String())
	}
	// No file: nothing to do.
	must(t, MigrateLegacyCatalog(bg, s, filepath.Join(dataDir, "none.db"), log))
}
