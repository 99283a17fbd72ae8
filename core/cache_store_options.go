package core

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	flog "github.com/felixmq/felix/log"
)

// CacheStoreOptions configure OpenCacheStore. Zero values take the
// documented defaults.
type CacheStoreOptions struct {
	// Dir holds the shard: its log in Dir/log and its index snapshot in
	// Dir/index.snap. Required.
	Dir string
	// SegmentBytes is the log's segment size. Default 64 MiB.
	SegmentBytes int64
	// Fsync and FsyncInterval are the log's policy (default periodic,
	// every 250 ms).
	Fsync         flog.FsyncPolicy
	FsyncInterval time.Duration
	// MaxIndexBytes bounds the index's memory; a put of a new key that
	// would pass it is refused (overloaded, reason cache_full). Default
	// DefaultCacheIndexBytes.
	MaxIndexBytes int64
	// CompactEvery is how often the maintenance loop considers a
	// compaction; 0 runs none (call Compact).
	CompactEvery time.Duration
	// CompactMinRecords is how many records must follow the last
	// snapshot, and at least half the live keys as many, before the loop
	// compacts. Default 65536.
	CompactMinRecords uint64
	// CompactBytesPerSec is the compaction's write budget. Default 32 MiB/s;
	// negative means unpaced.
	CompactBytesPerSec int64
	// SweepEvery is how often the loop appends expiry records for lapsed
	// entries; 0 runs none (call SweepExpired).
	SweepEvery time.Duration
	// Now is the clock of expiries and record times. Default time.Now.
	Now func() time.Time
	// FS replaces the real file system (tests inject crashes).
	FS flog.FS
	// Logger receives recovery and maintenance reports. Default slog.Default().
	Logger *slog.Logger

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

func (o CacheStoreOptions) withDefaults() CacheStoreOptions {
	if o.MaxIndexBytes == 0 {
		o.MaxIndexBytes = DefaultCacheIndexBytes
	}
	if o.CompactMinRecords == 0 {
		o.CompactMinRecords = DefaultCacheCompactMinRecords
	}
	if o.CompactBytesPerSec == 0 {
		o.CompactBytesPerSec = DefaultCacheCompactBytesPerSec
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

func (o CacheStoreOptions) validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("core: CacheStoreOptions.Dir is empty"))
	}
	if o.MaxIndexBytes < 0 {
		errs = append(errs, fmt.Errorf("core: CacheStoreOptions.MaxIndexBytes %d is negative", o.MaxIndexBytes))
	}
	if o.CompactEvery < 0 || o.SweepEvery < 0 {
		errs = append(errs, fmt.Errorf("core: CacheStoreOptions.CompactEvery %v or SweepEvery %v is negative", o.CompactEvery, o.SweepEvery))
	}
	return errors.Join(errs...)
}
