package core

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// StorageConfig turns on durable streams and caches: a stream whose spec
// says durable keeps one segment log per shard under Dir, and every cache
// keeps a log under Dir/caches (cache_durable.go). Without it both are
// served from memory.
type StorageConfig struct {
	// Dir is the storage root (FELIX_DURABLE_STORAGE_DIR). Shard logs live
	// in Dir/streams/<tenant>/<namespace>/<stream>/<shard>.
	Dir string
	// SegmentBytes is the segment roll size (FELIX_DURABLE_SEGMENT_BYTES).
	SegmentBytes int64
	// Fsync is the fsync policy (FELIX_DURABLE_FSYNC) and FsyncInterval
	// its period under periodic (FELIX_DURABLE_FSYNC_INTERVAL_MS).
	Fsync         flog.FsyncPolicy
	FsyncInterval time.Duration
	// Retention bounds what a stream's spec leaves unset
	// (FELIX_DURABLE_RETENTION_BYTES, FELIX_DURABLE_RETENTION_SECONDS).
	Retention flog.Retention
	// RecordPublishers stores each batch's publisher with its records
	// (FELIX_RECORD_PUBLISHERS); without it a durable stream stores none.
	RecordPublishers bool
	// CacheIndexBytes bounds each durable cache's key index (0:
	// DefaultCacheIndexBytes); past it new keys are refused.
	CacheIndexBytes int64
	// CacheCompactInterval is how often a durable cache considers
	// compacting its log (0: DefaultCacheCompactInterval; negative: never).
	CacheCompactInterval time.Duration
	// FS replaces the real file system (tests inject faults with it).
	FS flog.FS
	// Logger receives recovery reports; nil means slog.Default().
	Logger *slog.Logger
}

func (c *StorageConfig) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// ShardDir returns the directory of one shard's log under root.
func ShardDir(root string, k StreamKey, shard uint32) string {
	return filepath.Join(root, "streams", k.Tenant, k.Namespace, k.Stream, strconv.FormatUint(uint64(shard), 10))
}

// streamDir returns the directory holding every shard log of a stream.
func streamDir(root string, k StreamKey) string {
	return filepath.Join(root, "streams", k.Tenant, k.Namespace, k.Stream)
}

// retentionFor merges a stream's retention with the broker defaults.
func (c *StorageConfig) retentionFor(spec wire.StreamSpec) flog.Retention {
	r := c.Retention
	if v := spec.Retention.MaxSizeBytes; v != nil {
		r.MaxBytes = *v
	}
	if v := spec.Retention.MaxAgeSeconds; v != nil {
		r.MaxAge = time.Duration(min(*v, uint64(1<<33))) * time.Second
	}
	return r
}

// openShardLog opens one shard's log, unless claimErr says the stream's
// directory could not be made its own. A log that recovery refuses, or
// that cannot be opened, leaves the shard unavailable (reported, and
// every request to it refused with shard_unavailable) while the rest of
// the broker keeps serving.
func (sh *Shard) openShardLog(c *StorageConfig, spec wire.StreamSpec, claimErr error) {
	dir := ShardDir(c.Dir, sh.stream.key, sh.index)
	if claimErr != nil {
		sh.unavailable = claimErr
		sh.metrics().durable.shardsRefused.Inc()
		c.logger().Error("durable shard refused: its stream's directory is not this stream's; the shard stays unavailable until it is resolved",
			"tenant", sh.stream.key.Tenant, "namespace", sh.stream.key.Namespace, "stream", sh.stream.key.Stream,
			"shard", sh.index, "dir", dir, "err", claimErr)
		return
	}
	lg, rep, err := flog.Open(flog.Options{
		Dir:           dir,
		SegmentBytes:  c.SegmentBytes,
		Fsync:         c.Fsync,
		FsyncInterval: c.FsyncInterval,
		Retention:     c.retentionFor(spec),
		Logger:        c.logger(),
		FS:            c.FS,
	})
	attrs := []any{"tenant", sh.stream.key.Tenant, "namespace", sh.stream.key.Namespace,
		"stream", sh.stream.key.Stream, "shard", sh.index, "dir", dir}
	if err != nil {
		sh.unavailable = err
		sh.metrics().durable.shardsRefused.Inc()
		c.logger().Error("durable shard refused: its log did not recover; the shard stays unavailable until it is repaired",
			append(attrs, "err", err)...)
		return
	}
	if rep != nil && rep.Truncated != nil {
		c.logger().Warn("durable shard log had a torn tail; truncated it",
			append(attrs, "segment", rep.Truncated.Segment, "position", rep.Truncated.Position,
				"bytes", rep.Truncated.Bytes, "reason", rep.Truncated.Reason)...)
	}
	sh.log = lg
	sh.next = lg.NextOffset()
	sh.nextPub.Store(sh.next)
	sh.metrics().durable.addLog(lg)
	if scan := sh.stream.cfg.ProducerScanRecords; scan >= 0 {
		sh.rebuildProducers(scan)
	}
	sh.rebuildCommitState(rep, c)
}

