package cachelog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	flog "github.com/felixmq/felix/log"
)

// InspectOptions say what Inspect looks at.
type InspectOptions struct {
	// Cache and Counters select the cache log (with its index snapshot)
	// and the counter log.
	Cache, Counters bool
	// Records lists each record of the selected logs, at most MaxRecords
	// per log (0: all).
	Records    bool
	MaxRecords int
}

// Inspection is what Inspect found in one cache incarnation.
type Inspection struct {
	Incarnation
	// OffsetBase is what a log offset is shifted by to give the offsets
	// and versions clients see (0 without an offset base file, as the
	// broker takes it); OffsetBaseErr says the file is unreadable.
	OffsetBase    uint64
	HasOffsetBase bool
	OffsetBaseErr error
	// CacheLog and Snapshot are the cache log and its index snapshot; nil
	// unless asked for.
	CacheLog *LogInspection
	Snapshot *SnapshotInspection
	// CounterLog is the counter log: nil unless asked for, or when the
	// incarnation has no counter log directory (no counter was ever
	// written through a broker that creates one).
	CounterLog *LogInspection
}

// LogInspection is one cache or counter log: the log package's recovery
// report (the verdict opening the log reaches) and what decoding its
// records found.
type LogInspection struct {
	Dir string
	// Absent says the log's directory does not exist yet: opening
	// creates it empty (Report is then an empty log's, verdict open).
	Absent bool
	// Report is the recovery report, nil when the files could not be
	// read (Err).
	Report *flog.Report
	Err    error
	// Records is the --records listing; MoreRecords says it stopped at
	// MaxRecords.
	Records     []Record
	MoreRecords bool
	// Undecodable counts the records whose payload is not a record of
	// this log; FirstUndecodable describes the first.
	Undecodable      uint64
	FirstUndecodable string
	// Refusal, when not empty, is why the broker would refuse to open
	// the store although the log itself opens: a record that does not
	// decode, or (cache log) an index snapshot the open cannot do
	// without.
	Refusal string
}

// Refused reports whether opening the store would fail.
func (l *LogInspection) Refused() bool {
	return l.Err == nil && (l.Report.Verdict == flog.VerdictRefuse || l.Refusal != "")
}

// Record is one record of a cache or counter log, decoded with the
// decoders the stores use.
type Record struct {
	Offset     uint64
	Kind       flog.Kind
	Segment    string
	Position   int64
	TimeMicros uint64
	Key        string
	// ValueBytes, ExpiresAt (Unix ns, 0 never) and Version are a cache
	// put's or copy's: Version is the value's version as clients see it
	// (the offset of the put that wrote it plus the offset base).
	ValueBytes int
	ExpiresAt  int64
	Version    uint64
	// Value is a counter record's: a delta's delta, a checkpoint's sum.
	Value int64
	// Err says why the payload did not decode (the other fields but the
	// log's are then empty).
	Err string
}

// SnapshotInspection is a cache log's index snapshot.
type SnapshotInspection struct {
	// Present says there is an index snapshot file; Bytes is its size.
	Present bool
	Bytes   int64
	// Damage is why it does not verify (CRC, length, magic); nil when it
	// does.
	Damage error
	// Point (every record below it is reflected) and Entries, when it
	// verifies.
	Point   uint64
	Entries int
	// Usable says opening would load it; Unusable why a snapshot that
	// exists would not be (damage, or a point or version outside the
	// log). Unknown (false, nil) when the cache log does not open.
	Usable   bool
	Unusable error
	// Leftover says a compaction a crash cut short left its temporary
	// file, which opening deletes.
	Leftover bool
}

