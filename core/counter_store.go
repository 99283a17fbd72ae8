package core

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// CounterStore is the counter log of a log-backed cache: its own segment
// log, beside the cache's, whose records are signed deltas
// (KindCounterDelta) and compaction's checkpoints (KindCounterCheckpoint).
// The sums live in memory, folded from the log at open: a delta adds to
// its key's sum, a checkpoint sets it. A key with no record was never
// written, which is not a sum of zero.
//
// Adds append under the store's lock, so the sums change in log order,
// and return once the bytes are in the OS; Wait makes them durable under
// the fsync policy, and concurrent waiters share one fsync (the log's
// group commit). A Get waits for every add appended before it to be
// durable, so no reader sees a sum a crash could take back.
type CounterStore struct {
	opts CounterStoreOptions // defaults filled; immutable
	storeRun

	// mu guards the fields below. Adders hold it across their log append
	// (the log never calls back), so the sums follow the log's order.
	mu sync.Mutex
	// sums holds every counter ever written and not lost to a crash.
	// Invariant: folding the retained log from its start gives sums;
	// indexBytes == Σ counterCost(key) over it.
	sums       map[string]int64
	indexBytes int64
	// last is the newest append, which a reader waits for.
	last flog.Appended
	// compactedAt is the log's next offset when the last compaction
	// took its keys (0: none since open).
	compactedAt uint64
	closed      bool
}

// CounterStoreOptions configure OpenCounterStore: the settings every
// store log has (a counter log takes its cache's). Zero values take the
// documented defaults.
type CounterStoreOptions struct {
	StoreLogOptions
}

func (o CounterStoreOptions) validate() error {
	return errors.Join(o.StoreLogOptions.validate("CounterStoreOptions")...)
}

// counterEntryBytes is what one counter costs in memory beyond its key's
// bytes: a map slot of a 16-byte string header and an 8-byte sum with
// the table's slack, rounded up as the cache index's accounting is.
const counterEntryBytes = 80

func counterCost(key string) int64 { return counterEntryBytes + int64(len(key)) }

// OpenCounterStore opens (creating if needed) the counter log in o.Dir
// and folds it into the sums. A log the recovery refuses or a record that
// is not a valid counter record fail the open.
func OpenCounterStore(o CounterStoreOptions) (*CounterStore, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	o.StoreLogOptions = o.StoreLogOptions.withDefaults()
	lg, err := o.openLog("counter store", nil)
	if err != nil {
		return nil, err
	}
	s := &CounterStore{opts: o, sums: map[string]int64{}}
	s.start(lg)
	if err := s.fold(lg.StartOffset(), lg.NextOffset()); err != nil {
		s.abandon()
		return nil, fmt.Errorf("core: open counter store %s: %w", o.Dir, err)
	}
	for k := range s.sums {
		s.indexBytes += counterCost(k)
	}
	if o.CompactEvery > 0 {
		s.goMaintain(s.maintain)
	}
	return s, nil
}

// fold applies the records [from, to) to the sums.
func (s *CounterStore) fold(from, to uint64) error {
	for from < to {
		recs, n, err := s.log.Read(from, to, replayBatchRecords, replayBatchBytes)
		if err != nil {
			return fmt.Errorf("fold from %d: %w", from, err)
		}
		if len(recs) == 0 {
			return fmt.Errorf("fold from %d: the log returned nothing before %d", from, to)
		}
		for i := range recs {
			rec, _, err := cachelog.ParseCounterRecord(recs[i].Kind, recs[i].Payload)
			if err != nil {
				return fmt.Errorf("record at offset %d: %w", recs[i].Offset, err)
			}
			switch rec.Kind {
			case flog.KindCounterCheckpoint:
				s.sums[rec.Key] = rec.Value
				continue
			case flog.KindCounterRemove:
				delete(s.sums, rec.Key)
				continue
			}
			sum, ok := addInt64(s.sums[rec.Key], rec.Value)
			if !ok {
				return fmt.Errorf("record at offset %d: delta %d overflows the sum %d of %q", recs[i].Offset, rec.Value, s.sums[rec.Key], rec.Key)
			}
			s.sums[rec.Key] = sum
		}
		from = n
	}
	return nil
}

// addInt64 returns a+b, or ok false when it overflows int64.
func addInt64(a, b int64) (int64, bool) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return a + b, true
}

// CounterWrite identifies one appended add, for Wait.
type CounterWrite struct {
	// Offset is the delta's offset in the counter log.
	Offset uint64
	app    flog.Appended
}

