package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// writeLegacyCatalog writes controlplane.db as the single-node bbolt store
// of earlier releases laid it out: live buckets of catalog items and a
// meta bucket with the bootstrap flag and the signing key.
func writeLegacyCatalog(t *testing.T, path string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	items := map[string]map[string]any{
		"tenants":    {"default": map[string]any{"seq": 1, "op": "put", "tenant": map[string]any{"tenant_id": "default"}}},
		"namespaces": {"default/default": map[string]any{"seq": 1, "op": "put", "namespace": map[string]any{"tenant_id": "default", "namespace": "default"}}},
		"streams": {"default/default/legacy-orders": map[string]any{"seq": 3, "op": "put",
			"stream": map[string]any{"tenant_id": "default", "namespace": "default", "stream": "legacy-orders", "shards": 2}}},
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for bucket, kv := range items {
			b, err := tx.CreateBucketIfNotExists([]byte(bucket))
			if err != nil {
				return err
			}
			for k, v := range kv {
				raw, _ := json.Marshal(v)
				if err := b.Put([]byte(k), raw); err != nil {
					return err
				}
			}
		}
		meta, err := tx.CreateBucketIfNotExists([]byte("meta"))
		if err != nil {
			return err
		}
		if err := meta.Put([]byte("bootstrapped"), []byte("2025-01-01T00:00:00Z")); err != nil {
			return err
		}
		return meta.Put([]byte("signing_key"), keyPEM)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A data directory from a release with the single-node catalog file is
// moved into the Raft store once, on the first start, and says so.
func TestRaftMigratesLegacyCatalog(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "felix-data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	writeLegacyCatalog(t, filepath.Join(data, "controlplane.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	n := startServeIn(t, dir)
	if !strings.Contains(n.stderr.String(), "moved the single-node catalog into the Raft store") {
		t.Fatalf("no migration message in the log:\n%s", n.stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "controlplane.db.migrated")); err != nil {
		t.Fatalf("old file not renamed: %v", err)
	}
	out := n.mustFelix(ctx, "admin", "stream", "get", "legacy-orders", "-o", "json")
	if !strings.Contains(out, `"shards": 2`) && !strings.Contains(out, `"shards":2`) {
		t.Fatalf("migrated stream: %s", out)
	}
	if strings.Contains(n.stderr.String(), "bootstrapped the catalog") {
		t.Fatal("bootstrapped again over a migrated catalog")
	}
	if err := n.stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatal(err)
	}

	n = startServeIn(t, dir)
	if strings.Contains(n.stderr.String(), "moved the single-node catalog") {
		t.Fatal("migrated a second time")
	}
	n.mustFelix(ctx, "admin", "stream", "get", "legacy-orders")
}
