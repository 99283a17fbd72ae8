package catalog

import (
	bolt "go.etcd.io/bbolt"
)

// Small bbolt helpers. The raft log keeps its own copies: the two files
// share a shape, not code, so that this package imports nothing of the node.

func createBuckets(tx *bolt.Tx, names ...[]byte) error {
	for _, n := range names {
		if _, err := tx.CreateBucketIfNotExists(n); err != nil {
			return err
		}
	}
	return nil
}