// AppendAdd appends a delta to key and returns the sum including it,
// once the record is in the OS (Wait makes it durable). A sum that would
// overflow int64 is refused (invalid_request, reason counter_overflow)
// and appends nothing; so is a new key the memory bound cannot take
// (overloaded, reason cache_full).
func (s *CounterStore) AppendAdd(key string, delta int64) (int64, CounterWrite, error) {
	if len(key) > cachelog.MaxKey {
		return 0, CounterWrite{}, wire.NewError(wire.CodeInvalidRequest, "counter key of %d bytes (at most %d)", len(key), cachelog.MaxKey)
	}
	rec := cachelog.CounterRecord{Kind: flog.KindCounterDelta, Key: key, Value: delta}
	payload := rec.Append(make([]byte, 0, rec.Len()))
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.sums[key]
	sum, ok := addInt64(old, delta)
	if !ok {
		return old, CounterWrite{}, wire.NewError(wire.CodeInvalidRequest,
			"counter %q: adding %d to its sum %d would overflow a signed 64-bit integer; nothing was added", key, delta, old).
			WithDetail(wire.DetailReason, "counter_overflow")
	}
	if !exists && s.indexBytes+counterCost(key) > s.opts.MaxIndexBytes {
		return 0, CounterWrite{}, wire.NewOverloaded(wire.ReasonCacheFull, 0,
			"counter log %s: the counters' memory is at its bound of %d bytes (%d used, %d counters; a new one of %d bytes costs %d)",
			s.opts.Dir, s.opts.MaxIndexBytes, s.indexBytes, len(s.sums), len(key), counterCost(key)).
			WithDetail("limit", "index_bytes").WithDetail("limit_bytes", s.opts.MaxIndexBytes)
	}
	w, err := s.appendLocked(flog.Entry{Kind: flog.KindCounterDelta, Payload: payload})
	if err != nil {
		return 0, CounterWrite{}, err
	}
	if !exists {
		s.indexBytes += counterCost(key)
	}
	s.sums[key] = sum
	return sum, w, nil
}

// AppendForget appends a remove record for every counter whose key in
// reports and forgets them (they read as never written), returning how
// many: for a placement shard the broker no longer holds, so that a
// restart does not bring its counters back. A log that refuses the
// records leaves the counters in place and is the error.
func (s *CounterStore) AppendForget(in func(key string) bool) (int, CounterWrite, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	var entries []flog.Entry
	for k := range s.sums {
		if in(k) {
			rec := cachelog.CounterRecord{Kind: flog.KindCounterRemove, Key: k}
			keys = append(keys, k)
			entries = append(entries, flog.Entry{Kind: flog.KindCounterRemove, Payload: rec.Append(make([]byte, 0, rec.Len()))})
		}
	}
	if len(entries) == 0 {
		return 0, CounterWrite{}, nil
	}
	w, err := s.appendLocked(entries...)
	if err != nil {
		return 0, CounterWrite{}, err
	}
	for _, k := range keys {
		delete(s.sums, k)
		s.indexBytes -= counterCost(k)
	}
	return len(keys), w, nil
}

// Add is AppendAdd then Wait: it returns the sum once the delta is
// durable under the policy.
func (s *CounterStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	sum, w, err := s.AppendAdd(key, delta)
	if err != nil {
		return 0, err
	}
	return sum, s.Wait(ctx, w)
}

// Peek returns key's sum as the log has it, durable or not: ok is false
// when the key was never written. Pair it with WaitWritten.
func (s *CounterStore) Peek(key string) (sum int64, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, false, s.storeError(flog.ErrClosed)
	}
	sum, ok = s.sums[key]
	return sum, ok, nil
}

// Get returns key's sum (ok false: never written), after every add
// appended before it is durable.
func (s *CounterStore) Get(ctx context.Context, key string) (int64, bool, error) {
	sum, ok, err := s.Peek(key)
	if err != nil {
		return 0, false, err
	}
	return sum, ok, s.WaitWritten(ctx)
}

// Wait returns once w is durable under the fsync policy.
func (s *CounterStore) Wait(ctx context.Context, w CounterWrite) error {
	if err := s.log.Wait(ctx, w.app); err != nil {
		return s.storeError(err)
	}
	return nil
}

// WaitWritten returns once every add appended so far is durable.
func (s *CounterStore) WaitWritten(ctx context.Context) error {
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	return s.Wait(ctx, CounterWrite{app: last})
}

// Len is how many counters the store holds.
func (s *CounterStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sums)
}

// StartOffset is the oldest offset the counter log retains.
func (s *CounterStore) StartOffset() uint64 { return s.log.StartOffset() }

// NextOffset is the offset the next record takes.
func (s *CounterStore) NextOffset() uint64 { return s.log.NextOffset() }

func (s *CounterStore) appendLocked(entries ...flog.Entry) (CounterWrite, error) {
	if s.closed {
		return CounterWrite{}, s.storeError(flog.ErrClosed)
	}
	app, err := s.log.AppendEntries(entries, "", uint64(max(0, s.opts.Now().UnixMicro())))
	if err != nil {
		return CounterWrite{}, s.storeError(err)
	}
	s.last = app
	return CounterWrite{Offset: app.Base, app: app}, nil
}

// storeError maps a log failure as the cache store does.
func (s *CounterStore) storeError(err error) error {
	return storeLogError("counter log", s.opts.Dir, "counter add", err)
}

// Close stops the maintenance loop and closes the log (fsyncing it).
func (s *CounterStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.stopMaintenance()
	return s.log.Close()
}
