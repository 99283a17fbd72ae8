package log

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
)

// Record framing (big-endian):
//
//	len      u32  bytes after the crc field (offset .. payload)
//	crc      u32  CRC32C over those len bytes
//	offset   u64
//	time     u64  append time, µs since the Unix epoch
//	pub_len  u16
//	pub      pub_len bytes
//	payload  the rest
const (
	frameBytes   = 8  // len + crc
	bodyHeader   = 18 // offset + time + pub_len
	recordHeader = frameBytes + bodyHeader
	maxBodyBytes = MaxRecordBytes - frameBytes
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one stored record.
type Record struct {
	Offset     uint64
	TimeMicros uint64
	Publisher  string
	Payload    []byte
}

// recordSize is the encoded size of a record.
func recordSize(publisher string, payload []byte) int {
	return recordHeader + len(publisher) + len(payload)
}

// appendRecord encodes one record onto buf.
func appendRecord(buf []byte, off, timeMicros uint64, publisher string, payload []byte) []byte {
	start := len(buf)
	body := bodyHeader + len(publisher) + len(payload)
	buf = binary.BigEndian.AppendUint32(buf, uint32(body))
	buf = append(buf, 0, 0, 0, 0) // crc, filled below
	buf = binary.BigEndian.AppendUint64(buf, off)
	buf = binary.BigEndian.AppendUint64(buf, timeMicros)
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(publisher)))
	buf = append(buf, publisher...)
	buf = append(buf, payload...)
	crc := crc32.Checksum(buf[start+frameBytes:], castagnoli)
	binary.BigEndian.PutUint32(buf[start+4:], crc)
	return buf
}

// recordError says why bytes are not a valid record. partial means the
// bytes simply ran out, which at the end of a file is a torn write.
type recordError struct {
	reason  string
	partial bool
}

func (e *recordError) Error() string { return "log: record: " + e.reason }

var (
	errPartial   = &recordError{reason: "partial record", partial: true}
	errBadLength = &recordError{reason: "bad length"}
	errCRC       = &recordError{reason: "crc mismatch"}
	errPubLength = &recordError{reason: "bad publisher length"}
)

// recordView is a decoded record whose byte slices alias the input.
type recordView struct {
	offset    uint64
	time      uint64
	publisher []byte
	payload   []byte
}

// bodyLen reads and checks the len field of a frame header.
func bodyLen(hdr []byte) (int, error) {
	if len(hdr) < frameBytes {
		return 0, errPartial
	}
	n := binary.BigEndian.Uint32(hdr)
	if n < bodyHeader || n > maxBodyBytes {
		return 0, errBadLength
	}
	return int(n), nil
}

// decodeRecord decodes the record at the start of b and returns it with its
// encoded size. It never allocates.
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
	pubLen := int(binary.BigEndian.Uint16(body[16:]))
	if pubLen > n-bodyHeader {
		return recordView{}, 0, errPubLength
	}
	v := recordView{
		offset:    binary.BigEndian.Uint64(body),
		time:      binary.BigEndian.Uint64(body[8:]),
		publisher: body[bodyHeader : bodyHeader+pubLen : bodyHeader+pubLen],
		payload:   body[bodyHeader+pubLen:],
	}
	return v, frameBytes + n, nil
}

// toRecord copies a view into an owned Record.
func (v recordView) toRecord() Record {
	p := make([]byte, len(v.payload))
	copy(p, v.payload)
	return Record{Offset: v.offset, TimeMicros: v.time, Publisher: string(v.publisher), Payload: p}
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
