package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/felixmq/felix/raftmeta/fsm"
	"github.com/felixmq/felix/wire"
)

// DefaultChangeLogKeep is how many change-log entries the catalog keeps
// per kind before trimming the oldest.
const DefaultChangeLogKeep = 10000

// maxIdempotencyKeys bounds the remembered batch idempotency keys; the
// oldest are forgotten first.
const maxIdempotencyKeys = 10000

// FeedKinds are the kinds with a live bucket and a change log: the
// catalog's kinds and the revocations.
var FeedKinds = append(append([]wire.CatalogKind{}, wire.CatalogKinds...), wire.KindRevocations)

var (
	catMetaBucket  = []byte("meta")
	catStateBucket = []byte("raftstate")
	catAppliedKey  = []byte("applied")
	catIdemBucket  = []byte("idempotency")
	catIdemLog     = []byte("log/idempotency")
	catReqBucket   = []byte("requests")
	catReqLog      = []byte("log/requests")
	recordBuckets  = map[string][]byte{RecordPolicies: []byte(RecordPolicies), RecordAssignments: []byte(RecordAssignments)}
)

// liveBucket holds a kind's live resources: key -> the CatalogItem (Op
// put) that last wrote it.
func liveBucket(k wire.CatalogKind) []byte { return []byte(k) }

// logBucket holds a kind's change log: 8-byte big-endian sequence number
// -> CatalogItem. The bucket's own sequence is the kind's counter, and the
// kept keys are contiguous up to it.
func logBucket(k wire.CatalogKind) []byte { return []byte("log/" + string(k)) }

// Catalog is the control plane's replicated state machine: tenants,
// namespaces, streams, caches and revocations with a change log per kind,
// a meta map, RBAC record buckets and batch idempotency keys, all in one
// bbolt file. The applied index is written in the same transaction as
// every change. Reads are local: call Node.ReadIndex first for a
// linearizable read.
type Catalog struct {
	db       *bolt.DB
	dir      string
	path     string
	keep     uint64
	unsynced bool
	// Invariant: applied is the applied index stored in the file as of the
	// last committed write transaction (see update), so AppliedIndex never
	// reads the file and stays true after Close.
	applied atomic.Uint64
	// inputsC is PlacementInputsChanged's channel once asked for (nil before).
	inputsC atomic.Pointer[chan struct{}]
	// viewC is ClusterChanged's channel: closed, and replaced, once a
	// transaction that applied a view input commits (viewDirty says one
	// did). Commands are applied one at a time, so the flag set by one
	// apply is consumed by its own commit.
	viewC     atomic.Pointer[chan struct{}]
	viewDirty atomic.Bool
}

// The node finds ApplyBatch by a type assertion, so a signature that
// drifted would silently cost the batching; these fail the build instead.
var (
	_ fsm.StateMachine = (*Catalog)(nil)
	_ fsm.BatchApplier = (*Catalog)(nil)
)

// CatalogOption adjusts a Catalog at open.
type CatalogOption func(*catalogOptions)

type catalogOptions struct {
	bolt     bolt.Options
	keep     uint64
	unsynced bool
	log      *slog.Logger
}

// CatalogUnsynced makes the catalog a cache of the raft log: no fsync per
// apply, and the file is discarded and rebuilt by raft's replay after the
// machine (not just the process) stopped with it open. See
// unsynced.go. log reports a discarded file.
func CatalogUnsynced(log *slog.Logger) CatalogOption {
	return func(o *catalogOptions) { o.unsynced, o.log, o.bolt.NoSync = true, log, true }
}

// CatalogNoSync skips fsync on every apply (see KVNoSync): for tests.
func CatalogNoSync() CatalogOption { return func(o *catalogOptions) { o.bolt.NoSync = true } }

// CatalogChangeLogKeep sets how many change-log entries are kept per kind
// (default DefaultChangeLogKeep, at least 1). Every member of a group must
// use the same value, or their states differ.
func CatalogChangeLogKeep(n int) CatalogOption {
	return func(o *catalogOptions) { o.keep = uint64(max(n, 1)) }
}

