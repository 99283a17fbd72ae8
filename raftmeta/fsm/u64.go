package fsm

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// U64Key encodes i as an 8-byte big-endian key, so keys sort by number.
func U64Key(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

// GetU64 decodes a value U64Key wrote; anything not 8 bytes long reads 0.
func GetU64(v []byte) uint64 {
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// StoredU64 reads a u64 a state machine keeps under bucket/key (0 when
// absent), such as its applied index.
func StoredU64(tx *bolt.Tx, bucket, key []byte) uint64 {
	if b := tx.Bucket(bucket); b != nil {
		return GetU64(b.Get(key))
	}
	return 0
}
