package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/felixmq/felix/wire"
)

func (w *writer) applyPutMeta(cmd catalogCmd) error {
	if cmd.Key == "" || cmd.Value == nil {
		return badCommand("meta needs a key and a value")
	}
	return w.tx.Bucket(catMetaBucket).Put([]byte(cmd.Key), cmd.Value)
}

func (w *writer) applyPutMetaIfAbsent(cmd catalogCmd) ([]byte, error) {
	if cmd.Key == "" || cmd.Value == nil {
		return nil, badCommand("meta needs a key and a value")
	}
	b := w.tx.Bucket(catMetaBucket)
	if cur := b.Get([]byte(cmd.Key)); cur != nil {
		return bytes.Clone(cur), nil
	}
	return cmd.Value, b.Put([]byte(cmd.Key), cmd.Value)
}

// applyBootstrap creates the tenant and namespace (each only if missing)
// and sets the flag, unless the flag is already set.
func (w *writer) applyBootstrap(cmd catalogCmd) ([]byte, error) {
	if cmd.Key == "" || cmd.Value == nil || cmd.Tenant == nil || cmd.Namespace == nil {
		return nil, badCommand("bootstrap needs a flag, a stamp, a tenant and a namespace")
	}
	mb := w.tx.Bucket(catMetaBucket)
	if mb.Get([]byte(cmd.Key)) != nil {
		return []byte(resultFalse), nil
	}
	if err := w.writeIfMissing(wire.KindTenants, wire.CatalogItem{Tenant: cmd.Tenant}); err != nil {
		return nil, err
	}
	if err := w.writeIfMissing(wire.KindNamespaces, wire.CatalogItem{Namespace: cmd.Namespace}); err != nil {
		return nil, err
	}
	return []byte(resultTrue), mb.Put([]byte(cmd.Key), cmd.Value)
}

func (w *writer) writeIfMissing(kind wire.CatalogKind, it wire.CatalogItem) error {
	key, _, ok := itemKey(kind, &it)
	if !ok {
		return badCommand("bootstrap resource is incomplete")
	}
	if w.exists(kind, key) {
		return nil
	}
	return w.write(kind, ModePut, it)
}

// applyBatch creates every stream and cache of one namespace, or nothing.
func (w *writer) applyBatch(b *Batch) ([]byte, error) {
	if b == nil || b.Tenant == "" || b.Namespace == "" {
		return nil, badCommand("batch needs a tenant and a namespace")
	}
	if n := len(b.Streams) + len(b.Caches); n == 0 || n > batchMaxItems {
		return nil, badCommand(fmt.Sprintf("batch holds %d resources; want 1 to %d", n, batchMaxItems))
	}
	if len(b.IdempotencyKey) > maxIdempotencyLn {
		return nil, badCommand("idempotency key too long")
	}
	digest := batchDigest(b)
	idemKey := []byte(CatalogKey(b.Tenant, b.Namespace, b.IdempotencyKey))
	if b.IdempotencyKey != "" {
		if prev := w.tx.Bucket(catIdemBucket).Get(idemKey); prev != nil {
			if !bytes.Equal(prev, digest) {
				return nil, conflict(fmt.Sprintf("idempotency key %q was used for a different batch", b.IdempotencyKey))
			}
			return []byte(resultReplayed), nil
		}
	}
	for _, s := range b.Streams {
		if s.TenantID != b.Tenant || s.Namespace != b.Namespace {
			return nil, badCommand(fmt.Sprintf("stream %q is not in %s/%s", s.Stream, b.Tenant, b.Namespace))
		}
		if err := w.write(wire.KindStreams, ModeCreate, wire.CatalogItem{Stream: &s}); err != nil {
			return nil, err
		}
	}
	for _, c := range b.Caches {
		if c.TenantID != b.Tenant || c.Namespace != b.Namespace {
			return nil, badCommand(fmt.Sprintf("cache %q is not in %s/%s", c.Cache, b.Tenant, b.Namespace))
		}
		if err := w.write(wire.KindCaches, ModeCreate, wire.CatalogItem{Cache: &c}); err != nil {
			return nil, err
		}
	}
	if b.IdempotencyKey == "" {
		return nil, nil
	}
	return nil, w.rememberIdempotency(idemKey, digest)
}

