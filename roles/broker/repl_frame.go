package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	flog "github.com/felixmq/felix/log"
)

// The body of a repl_append call: the shipped records, back to back, in
// offset order from the header's "from" (a record's offset is from plus
// its index). Each record, big-endian:
//
//	kind        u8
//	flags       u8   bit 0: a producer block follows the publisher
//	generation  u64
//	time_micros u64
//	publisher   u16 length, then the bytes
//	producer    (flag bit 0) id u64, sequence u64, count u32, digest u64
//	payload     u32 length, then the bytes
//
// See docs/protocol.md, "Replication".

const (
	replFlagProducer = 1 << 0
	// replFlagState: a u32 length and the record's state section (an
	// atomic commit) follow the producer block's place.
	replFlagState = 1 << 1
	// replRecordHead is a record's fixed part: kind, flags, generation,
	// time, publisher length.
	replRecordHead  = 1 + 1 + 8 + 8 + 2
	replProducerLen = 8 + 8 + 4 + 8
)

// appendReplRecords appends recs in the body layout.
func appendReplRecords(dst []byte, recs []flog.Record) ([]byte, error) {
	for i := range recs {
		r := &recs[i]
		if len(r.Publisher) > math.MaxUint16 {
			return nil, fmt.Errorf("record %d: publisher of %d bytes", r.Offset, len(r.Publisher))
		}
		if uint64(len(r.Payload)) > math.MaxUint32 {
			return nil, fmt.Errorf("record %d: payload of %d bytes", r.Offset, len(r.Payload))
		}
		var flags byte
		if r.Producer != nil {
			flags |= replFlagProducer
		}
		if r.State != nil {
			flags |= replFlagState
		}
		dst = append(dst, byte(r.Kind), flags)
		dst = binary.BigEndian.AppendUint64(dst, r.Generation)
		dst = binary.BigEndian.AppendUint64(dst, r.TimeMicros)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.Publisher)))
		dst = append(dst, r.Publisher...)
		if p := r.Producer; p != nil {
			dst = binary.BigEndian.AppendUint64(dst, p.ID)
			dst = binary.BigEndian.AppendUint64(dst, p.Sequence)
			dst = binary.BigEndian.AppendUint32(dst, p.Count)
			dst = binary.BigEndian.AppendUint64(dst, p.Digest)
		}
		if r.State != nil {
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.State)))
			dst = append(dst, r.State...)
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Payload)))
		dst = append(dst, r.Payload...)
	}
	return dst, nil
}

var errReplTruncated = errors.New("truncated record")

// parseReplRecords decodes a body whose first record is at offset from.
// Payloads alias b. At most maxRecords are accepted.
func parseReplRecords(b []byte, from uint64, maxRecords int) ([]flog.Record, error) {
	var recs []flog.Record
	for len(b) > 0 {
		if len(recs) >= maxRecords {
			return nil, fmt.Errorf("more than %d records", maxRecords)
		}
		if len(b) < replRecordHead {
			return nil, fmt.Errorf("record %d: %w", len(recs), errReplTruncated)
		}
		r := flog.Record{Offset: from + uint64(len(recs)), Kind: flog.Kind(b[0])}
		flags := b[1]
		if flags&^(replFlagProducer|replFlagState) != 0 {
			return nil, fmt.Errorf("record %d: unknown flags %#x", len(recs), flags)
		}
		r.Generation = binary.BigEndian.Uint64(b[2:])
		r.TimeMicros = binary.BigEndian.Uint64(b[10:])
		n := int(binary.BigEndian.Uint16(b[18:]))
		b = b[replRecordHead:]
		if len(b) < n {
			return nil, fmt.Errorf("record %d: %w", len(recs), errReplTruncated)
		}
		r.Publisher, b = string(b[:n]), b[n:]
		if flags&replFlagProducer != 0 {
			if len(b) < replProducerLen {
				return nil, fmt.Errorf("record %d: %w", len(recs), errReplTruncated)
			}
			r.Producer = &flog.Producer{ID: binary.BigEndian.Uint64(b), Sequence: binary.BigEndian.Uint64(b[8:]),
				Count: binary.BigEndian.Uint32(b[16:]), Digest: binary.BigEndian.Uint64(b[20:])}
			b = b[replProducerLen:]
		}
		if flags&replFlagState != 0 {
			if len(b) < 4 || uint64(len(b)-4) < uint64(binary.BigEndian.Uint32(b)) {
				return nil, fmt.Errorf("record %d: %w", len(recs), errReplTruncated)
			}
			sl := binary.BigEndian.Uint32(b)
			r.State, b = b[4:4+sl:4+sl], b[4+sl:]
		}
		if len(b) < 4 {
			return nil, fmt.Errorf("record %d: %w", len(recs), errReplTruncated)
		}
		pl := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(len(b)) < uint64(pl) {
			return nil, fmt.Errorf("record %d: %w", len(recs), errReplTruncated)
		}
		r.Payload, b = b[:pl:pl], b[pl:]
		recs = append(recs, r)
	}
	return recs, nil
}