// Inspect reads one cache incarnation without writing anything: it runs
// the log package's recovery read-only over the selected logs (the code
// a broker's open runs), decodes every record with the stores' decoders,
// and checks the index snapshot as the cache store's open does.
func Inspect(inc Incarnation, o InspectOptions) *Inspection {
	in := &Inspection{Incarnation: inc}
	in.OffsetBase, in.HasOffsetBase, in.OffsetBaseErr = ReadOffsetBase(inc.Dir)
	if o.Cache {
		in.CacheLog = inspectLog(filepath.Join(inc.Dir, LogDir), o, func(r *Record, payload []byte) error {
			rec, _, err := ParseCacheRecord(r.Kind, payload)
			if err != nil {
				return err
			}
			r.Key = rec.Key
			if HoldsValue(rec.Kind) {
				r.ValueBytes, r.ExpiresAt, r.Version = len(rec.Value), rec.ExpiresAt, in.OffsetBase+r.Offset
				if rec.Kind == flog.KindCacheCopy {
					r.Version = in.OffsetBase + rec.Version
				}
			}
			return nil
		})
		in.Snapshot = inspectSnapshot(inc.Dir, in.CacheLog)
	}
	if dir := filepath.Join(inc.Dir, CounterDir, LogDir); o.Counters && isDir(dir) {
		in.CounterLog = inspectLog(dir, o, func(r *Record, payload []byte) error {
			rec, _, err := ParseCounterRecord(r.Kind, payload)
			r.Key, r.Value = rec.Key, rec.Value
			return err
		})
	}
	return in
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// inspectLog scans the log in dir, decoding each record with decode.
func inspectLog(dir string, o InspectOptions, decode func(r *Record, payload []byte) error) *LogInspection {
	l := &LogInspection{Dir: dir}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		l.Absent, l.Report = true, &flog.Report{Dir: dir, Verdict: flog.VerdictOpen}
		return l
	}
	rep, err := flog.ScanRecords(dir, func(ri flog.RecordInfo) error {
		r := Record{Offset: ri.Offset, Kind: ri.Kind, Segment: ri.Segment, Position: ri.Position, TimeMicros: ri.TimeMicros}
		if err := decode(&r, ri.Payload); err != nil {
			r = Record{Offset: ri.Offset, Kind: ri.Kind, Segment: ri.Segment, Position: ri.Position, TimeMicros: ri.TimeMicros, Err: err.Error()}
			if l.Undecodable == 0 {
				l.FirstUndecodable = fmt.Sprintf("offset %d (%s position %d): %v", ri.Offset, ri.Segment, ri.Position, err)
			}
			l.Undecodable++
		}
		switch {
		case !o.Records:
		case o.MaxRecords > 0 && len(l.Records) == o.MaxRecords:
			l.MoreRecords = true
		default:
			l.Records = append(l.Records, r)
		}
		return nil
	})
	var ce *flog.CorruptionError
	switch {
	case err != nil && errors.As(err, &ce):
		rep, err = &flog.Report{Dir: dir, Verdict: flog.VerdictRefuse, Corrupt: ce}, nil
	case err != nil:
		l.Err = err
		return l
	}
	l.Report = rep
	if l.Undecodable > 0 {
		l.Refusal = fmt.Sprintf("%d records do not decode, the first at %s", l.Undecodable, l.FirstUndecodable)
	}
	return l
}

// inspectSnapshot checks the index snapshot in dir as the cache store's
// open does, against the cache log's retained range.
func inspectSnapshot(dir string, cache *LogInspection) *SnapshotInspection {
	s := &SnapshotInspection{Leftover: isFile(filepath.Join(dir, SnapshotFile+".tmp"))}
	if st, err := os.Stat(filepath.Join(dir, SnapshotFile)); err == nil {
		s.Bytes = st.Size()
	}
	var oldest uint64 = 1<<64 - 1
	point, found, err := ReadSnapshot(nil, dir, func(int) {}, func(_ string, loc uint64, _ int64) {
		s.Entries++
		oldest = min(oldest, loc)
	})
	s.Present, s.Damage = found, err
	if err == nil {
		s.Point = point
	} else {
		s.Entries = 0
	}
	if cache.Err != nil || cache.Report.Verdict == flog.VerdictRefuse {
		return s
	}
	start, next := cache.Report.StartOffset, cache.Report.NextOffset
	oldest = min(oldest, next)
	usable, unusable, refusal := SnapshotUse(point, oldest, found, err, start, next)
	s.Usable, s.Unusable = usable, unusable
	if refusal != nil && cache.Refusal == "" {
		cache.Refusal = refusal.Error()
	}
	return s
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