func batchDigest(b *Batch) []byte {
	raw, _ := json.Marshal(b) // a Batch always marshals
	sum := sha256.Sum256(raw)
	return sum[:]
}

// rememberIdempotency records key, forgetting the oldest keys beyond
// maxIdempotencyKeys.
func (w *writer) rememberIdempotency(key, digest []byte) error {
	lb := w.tx.Bucket(catIdemLog)
	seq, err := lb.NextSequence()
	if err != nil {
		return err
	}
	if err := lb.Put(seqKey(seq), key); err != nil {
		return err
	}
	if err := w.tx.Bucket(catIdemBucket).Put(key, digest); err != nil {
		return err
	}
	if seq <= maxIdempotencyKeys {
		return nil
	}
	old := seqKey(seq - maxIdempotencyKeys)
	if k := lb.Get(old); k != nil {
		if err := w.tx.Bucket(catIdemBucket).Delete(bytes.Clone(k)); err != nil {
			return err
		}
	}
	return lb.Delete(old)
}

// applyRecord puts or deletes an RBAC record; a put needs its tenant.
func (w *writer) applyRecord(cmd catalogCmd) error {
	b := recordBuckets[cmd.Bucket]
	tenant, _, ok := strings.Cut(cmd.Key, "/")
	if b == nil || !ok || tenant == "" {
		return badCommand(fmt.Sprintf("record %q in bucket %q", cmd.Key, cmd.Bucket))
	}
	bucket := w.tx.Bucket(b)
	if cmd.Op == opDeleteRecord {
		if bucket.Get([]byte(cmd.Key)) == nil {
			return notFound(fmt.Sprintf("%s %q does not exist", strings.TrimSuffix(cmd.Bucket, "s"), cmd.Key))
		}
		return bucket.Delete([]byte(cmd.Key))
	}
	if cmd.Value == nil {
		return badCommand("record without a value")
	}
	if !w.exists(wire.KindTenants, tenant) {
		return notFound(what(wire.KindTenants, tenant) + " does not exist")
	}
	return bucket.Put([]byte(cmd.Key), cmd.Value)
}

// applyImport loads a whole catalog into an empty one.
func (w *writer) applyImport(imp *Import) ([]byte, error) {
	if imp == nil {
		return nil, badCommand("import without data")
	}
	if k, _ := w.tx.Bucket(catMetaBucket).Cursor().First(); k != nil {
		return []byte(resultFalse), nil
	}
	if k, _ := w.tx.Bucket(liveBucket(wire.KindTenants)).Cursor().First(); k != nil {
		return []byte(resultFalse), nil
	}
	w.importing = true
	defer func() { w.importing = false }()
	for _, t := range imp.Tenants {
		if err := w.write(wire.KindTenants, ModePut, wire.CatalogItem{Tenant: &t}); err != nil {
			return nil, err
		}
	}
	for _, n := range imp.Namespaces {
		if err := w.write(wire.KindNamespaces, ModePut, wire.CatalogItem{Namespace: &n}); err != nil {
			return nil, err
		}
	}
	for _, s := range imp.Streams {
		if err := w.write(wire.KindStreams, ModePut, wire.CatalogItem{Stream: &s}); err != nil {
			return nil, err
		}
	}
	for _, c := range imp.Caches {
		if err := w.write(wire.KindCaches, ModePut, wire.CatalogItem{Cache: &c}); err != nil {
			return nil, err
		}
	}
	mb := w.tx.Bucket(catMetaBucket)
	for k, v := range imp.Meta { // map order does not matter: bbolt sorts keys
		if k == "" || v == nil {
			continue
		}
		if err := mb.Put([]byte(k), v); err != nil {
			return nil, err
		}
	}
	return []byte(resultTrue), nil
}
