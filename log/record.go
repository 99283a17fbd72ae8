package log

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
)

// Record framing. Every record starts with the same 8-byte frame
// (big-endian), and the first byte of its body is the layout version:
//
//	len      u32  bytes after the crc field (the body)
//	crc      u32  CRC32C over those len bytes
//
// Version 1, the layout written today:
//
//	version     u8   1
//	kind        u8   a Kind
//	offset      u64
//	generation  u64  the leadership generation the record was written in
//	time        u64  append time, µs since the Unix epoch
//	pub_len     u16
//	pub         pub_len bytes
//	payload     the rest
//
// Version 2 is version 1 with a producer block after time, written only
// for a record that carries one (the first record of an idempotent
// producer's batch); every other record is still written in version 1:
//
//	version     u8   2
//	kind        u8
//	offset      u64
//	generation  u64
//	time        u64
//	producer    u64  the producer id
//	sequence    u64  the batch's sequence on its shard
//	count       u32  records in the batch, this one first
//	digest      u64  the batch's digest (its owner's choice of hash)
//	pub_len     u16
//	pub         pub_len bytes
//	payload     the rest
//
// Version 3 is version 1 with a state section, written only for an atomic
// commit's record (its event is the payload; the section holds the state
// operations, which the log stores and interprets none of):
//
//	version     u8   3
//	kind        u8
//	offset      u64
//	generation  u64
//	time        u64
//	state_len   u32
//	pub_len     u16
//	pub         pub_len bytes
//	state       state_len bytes
//	payload     the rest
//
// Version 0, written before records had a version (read, never written):
//
//	offset   u64  its first byte is the version byte, 0: no log reaches 2^56 offsets
//	time     u64
//	pub_len  u16
//	pub      pub_len bytes
//	payload  the rest
//
// A version-0 record reads back with KindData and generation 0.
const (
	frameBytes     = 8  // len + crc
	bodyHeaderV0   = 18 // offset + time + pub_len
	bodyHeaderV1   = 28 // version + kind + offset + generation + time + pub_len
	producerBytes  = 28 // producer + sequence + count + digest
	bodyHeaderV2   = bodyHeaderV1 + producerBytes
	stateLenBytes  = 4 // state_len
	bodyHeaderV3   = bodyHeaderV1 + stateLenBytes
	recordHeader   = frameBytes + bodyHeaderV1
	minRecordBytes = frameBytes + bodyHeaderV0 // the smallest record of any version
	maxBodyBytes   = MaxRecordBytes - frameBytes

	// RecordVersion is the layout version Append writes for a record
	// without a producer block.
	RecordVersion = 1
	// RecordVersionProducer is the layout version of a record with a
	// producer block.
	RecordVersionProducer = 2
	// RecordVersionState is the layout version of a record with a state
	// section (an atomic commit's record).
	RecordVersionState = 3
)