// OpenCatalog opens (creating if needed) the catalog in the bbolt file at
// path. It fails rather than waiting when another process holds the file.
func OpenCatalog(path string, opts ...CatalogOption) (*Catalog, error) {
	o := catalogOptions{bolt: bolt.Options{Timeout: time.Second}, keep: DefaultChangeLogKeep}
	for _, f := range opts {
		f(&o)
	}
	if o.unsynced {
		if o.log == nil {
			o.log = slog.Default()
		}
		if err := prepareUnsynced(path, o.log); err != nil {
			return nil, fmt.Errorf("raftmeta catalog %s: %w", path, err)
		}
	}
	db, err := bolt.Open(path, 0o600, &o.bolt)
	if err != nil {
		return nil, fmt.Errorf("raftmeta catalog %s: %w", path, err)
	}
	c := &Catalog{db: db, dir: filepath.Dir(path), path: path, keep: o.keep, unsynced: o.unsynced}
	if err := c.update(createCatalogBuckets); err != nil {
		db.Close()
		return nil, fmt.Errorf("raftmeta catalog %s: %w", path, err)
	}
	return c, nil
}

func createCatalogBuckets(tx *bolt.Tx) error {
	names := [][]byte{catMetaBucket, catStateBucket, catIdemBucket, catIdemLog, catReqBucket, catReqLog, catBrokersBucket, catFleetBucket, catPlacementBucket, catPositionsBucket}
	for _, k := range FeedKinds {
		names = append(names, liveBucket(k), logBucket(k))
	}
	for _, b := range recordBuckets {
		names = append(names, b)
	}
	return createBuckets(tx, names...)
}

// Close closes the file; an unsynced catalog is synced first.
func (c *Catalog) Close() error {
	if !c.unsynced {
		return c.db.Close()
	}
	syncErr := c.db.Sync()
	closeErr := c.db.Close()
	return errors.Join(finishUnsynced(c.path, syncErr), closeErr)
}

// AppliedIndex implements fsm.StateMachine: the applied index of the last
// committed change (kept in memory, so it cannot fail).
func (c *Catalog) AppliedIndex() uint64 { return c.applied.Load() }

func catApplied(tx *bolt.Tx) uint64 { return fsm.StoredU64(tx, catStateBucket, catAppliedKey) }

// update runs fn in a write transaction and, once that has committed,
// caches the applied index it left.
func (c *Catalog) update(fn func(*bolt.Tx) error) error {
	var applied uint64
	err := c.db.Update(func(tx *bolt.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		applied = catApplied(tx)
		return nil
	})
	if err == nil {
		c.applied.Store(applied)
	}
	if c.viewDirty.Swap(false) {
		c.broadcastClusterChanged()
	}
	return err
}

// errRollback undoes a command's writes when its outcome is a
// deterministic error.
var errRollback = errors.New("roll back")

// Apply implements fsm.StateMachine. A command runs in one transaction with
// the applied index; when it fails deterministically its writes are rolled
// back and only the applied index (and the outcome of a command with a
// request id) is written, in a second transaction (a crash between the two
// re-applies the command, with the same outcome).
func (c *Catalog) Apply(index uint64, raw []byte) ([]byte, error) {
	var (
		result   []byte
		applyErr error
		skipped  bool
		req      string
	)
	err := c.update(func(tx *bolt.Tx) error {
		if index <= catApplied(tx) {
			skipped = true
			return nil
		}
		var cmd catalogCmd
		if err := json.Unmarshal(raw, &cmd); err != nil {
			applyErr = badCommand(err.Error())
			return errRollback
		}
		req = cmd.Request
		if out, ok := recordedOutcome(tx, req); ok {
			result, applyErr = out.result()
			return tx.Bucket(catStateBucket).Put(catAppliedKey, fsm.U64Key(index))
		}
		result, applyErr = c.applyCmd(tx, cmd)
		if applyErr != nil {
			if !isDeterministic(applyErr) {
				return applyErr
			}
			return errRollback
		}
		if err := recordOutcome(tx, req, result, nil); err != nil {
			return err
		}
		return tx.Bucket(catStateBucket).Put(catAppliedKey, fsm.U64Key(index))
	})
	switch {
	case skipped:
		return nil, nil
	case errors.Is(err, errRollback):
		err = c.update(func(tx *bolt.Tx) error {
			if err := recordOutcome(tx, req, nil, applyErr); err != nil {
				return err
			}
			return tx.Bucket(catStateBucket).Put(catAppliedKey, fsm.U64Key(index))
		})
		if err != nil {
			return nil, fmt.Errorf("raftmeta catalog: apply %d: %w", index, err)
		}
		return nil, applyErr
	case err != nil:
		return nil, fmt.Errorf("raftmeta catalog: apply %d: %w", index, err)
	}
	return result, applyErr
}

