package catalog

import (
	"encoding/binary"

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

func u64Key(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

func getU64(v []byte) uint64 {
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// storedU64 reads a u64 kept under bucket/key (0 when absent), such as the
// applied index.
func storedU64(tx *bolt.Tx, bucket, key []byte) uint64 {
	if b := tx.Bucket(bucket); b != nil {
		return getU64(b.Get(key))
	}
	return 0
}
