package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/felixmq/felix/raftmeta"
	"github.com/felixmq/felix/raftmeta/catalog"
	"github.com/felixmq/felix/wire"
)

// RaftConfig configures a RaftStore: one member of the control plane's
// Raft group.
type RaftConfig struct {
	// ID is this member's id (FELIX_RAFT_NODE_ID).
	ID uint64
	// Dir holds raft.db and catalog.db (FELIX_RAFT_DATA_DIR).
	Dir string
	// Peers maps every member id to its peer URL (FELIX_RAFT_PEERS).
	Peers map[uint64]string
	// TLS secures peer traffic (mutual when it has client CAs); nil is
	// plain HTTP.
	TLS *tls.Config
	// Listener, when set, serves peer traffic (tests and `felix serve`).
	Listener net.Listener
	// TickInterval is the Raft clock (default 100ms).
	TickInterval time.Duration
	// SnapshotEvery is how many applied entries go by between snapshots.
	SnapshotEvery uint64
	// ChangeLogKeep is how many feed entries are kept per kind; every
	// member must use the same value (default catalog.DefaultChangeLogKeep).
	ChangeLogKeep int
	// NoSync skips fsync of the catalog file (tests only).
	NoSync bool
	// OpTimeout bounds each call whose context has no earlier deadline
	// (default 15s): a member without a quorum answers with an error
	// rather than hanging.
	OpTimeout time.Duration
	// Logger receives the member's logs (default slog.Default()).
	Logger *slog.Logger
}

// RaftStore is the Store over the control plane's Raft group: writes are
// proposed (a follower forwards them to the leader), reads pass a
// ReadIndex barrier and then read the local catalog, so every call on any
// member sees every write acknowledged before it began.
type RaftStore struct {
	node      *raftmeta.Node
	cat       *catalog.Catalog
	opTimeout time.Duration
	log       *slog.Logger
}

// OpenRaftStore opens the catalog in cfg.Dir and starts the member.
func OpenRaftStore(cfg RaftConfig) (*RaftStore, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 15 * time.Second
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("raft data dir: %w", err)
	}
	// The catalog is rebuilt from the raft log when it cannot be trusted,
	// so it does not pay an fsync per apply.
	opts := []catalog.CatalogOption{catalog.CatalogUnsynced(cfg.Logger)}
	if cfg.ChangeLogKeep > 0 {
		opts = append(opts, catalog.CatalogChangeLogKeep(cfg.ChangeLogKeep))
	}
	if cfg.NoSync {
		opts = append(opts, catalog.CatalogNoSync())
	}
	cat, err := catalog.OpenCatalog(filepath.Join(cfg.Dir, "catalog.db"), opts...)
	if err != nil {
		return nil, err
	}
	node, err := raftmeta.Open(raftmeta.Config{
		ID: cfg.ID, Dir: cfg.Dir, Peers: cfg.Peers, FSM: cat, TLS: cfg.TLS, Listener: cfg.Listener,
		TickInterval: cfg.TickInterval, SnapshotEvery: cfg.SnapshotEvery, Logger: cfg.Logger,
	})
	if err != nil {
		cat.Close()
		return nil, err
	}
	return &RaftStore{node: node, cat: cat, opTimeout: cfg.OpTimeout, log: cfg.Logger}, nil
}

// Close stops the member, then closes the catalog.
func (s *RaftStore) Close() error {
	return errors.Join(s.node.Close(), s.cat.Close())
}

// Node returns the Raft member (for its status and peer address).
func (s *RaftStore) Node() *raftmeta.Node { return s.node }

// Catalog returns the local state machine. Reading it directly skips the
// ReadIndex barrier: for tests and diagnostics.
func (s *RaftStore) Catalog() *catalog.Catalog { return s.cat }

// Ready implements Store: this member is part of a working quorum.
func (s *RaftStore) Ready() bool { return s.node.Ready() }

// ClusterStatus implements Store.
func (s *RaftStore) ClusterStatus(context.Context) (raftmeta.Status, error) {
	return s.node.Status(), nil
}

