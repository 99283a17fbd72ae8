package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// CacheStore is one shard of a log-backed cache: every put, delete and
// expiry is a record of a segment log (kinds KindCachePut,
// KindCacheTombstone, KindCacheExpiry), and an index in memory maps each
// live key to the offset of the put that wrote it (its version) and its
// expiry. Values stay on disk and are read through the log (at the put's
// offset, or where compaction copied it forward). Open rebuilds
// the index from the newest index snapshot plus the records after it.
//
// Writes append under the store's lock, so the index changes in log
// order, and return once the bytes are in the OS; Wait (or Put and
// Delete, which wait) makes them durable under the fsync policy, and
// concurrent waiters share one fsync (the log's group commit). A Get
// waits for the writes appended before it to be durable, so no reader
// sees a write a crash could still take back.
type CacheStore struct {
	opts CacheStoreOptions // defaults filled; immutable
	storeRun

	// mu guards the fields below. Writers hold it across their log
	// append (the log never calls back, so this orders the index by the
	// log without a second lock); readers hold it for lookups only.
	mu sync.RWMutex
	// index holds every live key. Invariant: every loc is an offset in
	// [log.StartOffset, log.NextOffset) whose record is a put or a copy
	// of that key; indexBytes == Σ indexCost(key) over it; withTTL counts the
	// entries with an expiry.
	index      map[string]storeEntry
	indexBytes int64
	withTTL    int
	// last is the newest append, which a reader waits for.
	last flog.Appended
	// snapPoint is the point of the snapshot on disk (0: none).
	snapPoint uint64
	closed    bool

	// onDurable is the owner's hook for the log's OnDurable (see
	// SetOnDurable); nil until set.
	onDurable atomic.Pointer[func(durable uint64, err error)]
}

// SetOnDurable makes fn hear, from the log's flusher, each time the
// log's durable offset advances or the log fails (see flog.Options.
// OnDurable): for an owner that shows writes only once they are durable.
// fn must not block and must not close the store.
func (s *CacheStore) SetOnDurable(fn func(durable uint64, err error)) { s.onDurable.Store(&fn) }

func (s *CacheStore) logDurable(durable uint64, err error) {
	if fn := s.onDurable.Load(); fn != nil {
		if err != nil {
			err = s.storeError(err)
		}
		(*fn)(durable, err)
	}
}

// DurableOffset is one past the last record durable under the fsync
// policy (flog.Log.DurableOffset).
func (s *CacheStore) DurableOffset() uint64 { return s.log.DurableOffset() }

// Failure is the log's failure (mapped as storeError does), or nil while
// it works.
func (s *CacheStore) Failure() error {
	if err := s.log.Err(); err != nil {
		return s.storeError(err)
	}
	return nil
}

// SyncSoon asks the log to make what is written durable soon, without
// waiting (flog.Log.SyncSoon).
func (s *CacheStore) SyncSoon() { s.log.SyncSoon() }

// storeEntry is one live key of a store's index.
type storeEntry struct {
	// loc is the offset of the record holding the value: the put that
	// wrote it (whose offset is the value's version), or the copy
	// compaction made of it (which carries the version).
	loc       uint64
	expiresAt int64 // absolute expiry, Unix ns; 0 never
}

func (e storeEntry) expired(now int64) bool { return e.expiresAt != 0 && now >= e.expiresAt }

// cacheIndexEntryBytes is what one key costs the index beyond the key's
// own bytes: a Go map slot of a 16-byte string header and a 16-byte
// storeEntry, its control byte, and the empty slots a swiss table keeps
// (measured at 52–84 bytes from 0.1 to 1.5 million keys; the accounting
// takes the worst, just after the table grew, and rounds up). See
// docs/storage.md, "The key index".
const cacheIndexEntryBytes = 88

// indexCost is what key costs the index.
func indexCost(key string) int64 { return cacheIndexEntryBytes + int64(len(key)) }

// OpenCacheStore opens (creating if needed) the shard in o.Dir and
// rebuilds its index: the snapshot's entries, then every record from its
// point on. A log the recovery refuses, a record that is not a cache
// record, or a log whose oldest records are gone with no usable snapshot
// covering them, fail the open.
func OpenCacheStore(o CacheStoreOptions) (*CacheStore, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	s := &CacheStore{opts: o}
	lg, err := o.openLog("cache store", s.logDurable)
	if err != nil {
		return nil, err
	}
	s.start(lg)
	if err := s.rebuild(); err != nil {
		s.abandon()
		return nil, fmt.Errorf("core: open cache store %s: %w", o.Dir, err)
	}
	if o.metrics != nil {
		o.metrics.cacheIndex.add(s)
	}
	if o.CompactEvery > 0 || o.SweepEvery > 0 {
		s.goMaintain(s.maintain)
	}
	return s, nil
}

