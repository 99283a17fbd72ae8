package catalog

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/felixmq/felix/wire"
)

// MaxChangesLimit bounds a page of changes.
const MaxChangesLimit = 10000

// Item returns the live resource of kind at key.
func (c *Catalog) Item(kind wire.CatalogKind, key string) (wire.CatalogItem, bool, error) {
	var (
		it wire.CatalogItem
		ok bool
	)
	if !feedKind(kind) {
		return it, false, fmt.Errorf("unknown catalog kind %q", kind)
	}
	err := c.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(liveBucket(kind)).Get([]byte(key))
		if raw == nil {
			return nil
		}
		var err error
		it, err = decodeItem(raw)
		ok = err == nil
		return err
	})
	return it, ok, err
}

// Items returns every live resource of kind whose key starts with prefix,
// in key order.
func (c *Catalog) Items(kind wire.CatalogKind, prefix string) ([]wire.CatalogItem, error) {
	if !feedKind(kind) {
		return nil, fmt.Errorf("unknown catalog kind %q", kind)
	}
	var out []wire.CatalogItem
	err := c.db.View(func(tx *bolt.Tx) error {
		cur := tx.Bucket(liveBucket(kind)).Cursor()
		p := []byte(prefix)
		for k, v := cur.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = cur.Next() {
			it, err := decodeItem(v)
			if err != nil {
				return fmt.Errorf("%s %q: %w", kind, k, err)
			}
			out = append(out, it)
		}
		return nil
	})
	return out, err
}

// KindSnapshot returns every live resource of kind (Op put) and the kind's
// current sequence number, read in one transaction.
func (c *Catalog) KindSnapshot(kind wire.CatalogKind) (*wire.CatalogPage, error) {
	if !feedKind(kind) {
		return nil, fmt.Errorf("unknown catalog kind %q", kind)
	}
	page := &wire.CatalogPage{Kind: kind, Items: []wire.CatalogItem{}}
	err := c.db.View(func(tx *bolt.Tx) error {
		page.Seq = tx.Bucket(logBucket(kind)).Sequence()
		return tx.Bucket(liveBucket(kind)).ForEach(func(k, v []byte) error {
			it, err := decodeItem(v)
			if err != nil {
				return fmt.Errorf("%s %q: %w", kind, k, err)
			}
			it.Op = wire.OpPut
			page.Items = append(page.Items, it)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// KindChanges returns at most limit (1..MaxChangesLimit) changes of kind
// after since. When the changes right after since were trimmed, or since
// is ahead of the kind's counter, the page has Reset set and no items.
func (c *Catalog) KindChanges(kind wire.CatalogKind, since uint64, limit int) (*wire.CatalogPage, error) {
	if !feedKind(kind) {
		return nil, fmt.Errorf("unknown catalog kind %q", kind)
	}
	limit = min(max(limit, 1), MaxChangesLimit)
	page := &wire.CatalogPage{Kind: kind, Items: []wire.CatalogItem{}}
	err := c.db.View(func(tx *bolt.Tx) error {
		lb := tx.Bucket(logBucket(kind))
		cur := lb.Sequence()
		page.Seq = cur
		if since >= cur {
			page.Reset = since > cur // a cursor from the future is not ours
			return nil
		}
		cr := lb.Cursor()
		first, _ := cr.First()
		if first == nil || len(first) != 8 || binary.BigEndian.Uint64(first) > since+1 {
			page.Reset = true // the changes right after since were trimmed
			return nil
		}
		for k, v := cr.Seek(seqKey(since + 1)); k != nil && len(page.Items) < limit; k, v = cr.Next() {
			it, err := decodeItem(v)
			if err != nil {
				return fmt.Errorf("%s change %x: %w", kind, k, err)
			}
			page.Items = append(page.Items, it)
			page.Seq = it.Seq
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// Meta returns a meta value.
func (c *Catalog) Meta(key string) ([]byte, bool, error) {
	var out []byte
	err := c.db.View(func(tx *bolt.Tx) error {
		out = bytes.Clone(tx.Bucket(catMetaBucket).Get([]byte(key)))
		return nil
	})
	return out, out != nil, err
}

// Records returns the values of a record bucket whose keys start with
// prefix, in key order.
func (c *Catalog) Records(bucket, prefix string) ([][]byte, error) {
	name := recordBuckets[bucket]
	if name == nil {
		return nil, fmt.Errorf("unknown record bucket %q", bucket)
	}
	var out [][]byte
	err := c.db.View(func(tx *bolt.Tx) error {
		cur := tx.Bucket(name).Cursor()
		p := []byte(prefix)
		for k, v := cur.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = cur.Next() {
			out = append(out, bytes.Clone(v))
		}
		return nil
	})
	return out, err
}

// Export returns the live catalog and meta map as an Import, for moving a
// catalog into another store.
func (c *Catalog) Export() (*Import, error) {
	imp := &Import{Meta: map[string][]byte{}}
	for _, kind := range wire.CatalogKinds {
		items, err := c.Items(kind, "")
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			switch {
			case it.Tenant != nil:
				imp.Tenants = append(imp.Tenants, *it.Tenant)
			case it.Namespace != nil:
				imp.Namespaces = append(imp.Namespaces, *it.Namespace)
			case it.Stream != nil:
				imp.Streams = append(imp.Streams, *it.Stream)
			case it.Cache != nil:
				imp.Caches = append(imp.Caches, *it.Cache)
			}
		}
	}
	err := c.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(catMetaBucket).ForEach(func(k, v []byte) error {
			imp.Meta[string(k)] = bytes.Clone(v)
			return nil
		})
	})
	return imp, err
}
