package cachelog

import (
	"encoding/binary"
	"fmt"

	flog "github.com/felixmq/felix/log"
)

// CounterRecordVersion is the payload layout of the counter records
// written today. The log record's kind says which record it is
// (KindCounterDelta, KindCounterCheckpoint or KindCounterRemove); all
// share one layout, big-endian (docs/storage.md, "Counter records"):
//
//	version  u8   1
//	key_len  u16
//	key      key_len bytes
//	value    i64  a delta's signed delta; a checkpoint's sum; 0 in a remove
const CounterRecordVersion = 1

// CounterRecord is the payload of one record of a counter log.
type CounterRecord struct {
	Kind  flog.Kind // KindCounterDelta, KindCounterCheckpoint or KindCounterRemove
	Key   string
	Value int64 // the delta, or the checkpoint's sum
}

// Len is the record's encoded payload size.
func (r *CounterRecord) Len() int { return 1 + 2 + len(r.Key) + 8 }

// Append encodes the record onto buf. The key must fit MaxKey
// (the store checks it before).
func (r *CounterRecord) Append(buf []byte) []byte {
	if len(r.Key) > MaxKey {
		panic(fmt.Sprintf("cachelog: counter record key of %d bytes (at most %d)", len(r.Key), MaxKey))
	}
	buf = appendKeyHeader(buf, CounterRecordVersion, r.Key)
	return binary.BigEndian.AppendUint64(buf, uint64(r.Value))
}

// CounterRecordError says why a counter record did not decode.
type CounterRecordError struct{ reason string }

func (e *CounterRecordError) Error() string { return "cachelog: counter record: " + e.reason }

// ParseCounterRecord decodes the payload of a record of kind. It checks
// every length before it slices and allocates only the key. n is the
// bytes consumed (all of b: trailing bytes are an error).
func ParseCounterRecord(kind flog.Kind, b []byte) (CounterRecord, int, error) {
	if kind != flog.KindCounterDelta && kind != flog.KindCounterCheckpoint && kind != flog.KindCounterRemove {
		return CounterRecord{}, 0, &CounterRecordError{reason: fmt.Sprintf("kind %v is not a counter record", kind)}
	}
	key, rest, reason := splitKeyHeader(b, CounterRecordVersion)
	if reason == "" && len(rest) != 8 {
		reason = fmt.Sprintf("payload of %d bytes for a key of %d (want %d)", len(b), len(key), 3+len(key)+8)
	}
	if reason != "" {
		return CounterRecord{}, 0, &CounterRecordError{reason: reason}
	}
	r := CounterRecord{Kind: kind, Key: string(key), Value: int64(binary.BigEndian.Uint64(rest))}
	return r, len(b), nil
}