func (c *Catalog) applyCmd(tx *bolt.Tx, cmd catalogCmd) ([]byte, error) {
	if cmd.V != catalogCmdVersion {
		return nil, badCommand(fmt.Sprintf("version %d", cmd.V))
	}
	if len(cmd.Request) > maxRequestIDLen {
		return nil, badCommand("request id too long")
	}
	w := &writer{tx: tx, keep: c.keep}
	c.notifyPlacementInputs(cmd)
	if viewInput(cmd) {
		c.viewDirty.Store(true)
	}
	switch cmd.Op {
	case opWrite:
		return nil, w.applyWrite(cmd)
	case opDelete:
		return nil, w.applyDelete(cmd)
	case opPutMeta:
		return nil, w.applyPutMeta(cmd)
	case opPutMetaAbsent:
		return w.applyPutMetaIfAbsent(cmd)
	case opDeleteMeta:
		if cmd.Key == "" {
			return nil, badCommand("delete_meta needs a key")
		}
		return nil, w.tx.Bucket(catMetaBucket).Delete([]byte(cmd.Key))
	case opBootstrap:
		return w.applyBootstrap(cmd)
	case opBatch:
		return w.applyBatch(cmd.Batch)
	case opPutRecord, opDeleteRecord:
		return nil, w.applyRecord(cmd)
	case opImport:
		return w.applyImport(cmd.Import)
	case opRegisterBroker, opHeartbeatBroker, opMarkBrokerDown, opDeregisterBroker, opFinalizeFeatures:
		return w.applyBrokerCmd(cmd)
	case opApplyPlacement:
		return w.applyPlacement(cmd.Placement)
	}
	return nil, badCommand(fmt.Sprintf("unknown op %q", cmd.Op))
}

// Snapshot implements fsm.StateMachine: a logical copy of every bucket, so
// members with the same applied commands produce byte-identical snapshots.
func (c *Catalog) Snapshot() (io.ReadCloser, uint64, error) {
	return fsm.SnapshotBoltToFile(c.db, c.dir, catApplied)
}

// Restore implements fsm.StateMachine.
func (c *Catalog) Restore(r io.Reader) error {
	c.viewDirty.Store(true)
	return c.update(func(tx *bolt.Tx) error {
		if err := fsm.RestoreBoltSnapshot(tx, r); err != nil {
			return err
		}
		return createCatalogBuckets(tx)
	})
}

// errBatchFallback abandons a batch transaction so that its entries are
// applied one by one instead.
var errBatchFallback = errors.New("apply one by one")

// ApplyBatch implements fsm.BatchApplier: it applies committed entries in one
// transaction (one fsync for all of them), which is where the group's write
// throughput comes from under concurrent callers. If any entry fails, even
// deterministically, the whole transaction is dropped and the entries are
// applied one by one with Apply, which rolls a failed command back on its
// own; the outcome is the same either way.
func (c *Catalog) ApplyBatch(entries []fsm.BatchEntry) ([]fsm.BatchResult, error) {
	results := make([]fsm.BatchResult, len(entries))
	err := c.update(func(tx *bolt.Tx) error {
		for i, e := range entries {
			if e.Index <= catApplied(tx) {
				continue
			}
			var cmd catalogCmd
			if json.Unmarshal(e.Cmd, &cmd) != nil {
				return errBatchFallback
			}
			if out, ok := recordedOutcome(tx, cmd.Request); ok {
				results[i].Result, results[i].Err = out.result()
			} else {
				res, err := c.applyCmd(tx, cmd)
				if err != nil {
					return errBatchFallback
				}
				if err := recordOutcome(tx, cmd.Request, res, nil); err != nil {
					return err
				}
				results[i].Result = res
			}
			if err := tx.Bucket(catStateBucket).Put(catAppliedKey, fsm.U64Key(e.Index)); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, errBatchFallback) {
		if err != nil {
			return nil, fmt.Errorf("raftmeta catalog: apply batch: %w", err)
		}
		return results, nil
	}
	for i, e := range entries {
		results[i].Result, results[i].Err = c.Apply(e.Index, e.Cmd)
		if results[i].Err != nil && c.AppliedIndex() < e.Index {
			return results[:i], results[i].Err
		}
	}
	return results, nil
}
