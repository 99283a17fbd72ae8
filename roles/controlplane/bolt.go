package controlplane

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/felixmq/felix/wire"
)

// DefaultChangeLogKeep is how many change-log entries a BoltStore keeps per
// kind before trimming the oldest.
const DefaultChangeLogKeep = 10000

var (
	metaBucket = []byte("meta")
	// liveBuckets hold each kind's live resources: resource path -> the
	// CatalogItem (Op put) that last wrote it.
	liveBuckets = map[wire.CatalogKind][]byte{
		wire.KindTenants:    []byte("tenants"),
		wire.KindNamespaces: []byte("namespaces"),
		wire.KindStreams:    []byte("streams"),
		wire.KindCaches:     []byte("caches"),
	}
	// logBuckets hold each kind's change log: 8-byte big-endian sequence
	// number -> CatalogItem. The bucket's own sequence is the kind's
	// counter. Invariant: the kept keys are contiguous and end at the
	// bucket sequence.
	logBuckets = map[wire.CatalogKind][]byte{
		wire.KindTenants:    []byte("log/tenants"),
		wire.KindNamespaces: []byte("log/namespaces"),
		wire.KindStreams:    []byte("log/streams"),
		wire.KindCaches:     []byte("log/caches"),
	}
)

// BoltStore is a Store in one bbolt file.
type BoltStore struct {
	db   *bolt.DB
	keep uint64 // change-log entries kept per kind
}

// BoltOption adjusts a BoltStore at open.
type BoltOption func(*BoltStore)

// WithChangeLogKeep sets how many change-log entries are kept per kind
// (default DefaultChangeLogKeep; values below 1 are raised to 1).
func WithChangeLogKeep(n int) BoltOption {
	return func(s *BoltStore) { s.keep = uint64(max(n, 1)) }
}

// OpenBoltStore opens (creating if needed) the bbolt file at path. It fails
// rather than waiting when another process holds the file.
func OpenBoltStore(path string, opts ...BoltOption) (*BoltStore, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("controlplane store %s: %w", path, err)
	}
	s := &BoltStore{db: db, keep: DefaultChangeLogKeep}
	for _, o := range opts {
		o(s)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		names := [][]byte{metaBucket}
		for _, k := range wire.CatalogKinds {
			names = append(names, liveBuckets[k], logBuckets[k])
		}
		for _, n := range names {
			if _, err := tx.CreateBucketIfNotExists(n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("controlplane store %s: %w", path, err)
	}
	return s, nil
}

// Close closes the file.
func (s *BoltStore) Close() error { return s.db.Close() }

// Meta implements Store.
func (s *BoltStore) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	var out []byte
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if v := tx.Bucket(metaBucket).Get([]byte(key)); v != nil {
			out = append([]byte{}, v...)
		}
		return nil
	})
	return out, out != nil, err
}

// PutMeta implements Store.
func (s *BoltStore) PutMeta(ctx context.Context, key string, v []byte) error {
	return s.update(ctx, func(w *writer) error {
		return w.tx.Bucket(metaBucket).Put([]byte(key), v)
	})
}

// PutMetaIfAbsent implements Store.
func (s *BoltStore) PutMetaIfAbsent(ctx context.Context, key string, v []byte) ([]byte, error) {
	out := v
	err := s.update(ctx, func(w *writer) error {
		b := w.tx.Bucket(metaBucket)
		if cur := b.Get([]byte(key)); cur != nil {
			out = append([]byte{}, cur...)
			return nil
		}
		return b.Put([]byte(key), v)
	})
	return out, err
}

// Bootstrap implements Store.
func (s *BoltStore) Bootstrap(ctx context.Context, flag string, t wire.Tenant, ns wire.Namespace) (bool, error) {
	created := false
	err := s.update(ctx, func(w *writer) error {
		mb := w.tx.Bucket(metaBucket)
		if mb.Get([]byte(flag)) != nil {
			return nil
		}
		if !w.exists(wire.KindTenants, tenantKey(t.TenantID)) {
			if err := w.put(wire.KindTenants, tenantKey(t.TenantID), wire.CatalogItem{Tenant: &t}); err != nil {
				return err
			}
		}
		if !w.exists(wire.KindNamespaces, nsKey(ns)) {
			if err := w.put(wire.KindNamespaces, nsKey(ns), wire.CatalogItem{Namespace: &ns}); err != nil {
				return err
			}
		}
		created = true
		return mb.Put([]byte(flag), []byte(time.Now().UTC().Format(time.RFC3339)))
	})
	return created && err == nil, err
}

