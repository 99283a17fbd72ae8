package broker

import (
	"fmt"
	"math"
	"time"

	"github.com/felixmq/felix/core"
	flog "github.com/felixmq/felix/log"
)

// DurableConfig is where and how durable streams and log-backed caches
// keep their logs.
type DurableConfig struct {
	// StorageDir is the storage root (FELIX_DURABLE_STORAGE_DIR); empty
	// serves durable streams from memory, with a warning.
	StorageDir string
	// SegmentBytes is the segment roll size (FELIX_DURABLE_SEGMENT_BYTES,
	// default 64 MiB).
	SegmentBytes int64
	// Fsync is "always", "periodic" (the default) or "none"
	// (FELIX_DURABLE_FSYNC).
	Fsync string
	// FsyncInterval is the fsync period under periodic
	// (FELIX_DURABLE_FSYNC_INTERVAL_MS, default 250).
	FsyncInterval time.Duration
	// RetentionBytes and RetentionSeconds bound every stream that leaves
	// its own bound unset (FELIX_DURABLE_RETENTION_BYTES,
	// FELIX_DURABLE_RETENTION_SECONDS; 0, the default, is unbounded).
	RetentionBytes   uint64
	RetentionSeconds uint64
	// RecordPublishers stores the publishing principal with each record
	// (FELIX_RECORD_PUBLISHERS, default false).
	RecordPublishers bool
	// CacheIndexBytes bounds each log-backed cache's key index, 88 bytes
	// plus the key per key (FELIX_CACHE_INDEX_MAX_BYTES, default 256 MiB);
	// past it new keys are refused.
	CacheIndexBytes int64
	// CacheCompactInterval is how often a log-backed cache considers
	// compacting its log (FELIX_CACHE_COMPACT_INTERVAL_MS, default 30000).
	CacheCompactInterval time.Duration
	// fs replaces the real file system (tests inject faults with it).
	fs flog.FS
}

func (r *envReader) durable(d *DurableConfig) {
	r.str(&d.StorageDir, "FELIX_DURABLE_STORAGE_DIR")
	r.int64(&d.SegmentBytes, "FELIX_DURABLE_SEGMENT_BYTES", 4<<10, 1<<40)
	r.str(&d.Fsync, "FELIX_DURABLE_FSYNC")
	r.millis(&d.FsyncInterval, "FELIX_DURABLE_FSYNC_INTERVAL_MS", 1)
	r.uint64(&d.RetentionBytes, "FELIX_DURABLE_RETENTION_BYTES", 0, math.MaxInt64)
	r.uint64(&d.RetentionSeconds, "FELIX_DURABLE_RETENTION_SECONDS", 0, 1<<33)
	r.bool(&d.RecordPublishers, "FELIX_RECORD_PUBLISHERS")
	r.int64(&d.CacheIndexBytes, "FELIX_CACHE_INDEX_MAX_BYTES", 1<<10, 1<<50)
	r.millis(&d.CacheCompactInterval, "FELIX_CACHE_COMPACT_INTERVAL_MS", 1)
}

func (d *DurableConfig) validate() error {
	if _, err := flog.ParseFsyncPolicy(d.Fsync); err != nil {
		return fmt.Errorf("broker config: FELIX_DURABLE_FSYNC=%q: want always, periodic or none", d.Fsync)
	}
	if d.SegmentBytes <= 0 || d.FsyncInterval <= 0 {
		return fmt.Errorf("broker config: FELIX_DURABLE_SEGMENT_BYTES and FELIX_DURABLE_FSYNC_INTERVAL_MS must be positive")
	}
	return nil
}

// storage returns the core's storage configuration, or nil without a
// storage directory.
func (d *DurableConfig) storage() *core.StorageConfig {
	if d.StorageDir == "" {
		return nil
	}
	policy, _ := flog.ParseFsyncPolicy(d.Fsync)
	return &core.StorageConfig{
		Dir:           d.StorageDir,
		SegmentBytes:  d.SegmentBytes,
		Fsync:         policy,
		FsyncInterval: d.FsyncInterval,
		Retention: flog.Retention{
			MaxBytes: d.RetentionBytes,
			MaxAge:   time.Duration(d.RetentionSeconds) * time.Second,
		},
		RecordPublishers:     d.RecordPublishers,
		CacheIndexBytes:      d.CacheIndexBytes,
		CacheCompactInterval: d.CacheCompactInterval,
		FS:                   d.fs,
	}
}