// Producer is the producer block of a version-2 record: an idempotent
// producer's id and the sequence of the batch the record starts, with the
// batch's record count and digest, so that the producer's recent
// sequences can be rebuilt from the log. The log stores it and
// interprets none of it.
type Producer struct {
	ID       uint64
	Sequence uint64
	Count    uint32
	Digest   uint64
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one stored record.
type Record struct {
	Offset     uint64
	TimeMicros uint64
	Publisher  string
	Payload    []byte
	// Kind says what the record means to its owner; KindData for every
	// record read from the old layout.
	Kind Kind
	// Generation is the leadership generation the record was written in;
	// 0 for records read from the old layout and for unreplicated logs.
	Generation uint64
	// Version is the layout the record was read in: 0 (old), 1, or 2
	// (with a producer block). Appends write RecordVersion, or
	// RecordVersionProducer for a record with a Producer.
	Version uint8
	// Producer is the record's producer block; nil for every record
	// without one.
	Producer *Producer
	// State is the record's state section (version 3, an atomic
	// commit's state operations); nil for every record without one.
	// Payload is the event alone either way.
	State []byte
}

// recordMeta is everything a record carries but its payload.
type recordMeta struct {
	offset, generation, time uint64
	kind                     Kind
	publisher                string
	producer                 *Producer
	state                    []byte // non-nil: a version-3 record
}

// recordSize is the encoded size of a record written today.
func recordSize(m recordMeta, payload []byte) int {
	n := recordHeader + len(m.publisher) + len(payload)
	if m.producer != nil {
		n += producerBytes
	}
	if m.state != nil {
		n += stateLenBytes + len(m.state)
	}
	return n
}

// appendRecord encodes one record in the current layout onto buf.
func appendRecord(buf []byte, m recordMeta, payload []byte) []byte {
	start := len(buf)
	body := bodyHeaderV1 + len(m.publisher) + len(payload)
	version := byte(RecordVersion)
	if m.producer != nil {
		body += producerBytes
		version = RecordVersionProducer
	}
	if m.state != nil {
		body += stateLenBytes + len(m.state)
		version = RecordVersionState
	}
	buf = binary.BigEndian.AppendUint32(buf, uint32(body))
	buf = append(buf, 0, 0, 0, 0) // crc, filled below
	buf = append(buf, version, byte(m.kind))
	buf = binary.BigEndian.AppendUint64(buf, m.offset)
	buf = binary.BigEndian.AppendUint64(buf, m.generation)
	buf = binary.BigEndian.AppendUint64(buf, m.time)
	if pr := m.producer; pr != nil {
		buf = binary.BigEndian.AppendUint64(buf, pr.ID)
		buf = binary.BigEndian.AppendUint64(buf, pr.Sequence)
		buf = binary.BigEndian.AppendUint32(buf, pr.Count)
		buf = binary.BigEndian.AppendUint64(buf, pr.Digest)
	}
	if m.state != nil {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(m.state)))
	}
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(m.publisher)))
	buf = append(buf, m.publisher...)
	buf = append(buf, m.state...)
	buf = append(buf, payload...)
	crc := crc32.Checksum(buf[start+frameBytes:], castagnoli)
	binary.BigEndian.PutUint32(buf[start+4:], crc)
	return buf
}

// recordError says why bytes are not a valid record. partial means the
// bytes simply ran out, which at the end of a file is a torn write. newer
// means a complete record (its CRC holds) in a layout this build does not
// know: never a torn write, always refused.
type recordError struct {
	reason  string
	partial bool
	newer   bool
}

func (e *recordError) Error() string { return "log: record: " + e.reason }

var (
	errPartial   = &recordError{reason: "partial record", partial: true}
	errBadLength = &recordError{reason: "bad length"}
	errCRC       = &recordError{reason: "crc mismatch"}
	errPubLength = &recordError{reason: "bad publisher length"}
	errVersion   = &recordError{reason: "unknown record version", newer: true}
	errStateLen  = &recordError{reason: "bad state length"}
)

// recordView is a decoded record whose byte slices alias the input.
type recordView struct {
	version    uint8
	kind       Kind
	offset     uint64
	generation uint64
	time       uint64
	publisher  []byte
	payload    []byte
	producer   Producer
	state      []byte // version 3 only
}

// bodyLen reads and checks the len field of a frame header against the
// bounds of every version; decodeRecord checks the version's own minimum.
func bodyLen(hdr []byte) (int, error) {
	if len(hdr) < frameBytes {
		return 0, errPartial
	}
	n := binary.BigEndian.Uint32(hdr)
	if n < bodyHeaderV0 || n > maxBodyBytes {
		return 0, errBadLength
	}
	return int(n), nil
}