func (s *BoltStore) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

func (s *BoltStore) update(ctx context.Context, fn func(w *writer) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return fn(&writer{tx: tx, keep: s.keep}) })
}

// writer performs catalog mutations inside one read-write transaction,
// keeping each live bucket and its change log in step.
type writer struct {
	tx   *bolt.Tx
	keep uint64
}

func (w *writer) exists(kind wire.CatalogKind, key string) bool {
	return w.tx.Bucket(liveBuckets[kind]).Get([]byte(key)) != nil
}

// put stores item (whose resource pointer matches kind) under key and
// records the change.
func (w *writer) put(kind wire.CatalogKind, key string, item wire.CatalogItem) error {
	item.Op = wire.OpPut
	seq, err := w.appendChange(kind, item)
	if err != nil {
		return err
	}
	item.Seq = seq
	b, err := json.Marshal(item)
	if err != nil {
		return err
	}
	return w.tx.Bucket(liveBuckets[kind]).Put([]byte(key), b)
}

// remove deletes key and records the removal with the resource's last
// value. It reports whether the key existed.
func (w *writer) remove(kind wire.CatalogKind, key string) (bool, error) {
	live := w.tx.Bucket(liveBuckets[kind])
	raw := live.Get([]byte(key))
	if raw == nil {
		return false, nil
	}
	item, err := decodeItem(raw)
	if err != nil {
		return false, fmt.Errorf("%s %q: %w", kind, key, err)
	}
	item.Op = wire.OpDelete
	if _, err := w.appendChange(kind, item); err != nil {
		return false, err
	}
	return true, live.Delete([]byte(key))
}

// removePrefix removes every key of kind under prefix.
func (w *writer) removePrefix(kind wire.CatalogKind, prefix string) error {
	keys := w.keysWithPrefix(kind, prefix)
	for _, k := range keys {
		if _, err := w.remove(kind, k); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) keysWithPrefix(kind wire.CatalogKind, prefix string) []string {
	var keys []string
	c := w.tx.Bucket(liveBuckets[kind]).Cursor()
	p := []byte(prefix)
	for k, _ := c.Seek(p); k != nil && hasPrefix(k, p); k, _ = c.Next() {
		keys = append(keys, string(k))
	}
	return keys
}

// appendChange writes item to kind's change log under the next sequence
// number and trims the log to w.keep entries.
func (w *writer) appendChange(kind wire.CatalogKind, item wire.CatalogItem) (uint64, error) {
	lb := w.tx.Bucket(logBuckets[kind])
	seq, err := lb.NextSequence()
	if err != nil {
		return 0, err
	}
	item.Seq = seq
	b, err := json.Marshal(item)
	if err != nil {
		return 0, err
	}
	if err := lb.Put(seqKey(seq), b); err != nil {
		return 0, err
	}
	return seq, trimLog(lb, seq, w.keep)
}

// trimLog deletes the oldest entries so at most keep remain. Keys are
// contiguous up to seq, so the first key tells how many there are.
func trimLog(lb *bolt.Bucket, seq, keep uint64) error {
	var drop [][]byte
	c := lb.Cursor()
	for k, _ := c.First(); k != nil && len(k) == 8; k, _ = c.Next() {
		if seq-binary.BigEndian.Uint64(k)+1 <= keep {
			break
		}
		drop = append(drop, append([]byte{}, k...))
	}
	for _, k := range drop {
		if err := lb.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func hasPrefix(b, p []byte) bool { return len(b) >= len(p) && string(b[:len(p)]) == string(p) }

// decodeItem parses a stored CatalogItem. A corrupt value is an error,
// never a panic.
func decodeItem(raw []byte) (wire.CatalogItem, error) {
	var it wire.CatalogItem
	if err := json.Unmarshal(raw, &it); err != nil {
		return it, fmt.Errorf("corrupt catalog entry: %w", err)
	}
	return it, nil
}
