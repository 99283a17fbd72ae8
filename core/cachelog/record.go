package cachelog

import (
	"encoding/binary"
	"fmt"
	"math"

	flog "github.com/felixmq/felix/log"
)

// CacheRecordVersion is the payload layout of the cache records written
// today. The log record's kind says which record it is; the payload
// starts with this version byte so the layout can change without a new
// kind. All integers are big-endian (docs/storage.md, "Cache records"):
//
//	version     u8   1
//	key_len     u16
//	key         key_len bytes
//	expires_at  i64  put and copy: absolute expiry, Unix ns; 0 never
//	orig        u64  copy only: the version (offset) of the put copied
//	value       put and copy: the rest
//
// A tombstone and an expiry record carry the key alone.
const CacheRecordVersion = 1

// MaxKey is the longest key a cache record holds.
const MaxKey = math.MaxUint16

// CacheRecord is the payload of one log record of a log-backed cache.
type CacheRecord struct {
	Kind      flog.Kind // KindCachePut, KindCacheTombstone, KindCacheExpiry or KindCacheCopy
	Key       string
	ExpiresAt int64  // put and copy
	Version   uint64 // copy only: the version of the put it copies
	Value     []byte // put and copy
}

// HoldsValue reports whether a record kind carries a value (a put or a
// copy of one).
func HoldsValue(k flog.Kind) bool { return k == flog.KindCachePut || k == flog.KindCacheCopy }

// CacheRecordError says why a cache record did not decode.
type CacheRecordError struct{ reason string }

func (e *CacheRecordError) Error() string { return "cachelog: cache record: " + e.reason }

// Len is the record's encoded payload size.
func (r *CacheRecord) Len() int {
	n := 3 + len(r.Key)
	if HoldsValue(r.Kind) {
		n += 8 + len(r.Value)
	}
	if r.Kind == flog.KindCacheCopy {
		n += 8
	}
	return n
}

// Append encodes the record onto buf. The key must fit MaxKey
// (the store checks it before).
func (r *CacheRecord) Append(buf []byte) []byte {
	if len(r.Key) > MaxKey {
		panic(fmt.Sprintf("cachelog: cache record key of %d bytes (at most %d)", len(r.Key), MaxKey))
	}
	buf = appendKeyHeader(buf, CacheRecordVersion, r.Key)
	if HoldsValue(r.Kind) {
		buf = binary.BigEndian.AppendUint64(buf, uint64(r.ExpiresAt))
	}
	if r.Kind == flog.KindCacheCopy {
		buf = binary.BigEndian.AppendUint64(buf, r.Version)
	}
	if HoldsValue(r.Kind) {
		buf = append(buf, r.Value...)
	}
	return buf
}

// ParseCacheRecord decodes the payload of a record of kind. It checks
// every length before it slices and allocates only the key; a value
// aliases b. n is the bytes consumed (all of b).
func ParseCacheRecord(kind flog.Kind, b []byte) (CacheRecord, int, error) {
	switch kind {
	case flog.KindCachePut, flog.KindCacheTombstone, flog.KindCacheExpiry, flog.KindCacheCopy:
	default:
		return CacheRecord{}, 0, &CacheRecordError{reason: fmt.Sprintf("kind %v is not a cache record", kind)}
	}
	key, rest, reason := splitKeyHeader(b, CacheRecordVersion)
	if reason != "" {
		return CacheRecord{}, 0, &CacheRecordError{reason: reason}
	}
	r := CacheRecord{Kind: kind, Key: string(key)}
	if !HoldsValue(kind) {
		if len(rest) != 0 {
			return CacheRecord{}, 0, &CacheRecordError{reason: fmt.Sprintf("%d trailing bytes after a %v", len(rest), kind)}
		}
		return r, len(b), nil
	}
	fixed := 8
	if kind == flog.KindCacheCopy {
		fixed = 16
	}
	if len(rest) < fixed {
		return CacheRecord{}, 0, &CacheRecordError{reason: fmt.Sprintf("%v without its expiry or version", kind)}
	}
	r.ExpiresAt = int64(binary.BigEndian.Uint64(rest))
	if r.ExpiresAt < 0 {
		return CacheRecord{}, 0, &CacheRecordError{reason: fmt.Sprintf("negative expiry %d", r.ExpiresAt)}
	}
	if kind == flog.KindCacheCopy {
		r.Version = binary.BigEndian.Uint64(rest[8:])
	}
	r.Value = rest[fixed:]
	return r, len(b), nil
}

// appendKeyHeader appends the header every cache and counter record
// starts with: the layout version, the key's length (u16) and the key.
func appendKeyHeader(buf []byte, version byte, key string) []byte {
	buf = append(buf, version)
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(key)))
	return append(buf, key...)
}

// splitKeyHeader checks and splits off the header appendKeyHeader
// wrote, returning the key and what follows it, or why it does not
// decode (reason not empty).
func splitKeyHeader(b []byte, version byte) (key, rest []byte, reason string) {
	if len(b) < 3 {
		return nil, nil, fmt.Sprintf("payload of %d bytes, shorter than its header", len(b))
	}
	if b[0] != version {
		return nil, nil, fmt.Sprintf("unknown layout version %d", b[0])
	}
	kl := int(binary.BigEndian.Uint16(b[1:3]))
	if len(b) < 3+kl {
		return nil, nil, fmt.Sprintf("key of %d bytes in a payload of %d", kl, len(b))
	}
	return b[3 : 3+kl], b[3+kl:], ""
}
