package raftmeta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/felixmq/felix/raftmeta/fsm"
)

// KV is a reference StateMachine: a key/value map in one bbolt bucket, with
// the applied index kept in a meta bucket and written in the same
// transaction as every change. It exists to test the node and to show how a
// bbolt-backed state machine is written.
type KV struct {
	db  *bolt.DB
	dir string
	// Invariant: applied is the applied index stored in the file as of the
	// last committed write transaction (see update).
	applied atomic.Uint64
}

var (
	kvDataBucket = []byte("kv")
	kvMetaBucket = []byte("meta")
	kvAppliedKey = []byte("applied")
)

// Deterministic KV errors, returned to the proposer.
var (
	ErrKVNotFound    = errors.New("raftmeta kv: key not found")
	ErrKVCASMismatch = errors.New("raftmeta kv: compare-and-swap mismatch")
	ErrKVBadCommand  = errors.New("raftmeta kv: malformed command")
)

// KV command opcodes.
const (
	kvOpPut byte = 1 + iota
	kvOpDelete
	kvOpCAS
)

// KVOption adjusts a KV at open.
type KVOption func(*bolt.Options)

// KVNoSync skips fsync on every apply. The node recovers a state machine
// that lost its last applies after a process crash (it re-applies from the
// raft log or restores the stored snapshot), but bbolt without fsync may
// not survive a power loss: for tests and benchmarks.
func KVNoSync() KVOption { return func(o *bolt.Options) { o.NoSync = true } }

// OpenKV opens (creating if needed) a KV state machine in the bbolt file at
// path.
func OpenKV(path string, opts ...KVOption) (*KV, error) {
	bo := &bolt.Options{Timeout: time.Second}
	for _, o := range opts {
		o(bo)
	}
	db, err := bolt.Open(path, 0o600, bo)
	if err != nil {
		return nil, fmt.Errorf("raftmeta kv %s: %w", path, err)
	}
	kv := &KV{db: db, dir: filepath.Dir(path)}
	err = kv.update(func(tx *bolt.Tx) error {
		return createBuckets(tx, kvDataBucket, kvMetaBucket)
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("raftmeta kv %s: %w", path, err)
	}
	return kv, nil
}

func createBuckets(tx *bolt.Tx, names ...[]byte) error {
	for _, n := range names {
		if _, err := tx.CreateBucketIfNotExists(n); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the file.
func (kv *KV) Close() error { return kv.db.Close() }

// KVPut encodes a command that sets key to value; its result is the
// previous value (empty when none).
func KVPut(key, value []byte) []byte { return kvEncode(kvOpPut, key, value) }

// KVDelete encodes a command that removes key; its result is the removed
// value, or ErrKVNotFound.
func KVDelete(key []byte) []byte { return kvEncode(kvOpDelete, key) }

// KVCAS encodes a command that sets key to value only if its current value
// equals old (a nil old means "absent"); otherwise ErrKVCASMismatch.
func KVCAS(key, old, value []byte) []byte {
	absent := byte(0)
	if old == nil {
		absent = 1
	}
	return append(kvEncode(kvOpCAS, key, old, value), absent)
}

func kvEncode(op byte, fields ...[]byte) []byte {
	out := []byte{op}
	for _, f := range fields {
		out = binary.AppendUvarint(out, uint64(len(f)))
		out = append(out, f...)
	}
	return out
}

// Get returns the value of key.
func (kv *KV) Get(key []byte) ([]byte, bool, error) {
	var v []byte
	err := kv.db.View(func(tx *bolt.Tx) error {
		v = bytes.Clone(tx.Bucket(kvDataBucket).Get(key))
		return nil
	})
	return v, v != nil, err
}

// AppliedIndex returns the index of the last applied command (kept in
// memory, so it cannot fail).
func (kv *KV) AppliedIndex() uint64 { return kv.applied.Load() }

func kvApplied(tx *bolt.Tx) uint64 { return fsm.StoredU64(tx, kvMetaBucket, kvAppliedKey) }

// update runs fn in a write transaction and, once that has committed,
// caches the applied index it left.
func (kv *KV) update(fn func(*bolt.Tx) error) error {
	var applied uint64
	err := kv.db.Update(func(tx *bolt.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		applied = kvApplied(tx)
		return nil
	})
	if err == nil {
		kv.applied.Store(applied)
	}
	return err
}

// Apply applies one command. A malformed command is a deterministic error.
func (kv *KV) Apply(index uint64, cmd []byte) ([]byte, error) {
	var result []byte
	var applyErr error
	err := kv.update(func(tx *bolt.Tx) error {
		if index <= kvApplied(tx) {
			return nil
		}
		result, applyErr = kvApply(tx.Bucket(kvDataBucket), cmd)
		return tx.Bucket(kvMetaBucket).Put(kvAppliedKey, fsm.U64Key(index))
	})
	if err != nil {
		return nil, fmt.Errorf("raftmeta kv: apply %d: %w", index, err)
	}
	return result, applyErr
}

func kvApply(b *bolt.Bucket, cmd []byte) ([]byte, error) {
	if len(cmd) == 0 {
		return nil, ErrKVBadCommand
	}
	fields, rest, ok := kvFields(cmd[1:], map[byte]int{kvOpPut: 2, kvOpDelete: 1, kvOpCAS: 3}[cmd[0]])
	if !ok || len(fields) == 0 || len(fields[0]) == 0 {
		return nil, ErrKVBadCommand
	}
	key := fields[0]
	prev := bytes.Clone(b.Get(key))
	switch cmd[0] {
	case kvOpPut:
		return prev, b.Put(key, fields[1])
	case kvOpDelete:
		if prev == nil {
			return nil, ErrKVNotFound
		}
		return prev, b.Delete(key)
	case kvOpCAS:
		if len(rest) != 1 {
			return nil, ErrKVBadCommand
		}
		if (rest[0] == 1) != (prev == nil) || (prev != nil && !bytes.Equal(prev, fields[1])) {
			return prev, ErrKVCASMismatch
		}
		return prev, b.Put(key, fields[2])
	}
	return nil, ErrKVBadCommand
}

// kvFields splits n length-prefixed fields off p.
func kvFields(p []byte, n int) (fields [][]byte, rest []byte, ok bool) {
	for range n {
		l, w := binary.Uvarint(p)
		if w <= 0 || l > uint64(len(p)-w) {
			return nil, nil, false
		}
		fields = append(fields, p[w:w+int(l)])
		p = p[w+int(l):]
	}
	return fields, p, true
}

// Snapshot writes a consistent copy of the state to a temporary file.
func (kv *KV) Snapshot() (io.ReadCloser, uint64, error) {
	return fsm.SnapshotBoltToFile(kv.db, kv.dir, kvApplied)
}

// Restore replaces the whole state with a snapshot, atomically.
func (kv *KV) Restore(r io.Reader) error {
	return kv.update(func(tx *bolt.Tx) error {
		if err := fsm.RestoreBoltSnapshot(tx, r); err != nil {
			return err
		}
		return createBuckets(tx, kvDataBucket, kvMetaBucket)
	})
}
