package log

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// FsyncPolicy says when appended bytes are forced to stable storage.
type FsyncPolicy uint8

const (
	// FsyncPeriodic hands bytes to the OS before Wait returns and fsyncs the
	// active segment every FsyncInterval while it has unsynced bytes. It is the
	// default.
	FsyncPeriodic FsyncPolicy = iota
	// FsyncAlways makes Wait return only after an fsync covering the append.
	// Appends that arrive while an fsync runs share the next one.
	FsyncAlways
	// FsyncNone hands bytes to the OS before Wait returns and fsyncs only when
	// a segment is sealed, on Sync and on Close.
	FsyncNone
)

// ParseFsyncPolicy reads "always", "periodic" or "none" (case-insensitive).
func ParseFsyncPolicy(s string) (FsyncPolicy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "always":
		return FsyncAlways, nil
	case "periodic", "":
		return FsyncPeriodic, nil
	case "none":
		return FsyncNone, nil
	}
	return 0, fmt.Errorf("log: unknown fsync policy %q (want always, periodic or none)", s)
}

// String returns the name ParseFsyncPolicy accepts.
func (p FsyncPolicy) String() string {
	switch p {
	case FsyncPeriodic:
		return "periodic"
	case FsyncAlways:
		return "always"
	case FsyncNone:
		return "none"
	}
	return fmt.Sprintf("FsyncPolicy(%d)", uint8(p))
}

// Retention bounds how much history a log keeps. Only whole sealed segments
// are ever deleted, oldest first; the active segment always stays.
type Retention struct {
	// MaxBytes bounds the total size of all segment files. 0 means no bound.
	MaxBytes uint64
	// MaxAge deletes a sealed segment once its newest record is older than
	// this. 0 means no bound.
	MaxAge time.Duration
}

// Limits and defaults.
const (
	// MaxRecordBytes caps one encoded record (framing included).
	MaxRecordBytes = 64 << 20
	// MaxPublisherBytes caps the publisher string of a record.
	MaxPublisherBytes = 65535
	// MaxSegmentBytes caps Options.SegmentBytes so that index positions fit
	// in 32 bits even with an oversized final batch.
	MaxSegmentBytes = 1 << 30
	// MaxBatchBytes caps the encoded size of one Append call.
	MaxBatchBytes = 1 << 30

	DefaultSegmentBytes       = 64 << 20
	DefaultIndexIntervalBytes = 4096
	DefaultFsyncInterval      = 250 * time.Millisecond
)

// Options configure Open. Zero values take the documented defaults.
type Options struct {
	// Dir is the log's directory; it is created if missing. Required.
	Dir string
	// SegmentBytes is the size at which the active segment is sealed and a
	// new one started. Default 64 MiB, at most MaxSegmentBytes.
	SegmentBytes int64
	// IndexIntervalBytes is the spacing, in record bytes, between sparse
	// index entries. Default 4096.
	IndexIntervalBytes int
	// Fsync is the durability policy. Default FsyncPeriodic.
	Fsync FsyncPolicy
	// FsyncInterval is the period of FsyncPeriodic. Default 250ms.
	FsyncInterval time.Duration
	// Retention is the initial retention; SetRetention changes it.
	Retention Retention
	// Now gives record times and the clock of age retention. Default time.Now.
	Now func() time.Time
	// Logger receives recovery warnings. Default slog.Default().
	Logger *slog.Logger
	// FS is the file system; nil means the real one (OSFS). Tests inject
	// faults through it.
	FS FS
	// OnDurable, when set, is called by the flusher goroutine after each
	// of its runs (an fsync, or a wake that found nothing to fsync) in
	// which DurableOffset or the log's failure changed since its last
	// call: durable is DurableOffset, err the failure (nil while the log
	// works). It runs without the log's lock and may call any method but
	// Close; it must not block for long, since fsyncs wait for it. An
	// advance an Append makes itself (every append under FsyncPeriodic,
	// a segment roll's fsync) is reported on the flusher's next run at
	// the earliest: the appender reads DurableOffset. There is no flusher
	// under FsyncNone, so it is never called there.
	OnDurable func(durable uint64, err error)
	// BufferAppends, under FsyncAlways, keeps appended records in memory
	// until the flusher's next fsync writes them all in one write (or a
	// read, a roll, Sync, TruncateTo or Close needs them in the file, or
	// they pass MaxBufferedBytes): group commit for owners that append one
	// record per request. It is ignored under the other policies, whose
	// Wait promises the bytes are in the OS when Append returns. See the
	// package documentation for what a failed write of buffered records
	// does.
	BufferAppends bool
}

// MaxBufferedBytes is what a log with BufferAppends holds in memory
// before an append writes it.
const MaxBufferedBytes = 1 << 20

// withDefaults returns a copy of o with every zero value filled in.
func (o Options) withDefaults() Options {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.FsyncInterval == 0 {
		o.FsyncInterval = DefaultFsyncInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FS == nil {
		o.FS = OSFS()
	}
	return o
}

// validate reports every bad value at once.
func (o Options) validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("log: Options.Dir is empty"))
	}
	if o.SegmentBytes < 0 || o.SegmentBytes > MaxSegmentBytes {
		errs = append(errs, fmt.Errorf("log: Options.SegmentBytes %d outside 1..%d", o.SegmentBytes, MaxSegmentBytes))
	}
	if o.IndexIntervalBytes < 0 {
		errs = append(errs, fmt.Errorf("log: Options.IndexIntervalBytes %d is negative", o.IndexIntervalBytes))
	}
	if o.Fsync > FsyncNone {
		errs = append(errs, fmt.Errorf("log: Options.Fsync %d is not a policy", o.Fsync))
	}
	if o.FsyncInterval < 0 {
		errs = append(errs, fmt.Errorf("log: Options.FsyncInterval %v is negative", o.FsyncInterval))
	}
	if o.Retention.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("log: Options.Retention.MaxAge %v is negative", o.Retention.MaxAge))
	}
	return errors.Join(errs...)
}
