package catalog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/felixmq/felix/wire"
)

// parentRef names the resource a write needs to exist first.
type parentRef struct {
	kind wire.CatalogKind
	key  string
}

func tenantParent(t string) parentRef { return parentRef{kind: wire.KindTenants, key: t} }
func namespaceParent(t, ns string) parentRef {
	return parentRef{kind: wire.KindNamespaces, key: CatalogKey(t, ns)}
}

// what names a resource for messages, e.g. `stream "acme/prod/orders"`.
func what(kind wire.CatalogKind, key string) string {
	name := map[wire.CatalogKind]string{wire.KindTenants: "tenant", wire.KindNamespaces: "namespace",
		wire.KindStreams: "stream", wire.KindCaches: "cache", wire.KindRevocations: "revocation"}[kind]
	return fmt.Sprintf("%s %q", name, key)
}

// childKinds are the kinds that live under a tenant or namespace and
// block its non-recursive delete.
func childKinds(kind wire.CatalogKind) []wire.CatalogKind {
	switch kind {
	case wire.KindTenants:
		return []wire.CatalogKind{wire.KindStreams, wire.KindCaches, wire.KindNamespaces}
	case wire.KindNamespaces:
		return []wire.CatalogKind{wire.KindStreams, wire.KindCaches}
	}
	return nil
}

func feedKind(k wire.CatalogKind) bool {
	for _, x := range FeedKinds {
		if x == k {
			return true
		}
	}
	return false
}

// writer performs catalog mutations inside one read-write transaction,
// keeping each live bucket and its change log in step.
type writer struct {
	tx   *bolt.Tx
	keep uint64
	// importing keeps the incarnations the written resources carry.
	importing bool
}

func (w *writer) exists(kind wire.CatalogKind, key string) bool {
	return w.tx.Bucket(liveBucket(kind)).Get([]byte(key)) != nil
}

// put stores item under key and records the change.
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
	return w.tx.Bucket(liveBucket(kind)).Put([]byte(key), b)
}

// remove deletes key and records the removal with the resource's last
// value. It reports whether the key existed.
func (w *writer) remove(kind wire.CatalogKind, key string) (bool, error) {
	live := w.tx.Bucket(liveBucket(kind))
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
	for _, k := range keysWithPrefix(w.tx.Bucket(liveBucket(kind)), prefix) {
		if _, err := w.remove(kind, k); err != nil {
			return err
		}
	}
	return nil
}

func keysWithPrefix(b *bolt.Bucket, prefix string) []string {
	var keys []string
	c := b.Cursor()
	p := []byte(prefix)
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
		keys = append(keys, string(k))
	}
	return keys
}

// appendChange writes item to kind's change log under the next sequence
// number and trims the log to w.keep entries.
func (w *writer) appendChange(kind wire.CatalogKind, item wire.CatalogItem) (uint64, error) {
	lb := w.tx.Bucket(logBucket(kind))
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
		drop = append(drop, bytes.Clone(k))
	}
	for _, k := range drop {
		if err := lb.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// decodeItem parses a stored CatalogItem. A corrupt value is an error,
// never a panic.
func decodeItem(raw []byte) (wire.CatalogItem, error) {
	var it wire.CatalogItem
	if err := json.Unmarshal(raw, &it); err != nil {
		return it, fmt.Errorf("corrupt catalog entry: %w", err)
	}
	return it, nil
}

// write is one resource mutation under the rules of mode.
func (w *writer) write(kind wire.CatalogKind, mode WriteMode, item wire.CatalogItem) error {
	if !feedKind(kind) {
		return badCommand(fmt.Sprintf("unknown kind %q", kind))
	}
	key, parent, ok := itemKey(kind, &item)
	if !ok {
		return badCommand(fmt.Sprintf("item does not hold a %s resource", kind))
	}
	if parent.kind != "" && !w.exists(parent.kind, parent.key) {
		return notFound(what(parent.kind, parent.key) + " does not exist")
	}
	has := w.exists(kind, key)
	switch {
	case mode == ModeCreate && has:
		return conflict(what(kind, key) + " already exists")
	case mode == ModeUpdate && !has:
		return notFound(what(kind, key) + " does not exist")
	case mode != ModeCreate && mode != ModePut && mode != ModeUpdate:
		return badCommand(fmt.Sprintf("unknown mode %q", mode))
	}
	if err := w.stampIncarnation(kind, key, has, &item); err != nil {
		return err
	}
	return w.put(kind, key, item)
}

func (w *writer) applyWrite(cmd catalogCmd) error {
	if cmd.Item == nil {
		return badCommand("write without item")
	}
	return w.write(cmd.Kind, cmd.Mode, *cmd.Item)
}

// applyDelete removes a resource; a tenant or namespace must be empty
// unless recursive. A tenant's revocations and RBAC records go with it.
func (w *writer) applyDelete(cmd catalogCmd) error {
	kind, key := cmd.Kind, cmd.Key
	if !feedKind(kind) || key == "" {
		return badCommand("delete needs a known kind and a key")
	}
	if !w.exists(kind, key) {
		return notFound(what(kind, key) + " does not exist")
	}
	prefix := key + "/"
	children := childKinds(kind)
	if !cmd.Recursive {
		if held := w.describeChildren(children, prefix); held != "" {
			return conflict(fmt.Sprintf("%s still holds %s; delete them first or pass recursive=true", what(kind, key), held))
		}
	}
	for _, ck := range children {
		if err := w.removePrefix(ck, prefix); err != nil {
			return err
		}
	}
	if kind == wire.KindTenants {
		if err := w.removeTenantExtras(prefix); err != nil {
			return err
		}
	}
	_, err := w.remove(kind, key)
	return err
}

func (w *writer) removeTenantExtras(prefix string) error {
	if err := w.removePrefix(wire.KindRevocations, prefix); err != nil {
		return err
	}
	for _, name := range []string{RecordPolicies, RecordAssignments} {
		b := w.tx.Bucket(recordBuckets[name])
		for _, k := range keysWithPrefix(b, prefix) {
			if err := b.Delete([]byte(k)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *writer) describeChildren(kinds []wire.CatalogKind, prefix string) string {
	var parts []string
	for _, k := range kinds {
		if n := len(keysWithPrefix(w.tx.Bucket(liveBucket(k)), prefix)); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return strings.Join(parts, ", ")
}