// decodeRecord decodes the record at the start of b, in either layout, and
// returns it with its encoded size. It never allocates.
func decodeRecord(b []byte) (recordView, int, error) {
	n, err := bodyLen(b)
	if err != nil {
		return recordView{}, 0, err
	}
	if len(b)-frameBytes < n {
		return recordView{}, 0, errPartial
	}
	body := b[frameBytes : frameBytes+n]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return recordView{}, 0, errCRC
	}
	var v recordView
	var hdr int
	switch body[0] {
	case 0:
		v = recordView{offset: binary.BigEndian.Uint64(body), time: binary.BigEndian.Uint64(body[8:])}
		hdr = bodyHeaderV0
	case 1:
		if n < bodyHeaderV1 {
			return recordView{}, 0, errBadLength
		}
		v = recordView{version: 1, kind: Kind(body[1]), offset: binary.BigEndian.Uint64(body[2:]),
			generation: binary.BigEndian.Uint64(body[10:]), time: binary.BigEndian.Uint64(body[18:])}
		hdr = bodyHeaderV1
	case RecordVersionProducer:
		if n < bodyHeaderV2 {
			return recordView{}, 0, errBadLength
		}
		v = recordView{version: RecordVersionProducer, kind: Kind(body[1]), offset: binary.BigEndian.Uint64(body[2:]),
			generation: binary.BigEndian.Uint64(body[10:]), time: binary.BigEndian.Uint64(body[18:]),
			producer: Producer{ID: binary.BigEndian.Uint64(body[26:]), Sequence: binary.BigEndian.Uint64(body[34:]),
				Count: binary.BigEndian.Uint32(body[42:]), Digest: binary.BigEndian.Uint64(body[46:])}}
		hdr = bodyHeaderV2
	case RecordVersionState:
		if n < bodyHeaderV3 {
			return recordView{}, 0, errBadLength
		}
		v = recordView{version: RecordVersionState, kind: Kind(body[1]), offset: binary.BigEndian.Uint64(body[2:]),
			generation: binary.BigEndian.Uint64(body[10:]), time: binary.BigEndian.Uint64(body[18:])}
		hdr = bodyHeaderV3
	default:
		return recordView{}, 0, errVersion
	}
	pubLen := int(binary.BigEndian.Uint16(body[hdr-2:]))
	if pubLen > n-hdr {
		return recordView{}, 0, errPubLength
	}
	v.publisher = body[hdr : hdr+pubLen : hdr+pubLen]
	rest := body[hdr+pubLen:]
	if v.version == RecordVersionState {
		sl := uint64(binary.BigEndian.Uint32(body[bodyHeaderV1-2:]))
		if sl > uint64(len(rest)) {
			return recordView{}, 0, errStateLen
		}
		v.state, rest = rest[:sl:sl], rest[sl:]
	}
	v.payload = rest
	return v, frameBytes + n, nil
}

// toRecord copies a view into an owned Record.
func (v recordView) toRecord() Record {
	p := make([]byte, len(v.payload))
	copy(p, v.payload)
	r := Record{Offset: v.offset, TimeMicros: v.time, Publisher: string(v.publisher), Payload: p,
		Kind: v.kind, Generation: v.generation, Version: v.version}
	if v.version == RecordVersionProducer {
		pr := v.producer
		r.Producer = &pr
	}
	if v.version == RecordVersionState {
		r.State = append(make([]byte, 0, len(v.state)), v.state...)
	}
	return r
}

// recordReader reads consecutive records from a file through a window
// buffer, never past limit.
type recordReader struct {
	f     io.ReaderAt
	limit int64
	chunk int
	buf   []byte
	start int64 // file position of buf[0]
}

func newRecordReader(f io.ReaderAt, limit int64, chunk int) *recordReader {
	return &recordReader{f: f, limit: limit, chunk: chunk}
}

// fill makes buf cover [pos, pos+need), reading up to a chunk ahead.
func (r *recordReader) fill(pos int64, need int) error {
	if pos >= r.start && pos+int64(need) <= r.start+int64(len(r.buf)) {
		return nil
	}
	if pos+int64(need) > r.limit {
		return errPartial
	}
	want := max(need, r.chunk)
	if rest := r.limit - pos; int64(want) > rest {
		want = int(rest)
	}
	if cap(r.buf) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	n, err := r.f.ReadAt(r.buf, pos)
	r.buf, r.start = r.buf[:n], pos
	if n >= need {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return errPartial
	}
	return err
}

// at decodes the record starting at pos. The view aliases the reader's
// buffer and is valid until the next call.
func (r *recordReader) at(pos int64) (recordView, int, error) {
	if err := r.fill(pos, frameBytes); err != nil {
		return recordView{}, 0, err
	}
	i := int(pos - r.start)
	n, err := bodyLen(r.buf[i:])
	if err != nil {
		return recordView{}, 0, err
	}
	if err := r.fill(pos, frameBytes+n); err != nil {
		return recordView{}, 0, err
	}
	i = int(pos - r.start)
	return decodeRecord(r.buf[i : i+frameBytes+n])
}
