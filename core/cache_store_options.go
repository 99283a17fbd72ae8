package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/felixmq/felix/core/cachelog"
	flog "github.com/felixmq/felix/log"
)

// StoreLogOptions are the settings the two logs of a log-backed cache
// share: CacheStoreOptions (the cache log) and CounterStoreOptions (the
// counter log) embed them, so their defaults, checks and the opening of
// the log are written once. Zero values take the documented defaults.
type StoreLogOptions struct {
	// Dir holds the store: its log in Dir/log (and, for a cache store,
	// its index snapshot in Dir/index.snap). Required.
	Dir string
	// SegmentBytes is the log's segment size. Default 64 MiB.
	SegmentBytes int64
	// Fsync and FsyncInterval are the log's policy (default periodic,
	// every 250 ms); a counter log takes its cache's.
	Fsync         flog.FsyncPolicy
	FsyncInterval time.Duration
	// MaxIndexBytes bounds the memory of what the store keeps per key (a
	// cache store's key index, a counter store's sums); a write of a new
	// key that would pass it is refused (overloaded, reason cache_full).
	// Default DefaultCacheIndexBytes.
	MaxIndexBytes int64
	// CompactEvery is how often the maintenance loop considers a
	// compaction; 0 runs none (call Compact).
	CompactEvery time.Duration
	// CompactMinRecords is how many records must follow the last
	// compaction before the loop compacts, and at least as many as half
	// the live keys (a cache store) or twice the counters (a counter
	// store). Default 65536.
	CompactMinRecords uint64
	// Now is the clock of expiries and record times. Default time.Now.
	Now func() time.Time
	// FS replaces the real file system (tests inject crashes).
	FS flog.FS
	// Logger receives recovery and maintenance reports. Default slog.Default().
	Logger *slog.Logger
}

// CacheStoreOptions configure OpenCacheStore. Zero values take the
// documented defaults.
type CacheStoreOptions struct {
	StoreLogOptions
	// CompactBytesPerSec is the compaction's write budget. Default 32 MiB/s;
	// negative means unpaced.
	CompactBytesPerSec int64
	// SweepEvery is how often the loop appends expiry records for lapsed
	// entries; 0 runs none (call SweepExpired).
	SweepEvery time.Duration

	metrics *coreMetrics // the broker's, or nil
	// ownerSweeps says the store's owner (a core.Cache) appends the
	// expiry records itself, so compaction must not sweep behind its back.
	ownerSweeps bool
}

// Defaults of CacheStoreOptions.
const (
	DefaultCacheIndexBytes         = 256 << 20
	DefaultCacheCompactMinRecords  = 65536
	DefaultCacheCompactBytesPerSec = 32 << 20
)

func (o StoreLogOptions) withDefaults() StoreLogOptions {
	if o.MaxIndexBytes == 0 {
		o.MaxIndexBytes = DefaultCacheIndexBytes
	}
	if o.CompactMinRecords == 0 {
		o.CompactMinRecords = DefaultCacheCompactMinRecords
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FS == nil {
		o.FS = flog.OSFS()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// validate checks the shared settings; name is the options type's, for
// the messages.
func (o StoreLogOptions) validate(name string) []error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, fmt.Errorf("core: %s.Dir is empty", name))
	}
	if o.MaxIndexBytes < 0 {
		errs = append(errs, fmt.Errorf("core: %s.MaxIndexBytes %d is negative", name, o.MaxIndexBytes))
	}
	if o.CompactEvery < 0 {
		errs = append(errs, fmt.Errorf("core: %s.CompactEvery %v is negative", name, o.CompactEvery))
	}
	return errs
}

// openLog creates Dir and opens the store's log in Dir/log with the
// options' segment size, fsync policy, clock, logger and file system,
// buffering appends (the stores' group commit). what names the store in
// errors ("cache store", "counter store"); onDurable may be nil.
func (o StoreLogOptions) openLog(what string, onDurable func(durable uint64, err error)) (*flog.Log, error) {
	if err := o.FS.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("core: open %s %s: %w", what, o.Dir, err)
	}
	lg, _, err := flog.Open(flog.Options{Dir: filepath.Join(o.Dir, cachelog.LogDir), SegmentBytes: o.SegmentBytes,
		Fsync: o.Fsync, FsyncInterval: o.FsyncInterval, Now: o.Now, Logger: o.Logger, FS: o.FS,
		OnDurable: onDurable, BufferAppends: true})
	if err != nil {
		return nil, fmt.Errorf("core: open %s %s: %w", what, o.Dir, err)
	}
	return lg, nil
}

// storeRun is what a cache store and a counter store both run besides
// their own state: the log, the maintenance goroutine with the context
// Close cancels, and the slot that lets one compaction run at a time.
type storeRun struct {
	log     *flog.Log
	ctx     context.Context // cancelled by Close: stops the maintenance loop
	stop    context.CancelFunc
	wg      sync.WaitGroup
	compact chan struct{} // one slot: one compaction at a time
}

// start takes the opened log and makes the maintenance context.
func (r *storeRun) start(lg *flog.Log) {
	r.log, r.compact = lg, make(chan struct{}, 1)
	r.ctx, r.stop = context.WithCancel(context.Background())
}

// abandon undoes start for an open that failed after it.
func (r *storeRun) abandon() {
	r.stop()
	r.log.Close()
}

// goMaintain runs loop as the maintenance goroutine; stopMaintenance
// waits for it.
func (r *storeRun) goMaintain(loop func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		loop()
	}()
}

// stopMaintenance cancels the maintenance context (and a compaction in
// progress) and waits for the maintenance goroutine to end.
func (r *storeRun) stopMaintenance() {
	r.stop()
	r.wg.Wait()
}

// enterCompaction waits for the compaction slot, or ctx; leave frees it.
func (r *storeRun) enterCompaction(ctx context.Context) (leave func(), err error) {
	select {
	case r.compact <- struct{}{}:
		return func() { <-r.compact }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (o CacheStoreOptions) withDefaults() CacheStoreOptions {
	o.StoreLogOptions = o.StoreLogOptions.withDefaults()
	if o.CompactBytesPerSec == 0 {
		o.CompactBytesPerSec = DefaultCacheCompactBytesPerSec
	}
	return o
}

func (o CacheStoreOptions) validate() error {
	errs := o.StoreLogOptions.validate("CacheStoreOptions")
	if o.SweepEvery < 0 {
		errs = append(errs, fmt.Errorf("core: CacheStoreOptions.SweepEvery %v is negative", o.SweepEvery))
	}
	return errors.Join(errs...)
}