// CacheStoreWrite identifies one appended write, for Wait.
type CacheStoreWrite struct {
	// Offset is the record's log offset: a put's version.
	Offset uint64
	app    flog.Appended
}

// AppendPut appends a put of key (expiry expiresAt, Unix ns, 0 never)
// and applies it to the index. A new key the index bound cannot take is
// refused with overloaded (reason cache_full, detail limit
// "index_bytes"); a write the log refuses is mapped by storeError.
func (s *CacheStore) AppendPut(key string, value []byte, expiresAt int64) (CacheStoreWrite, error) {
	if len(key) > cachelog.MaxKey {
		return CacheStoreWrite{}, wire.NewError(wire.CodeInvalidRequest, "cache key of %d bytes (at most %d)", len(key), cachelog.MaxKey)
	}
	if expiresAt < 0 {
		return CacheStoreWrite{}, wire.NewError(wire.CodeInvalidRequest, "negative expiry %d", expiresAt)
	}
	rec := cachelog.CacheRecord{Kind: flog.KindCachePut, Key: key, ExpiresAt: expiresAt, Value: value}
	payload := rec.Append(make([]byte, 0, rec.Len()))
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.index[key]; !ok && s.indexBytes+indexCost(key) > s.opts.MaxIndexBytes {
		return CacheStoreWrite{}, s.indexFullError(key)
	}
	w, err := s.appendLocked(flog.Entry{Kind: flog.KindCachePut, Payload: payload})
	if err != nil {
		return CacheStoreWrite{}, err
	}
	s.putLocked(key, storeEntry{loc: w.Offset, expiresAt: expiresAt})
	return w, nil
}

// Put is AppendPut then Wait: it returns the version once the put is
// durable under the policy.
func (s *CacheStore) Put(ctx context.Context, key string, value []byte, expiresAt int64) (uint64, error) {
	w, err := s.AppendPut(key, value, expiresAt)
	if err != nil {
		return 0, err
	}
	return w.Offset, s.Wait(ctx, w)
}

// Delete removes key, appending a tombstone, and returns the value it
// held, once the tombstone is durable. An entry already expired is
// removed with an expiry record instead and reported absent; an absent
// key appends nothing.
func (s *CacheStore) Delete(ctx context.Context, key string) (old []byte, existed bool, err error) {
	s.mu.Lock()
	e, ok := s.index[key]
	if !ok {
		s.mu.Unlock()
		return nil, false, nil
	}
	kind := flog.KindCacheTombstone
	if e.expired(s.opts.Now().UnixNano()) {
		kind = flog.KindCacheExpiry
	} else if old, err = s.readValueLocked(key, e); err != nil {
		s.mu.Unlock()
		return nil, false, err
	}
	rec := cachelog.CacheRecord{Kind: kind, Key: key}
	w, err := s.appendLocked(flog.Entry{Kind: kind, Payload: rec.Append(make([]byte, 0, rec.Len()))})
	if err == nil {
		s.removeLocked(key, e)
	}
	s.mu.Unlock()
	if err != nil {
		return nil, false, err
	}
	if err := s.Wait(ctx, w); err != nil {
		return nil, false, err
	}
	return old, kind == flog.KindCacheTombstone, nil
}

// AppendRemove appends a tombstone (or, with expired, an expiry record)
// for key and removes it from the index, without reading its value: for
// an owner that decided the key is present. It returns the record's
// write for Wait.
func (s *CacheStore) AppendRemove(key string, expired bool) (CacheStoreWrite, error) {
	if len(key) > cachelog.MaxKey {
		return CacheStoreWrite{}, wire.NewError(wire.CodeInvalidRequest, "cache key of %d bytes (at most %d)", len(key), cachelog.MaxKey)
	}
	kind := flog.KindCacheTombstone
	if expired {
		kind = flog.KindCacheExpiry
	}
	rec := cachelog.CacheRecord{Kind: kind, Key: key}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, err := s.appendLocked(flog.Entry{Kind: kind, Payload: rec.Append(make([]byte, 0, rec.Len()))})
	if err != nil {
		return CacheStoreWrite{}, err
	}
	if e, ok := s.index[key]; ok {
		s.removeLocked(key, e)
	}
	return w, nil
}

