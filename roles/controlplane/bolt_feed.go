package controlplane

import (
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/felixmq/felix/wire"
)

// Snapshot implements Store. The page cursor and the items are read in one
// transaction, so a reader that continues with Changes from the cursor sees
// every later change and none it already has.
func (s *BoltStore) Snapshot(ctx context.Context, kind wire.CatalogKind) (*wire.CatalogPage, error) {
	if !validKind(kind) {
		return nil, fmt.Errorf("unknown catalog kind %q", kind)
	}
	page := &wire.CatalogPage{Kind: kind, Items: []wire.CatalogItem{}}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		page.Seq = tx.Bucket(logBuckets[kind]).Sequence()
		return tx.Bucket(liveBuckets[kind]).ForEach(func(k, v []byte) error {
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

// Changes implements Store.
func (s *BoltStore) Changes(ctx context.Context, kind wire.CatalogKind, since uint64, limit int) (*wire.CatalogPage, error) {
	if !validKind(kind) {
		return nil, fmt.Errorf("unknown catalog kind %q", kind)
	}
	if limit <= 0 {
		limit = DefaultChangesLimit
	}
	limit = min(limit, MaxChangesLimit)
	page := &wire.CatalogPage{Kind: kind, Items: []wire.CatalogItem{}}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		lb := tx.Bucket(logBuckets[kind])
		cur := lb.Sequence()
		page.Seq = cur
		if since >= cur {
			page.Reset = since > cur // a cursor from the future is not ours
			return nil
		}
		c := lb.Cursor()
		first, _ := c.First()
		if first == nil || len(first) != 8 || binary.BigEndian.Uint64(first) > since+1 {
			page.Reset = true // the changes right after since were trimmed
			return nil
		}
		for k, v := c.Seek(seqKey(since + 1)); k != nil && len(page.Items) < limit; k, v = c.Next() {
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