// errUnavailable refuses a request to a durable shard whose log is
// not serving.
func (sh *Shard) errUnavailable(cause error) *wire.Error {
	k := sh.stream.key
	e := wire.NewError(wire.CodeShardUnavailable, "shard %d of stream %s/%s/%s is unavailable: %v", sh.index, k.Tenant, k.Namespace, k.Stream, cause).
		WithDetail("shard", sh.index)
	return withLogReason(e, cause)
}

// withLogReason adds to a shard_unavailable refusal why its log is not
// serving: log_corrupt (with the segment and position), log_failed, or
// log_unavailable. Durable streams and log-backed caches share it.
func withLogReason(e *wire.Error, cause error) *wire.Error {
	var ce *flog.CorruptionError
	switch {
	case errors.As(cause, &ce):
		return e.WithDetail("reason", "log_corrupt").WithDetail("segment", ce.Segment).WithDetail("position", ce.Position)
	case errors.Is(cause, flog.ErrFailed):
		return e.WithDetail("reason", "log_failed")
	}
	return e.WithDetail("reason", "log_unavailable")
}

// errStorageFull refuses a write the disk had no room for; nothing of it
// was written. Durable streams and log-backed caches share it.
func errStorageFull(what string, err error) *wire.Error {
	e := wire.NewError(wire.CodeOverloaded, "durable storage is full; the %s was not written: %v", what, err).
		WithDetail("reason", "storage_full").WithDetail("retry_after_ms", 1000)
	e.Retry = wire.RetryRetryAfter
	return e
}

// appendError maps a log append failure to what the publisher is told.
func (sh *Shard) appendError(err error) *wire.Error {
	if errors.Is(err, flog.ErrNoSpace) {
		sh.metrics().durable.noSpace.Inc()
		return errStorageFull("publish", err)
	}
	if errors.Is(err, flog.ErrClosed) {
		return sh.errClosed()
	}
	return sh.errUnavailable(err)
}

// Durable reports whether the shard writes a log.
func (sh *Shard) Durable() bool { return sh.log != nil || sh.unavailable != nil }

// Unavailable returns why a durable shard is not serving, or nil.
func (sh *Shard) Unavailable() error { return sh.unavailable }

// closeLog closes the shard's log; with remove it also deletes its files.
func (sh *Shard) closeLog() {
	if sh.log == nil {
		return
	}
	sh.closeGroups()
	sh.metrics().durable.removeLog(sh.log)
	if err := sh.log.Close(); err != nil {
		sh.stream.cfg.Storage.logger().Warn("closing a durable shard log", "stream", sh.stream.key.Stream, "shard", sh.index, "err", err)
	}
}

// cursorError builds the refusal of a start offset the shard cannot serve.
func cursorError(tooOld bool, requested, available uint64) *wire.SubscribeCursorError {
	e := &wire.SubscribeCursorError{Requested: requested, Available: available}
	if tooOld {
		e.Reason = wire.CursorTooOld
		e.Message = fmt.Sprintf("offset %d is older than the oldest retained offset %d", requested, available)
	} else {
		e.Reason = wire.CursorInFuture
		e.Message = fmt.Sprintf("offset %d is past the shard's tail %d", requested, available)
	}
	return e
}