// withTimeout bounds ctx by the store's operation timeout.
func (s *RaftStore) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < s.opTimeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.opTimeout)
}

// attemptTimeout bounds one proposal attempt: an entry lost in a leader
// change never applies, so the store re-proposes rather than waiting out
// the whole call.
const attemptTimeout = 3 * time.Second

// propose replicates cmd exactly once. The command carries a fresh
// request id, so it can be re-proposed whenever its outcome is unknown (a
// hand-over cut mid-way, an entry lost in a leader change): the catalog
// applies the first committed copy and answers the others with its
// outcome. It also retries while no leader takes the command.
func (s *RaftStore) propose(ctx context.Context, cmd []byte) ([]byte, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	cmd, err := catalog.WithRequestID(cmd, newRequestID())
	if err != nil {
		return nil, err
	}
	backoff := 10 * time.Millisecond
	for {
		actx, acancel := context.WithTimeout(ctx, attemptTimeout)
		res, err := s.node.Propose(actx, cmd)
		acancel()
		if err == nil || !(retryable(err) || unknownOutcome(err) || errors.Is(err, context.DeadlineExceeded)) || ctx.Err() != nil {
			return res, s.mapErr(ctx, err, wire.CodeQuorumTimeout)
		}
		if werr := sleepCtx(ctx, backoff); werr != nil {
			return nil, s.mapErr(ctx, err, wire.CodeQuorumTimeout)
		}
		if !retryable(err) {
			reproposals.Inc()
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// newRequestID returns a unique id that sorts by creation time: the
// nanosecond clock, then 8 random bytes. The catalog keeps outcomes by
// request id in a B+tree, so ids that arrive in order are appended at its
// right edge and forgotten from its left, touching a page or two per batch
// where random ids dirtied two random pages per command.
func newRequestID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixNano()))
	_, _ = rand.Read(b[8:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func unknownOutcome(err error) bool {
	var we *wire.Error
	return errors.As(err, &we) && we.Retry == wire.RetryOutcomeUnknown
}

// barrier waits until the local catalog reflects every write acknowledged
// before the call, retrying while there is no leader or an attempt hangs
// (a frozen leader): a read barrier is always safe to repeat.
func (s *RaftStore) barrier(ctx context.Context) error {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	backoff := 10 * time.Millisecond
	for {
		actx, acancel := context.WithTimeout(ctx, attemptTimeout)
		err := s.node.ReadIndex(actx)
		acancel()
		if err == nil || !(retryable(err) || errors.Is(err, context.DeadlineExceeded)) || ctx.Err() != nil {
			return s.mapErr(ctx, err, wire.CodeShardUnavailable)
		}
		if werr := sleepCtx(ctx, backoff); werr != nil {
			return s.mapErr(ctx, err, wire.CodeShardUnavailable)
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// retryable reports whether a failed attempt was certainly not applied
// and may work if made again (no leader yet, too many requests in flight):
// the retry class the error carries decides, not its code, so a class a
// peer sent explicitly is honoured and a code this version does not know
// is judged by its class.
func retryable(err error) bool {
	var we *wire.Error
	return errors.As(err, &we) && we.Retry.Retryable()
}

// mapErr turns a deadline of our own into a typed error; deterministic
// catalog errors and typed errors pass through.
func (s *RaftStore) mapErr(ctx context.Context, err error, timeoutCode wire.Code) error {
	if err == nil {
		return nil
	}
	var we *wire.Error
	if errors.As(err, &we) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) {
		return err
	}
	if errors.Is(err, raftmeta.ErrClosed) {
		return &wire.Error{Code: wire.CodeDraining, Retry: wire.RetryRetry, Message: "control plane member is stopping"}
	}
	if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
		e := wire.NewError(timeoutCode, "control plane has no quorum: %v", err)
		if timeoutCode == wire.CodeQuorumTimeout {
			e.Retry = wire.RetryOutcomeUnknown
		}
		return e
	}
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// readFn runs read after the barrier.
func readAfter[T any](ctx context.Context, s *RaftStore, read func() (T, error)) (T, error) {
	if err := s.barrier(ctx); err != nil {
		var zero T
		return zero, err
	}
	return read()
}

func (s *RaftStore) write(ctx context.Context, kind wire.CatalogKind, mode catalog.WriteMode, it wire.CatalogItem) error {
	_, err := s.propose(ctx, catalog.CmdWrite(kind, mode, it))
	return err
}

func (s *RaftStore) drop(ctx context.Context, kind wire.CatalogKind, key string, recursive bool) error {
	_, err := s.propose(ctx, catalog.CmdDelete(kind, key, recursive))
	return err
}

func (s *RaftStore) item(ctx context.Context, kind wire.CatalogKind, key string) (wire.CatalogItem, bool, error) {
	if err := s.barrier(ctx); err != nil {
		return wire.CatalogItem{}, false, err
	}
	return s.cat.Item(kind, key)
}

func (s *RaftStore) items(ctx context.Context, kind wire.CatalogKind, prefix string) ([]wire.CatalogItem, error) {
	return readAfter(ctx, s, func() ([]wire.CatalogItem, error) { return s.cat.Items(kind, prefix) })
}

// Meta implements Store.
func (s *RaftStore) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	if err := s.barrier(ctx); err != nil {
		return nil, false, err
	}
	return s.cat.Meta(key)
}

// PutMeta implements Store.
func (s *RaftStore) PutMeta(ctx context.Context, key string, v []byte) error {
	_, err := s.propose(ctx, catalog.CmdPutMeta(key, v))
	return err
}

// DeleteMeta implements Store.
func (s *RaftStore) DeleteMeta(ctx context.Context, key string) error {
	_, err := s.propose(ctx, catalog.CmdDeleteMeta(key))
	return err
}

// PutMetaIfAbsent implements Store.
func (s *RaftStore) PutMetaIfAbsent(ctx context.Context, key string, v []byte) ([]byte, error) {
	return s.propose(ctx, catalog.CmdPutMetaIfAbsent(key, v))
}

// Bootstrap implements Store. The flag's value is the time of the call,
// stamped by the proposer so that every member applies the same bytes.
func (s *RaftStore) Bootstrap(ctx context.Context, flag string, t wire.Tenant, ns wire.Namespace) (bool, error) {
	stamp := []byte(time.Now().UTC().Format(time.RFC3339))
	res, err := s.propose(ctx, catalog.CmdBootstrap(flag, stamp, t, ns))
	return string(res) == "1", err
}

// Snapshot implements Store.
func (s *RaftStore) Snapshot(ctx context.Context, kind wire.CatalogKind) (*wire.CatalogPage, error) {
	if !feedKind(kind) {
		return nil, unknownKind(kind)
	}
	return readAfter(ctx, s, func() (*wire.CatalogPage, error) { return s.cat.KindSnapshot(kind) })
}

// Changes implements Store.
func (s *RaftStore) Changes(ctx context.Context, kind wire.CatalogKind, since uint64, limit int) (*wire.CatalogPage, error) {
	if !feedKind(kind) {
		return nil, unknownKind(kind)
	}
	if limit <= 0 {
		limit = DefaultChangesLimit
	}
	return readAfter(ctx, s, func() (*wire.CatalogPage, error) {
		return s.cat.KindChanges(kind, since, min(limit, MaxChangesLimit))
	})
}

// BatchCreate implements Store.
func (s *RaftStore) BatchCreate(ctx context.Context, b Batch) (bool, error) {
	res, err := s.propose(ctx, catalog.CmdBatch(b))
	return string(res) == "replayed", err
}

// Import loads imp into the store when it is empty, and reports whether
// it did.
func (s *RaftStore) Import(ctx context.Context, imp catalog.Import) (bool, error) {
	res, err := s.propose(ctx, catalog.CmdImport(imp))
	return string(res) == "1", err
}

func feedKind(k wire.CatalogKind) bool { return k == wire.KindRevocations || validKind(k) }

var _ Store = (*RaftStore)(nil)

func keyOf(parts ...string) string { return catalog.CatalogKey(parts...) }