// ScanLive calls fn with every live key's value, version and expiry
// (lapsed ones included), reading the retained log once from its start:
// for an owner that loads every value, cheaper than a point read per
// key. It must not run concurrently with writes.
func (s *CacheStore) ScanLive(fn func(key string, value []byte, version uint64, expiresAt int64)) error {
	from, end := s.log.StartOffset(), s.log.NextOffset()
	for from < end {
		recs, next, err := s.log.Read(from, end, replayBatchRecords, replayBatchBytes)
		if err != nil {
			return s.storeError(err)
		}
		for i := range recs {
			if !cachelog.HoldsValue(recs[i].Kind) {
				continue
			}
			rec, _, err := cachelog.ParseCacheRecord(recs[i].Kind, recs[i].Payload)
			if err != nil {
				return wire.NewError(wire.CodeInternal, "cache shard %s: record at offset %d: %v", s.opts.Dir, recs[i].Offset, err)
			}
			s.mu.RLock()
			e, ok := s.index[rec.Key]
			s.mu.RUnlock()
			if ok && e.loc == recs[i].Offset {
				fn(rec.Key, rec.Value, versionOf(recs[i].Offset, rec), e.expiresAt)
			}
		}
		from = next
	}
	return nil
}

// versionOf is the version of the value a put or copy at off holds.
func versionOf(off uint64, rec cachelog.CacheRecord) uint64 {
	if rec.Kind == flog.KindCacheCopy {
		return rec.Version
	}
	return off
}

// Wait returns once w is durable under the fsync policy.
func (s *CacheStore) Wait(ctx context.Context, w CacheStoreWrite) error {
	if err := s.log.Wait(ctx, w.app); err != nil {
		return s.storeError(err)
	}
	return nil
}

// WaitWritten returns once every write appended so far is durable under
// the fsync policy: what a reader must wait for before it answers with
// what it saw.
func (s *CacheStore) WaitWritten(ctx context.Context) error {
	s.mu.RLock()
	last := s.last
	s.mu.RUnlock()
	return s.Wait(ctx, CacheStoreWrite{app: last})
}

// CacheStoreValue is what Get found.
type CacheStoreValue struct {
	Value     []byte
	Version   uint64
	ExpiresAt int64
}

// Get returns key's value, version and expiry; ok is false when the key
// is absent or expired at now. It first waits for every write appended
// before it to be durable.
func (s *CacheStore) Get(ctx context.Context, key string, now time.Time) (v CacheStoreValue, ok bool, err error) {
	for attempt := 0; ; attempt++ {
		s.mu.RLock()
		e, found := s.index[key]
		last, closed := s.last, s.closed
		s.mu.RUnlock()
		if closed {
			return v, false, s.storeError(flog.ErrClosed)
		}
		if err := s.Wait(ctx, CacheStoreWrite{app: last}); err != nil {
			return v, false, err
		}
		if !found || e.expired(now.UnixNano()) {
			return v, false, nil
		}
		val, ver, err := s.readValue(key, e)
		var ce *flog.CursorError
		if errors.As(err, &ce) && ce.TooOld && attempt < 2 {
			continue // superseded or copied forward, and compacted away meanwhile: look again
		}
		if err != nil {
			return v, false, err
		}
		return CacheStoreValue{Value: val, Version: ver, ExpiresAt: e.expiresAt}, true, nil
	}
}

// readValueLocked is readValue for a caller holding mu, which keeps the
// entry's record from being compacted away.
func (s *CacheStore) readValueLocked(key string, e storeEntry) ([]byte, error) {
	v, _, err := s.readValue(key, e)
	var ce *flog.CursorError
	if errors.As(err, &ce) {
		// The index names only retained records: a broken invariant.
		panic(fmt.Sprintf("core: cache store %s: key %q at offset %d is not in the log: %v", s.opts.Dir, key, e.loc, err))
	}
	return v, err
}

// readValue reads the put or copy at e.loc, checks it is key's, and
// returns the value and its version.
func (s *CacheStore) readValue(key string, e storeEntry) ([]byte, uint64, error) {
	r, err := s.log.ReadRecord(e.loc)
	var ce *flog.CursorError
	if errors.As(err, &ce) {
		return nil, 0, err
	}
	if err != nil {
		return nil, 0, s.storeError(err)
	}
	rec, _, err := cachelog.ParseCacheRecord(r.Kind, r.Payload)
	if err == nil && (!cachelog.HoldsValue(rec.Kind) || rec.Key != key) {
		err = fmt.Errorf("offset %d holds a %v of key %q, not a value of %q", e.loc, rec.Kind, rec.Key, key)
	}
	if err != nil {
		return nil, 0, wire.NewError(wire.CodeInternal, "cache store %s: %v", s.opts.Dir, err)
	}
	return rec.Value, versionOf(r.Offset, rec), nil
}

// appendLocked appends one record and notes it as the newest.
func (s *CacheStore) appendLocked(entries ...flog.Entry) (CacheStoreWrite, error) {
	if s.closed {
		return CacheStoreWrite{}, s.storeError(flog.ErrClosed)
	}
	app, err := s.log.AppendEntries(entries, "", uint64(max(0, s.opts.Now().UnixMicro())))
	if err != nil {
		return CacheStoreWrite{}, s.storeError(err)
	}
	s.last = app
	return CacheStoreWrite{Offset: app.Base, app: app}, nil
}

// putLocked sets key's entry in the index and accounts for it.
func (s *CacheStore) putLocked(key string, e storeEntry) {
	if old, ok := s.index[key]; ok {
		s.withTTL -= ttlCount(old)
	} else {
		s.indexBytes += indexCost(key)
	}
	s.index[key] = e
	s.withTTL += ttlCount(e)
}

// removeLocked deletes key's entry e from the index.
func (s *CacheStore) removeLocked(key string, e storeEntry) {
	delete(s.index, key)
	s.indexBytes -= indexCost(key)
	s.withTTL -= ttlCount(e)
}

func ttlCount(e storeEntry) int {
	if e.expiresAt != 0 {
		return 1
	}
	return 0
}

// IndexBytes returns the index's accounted memory and its bound.
func (s *CacheStore) IndexBytes() (used, limit int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.indexBytes, s.opts.MaxIndexBytes
}

// Len returns the number of keys in the index, expired ones not yet
// swept included.
func (s *CacheStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.index)
}

// NextOffset is the offset the next write takes.
func (s *CacheStore) NextOffset() uint64 { return s.log.NextOffset() }

// StartOffset is the oldest offset the log retains: history below it was
// compacted away.
func (s *CacheStore) StartOffset() uint64 { return s.log.StartOffset() }

// indexFullError refuses a new key the index bound cannot take.
func (s *CacheStore) indexFullError(key string) *wire.Error {
	return wire.NewOverloaded(wire.ReasonCacheFull, 0,
		"cache shard %s: the key index is at its bound of %d bytes (%d used, %d keys; a new key of %d bytes costs %d): raise the cache index limit or delete keys",
		s.opts.Dir, s.opts.MaxIndexBytes, s.indexBytes, len(s.index), len(key), indexCost(key)).
		WithDetail("limit", "index_bytes").WithDetail("limit_bytes", s.opts.MaxIndexBytes)
}

// storeError maps a log failure to what a client is told (storeLogError).
func (s *CacheStore) storeError(err error) error {
	return storeLogError("cache shard", s.opts.Dir, "cache write", err)
}

// storeLogError maps a failure of the log of a store in dir to what a
// client is told, as a durable stream shard does: a full disk is
// overloaded (storage_full, naming the write op), a closed log draining,
// anything else shard_unavailable with the log's reason. what names the
// store ("cache shard", "counter log").
func storeLogError(what, dir, op string, err error) error {
	switch {
	case errors.Is(err, flog.ErrNoSpace):
		return errStorageFull(op, err)
	case errors.Is(err, flog.ErrClosed):
		return wire.NewError(wire.CodeDraining, "%s %s is closed", what, dir).WithDetail(wire.DetailReason, "closed")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return withLogReason(wire.NewError(wire.CodeShardUnavailable, "%s %s is unavailable: %v", what, dir, err), err)
}

// Close stops the maintenance loop and closes the log (fsyncing it).
// Later calls return errors.
func (s *CacheStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.stopMaintenance()
	if s.opts.metrics != nil {
		s.opts.metrics.cacheIndex.remove(s)
	}
	return s.log.Close()
}
