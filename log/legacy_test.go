package log

import (
	"encoding/binary"
	"hash/crc32"
)

// appendRecordV0 is the record encoder as it was before records had a
// version, a kind and a generation (commit 8eeb438), kept verbatim so that
// tests can write real old-format bytes:
//
//	len u32 | crc u32 | offset u64 | time u64 | pub_len u16 | pub | payload
func appendRecordV0(buf []byte, off, timeMicros uint64, publisher string, payload []byte) []byte {
	start := len(buf)
	body := bodyHeaderV0 + len(publisher) + len(payload)
	buf = binary.BigEndian.AppendUint32(buf, uint32(body))
	buf = append(buf, 0, 0, 0, 0) // crc, filled below
	buf = binary.BigEndian.AppendUint64(buf, off)
	buf = binary.BigEndian.AppendUint64(buf, timeMicros)
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(publisher)))
	buf = append(buf, publisher...)
	buf = append(buf, payload...)
	crc := crc32.Checksum(buf[start+frameBytes:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(buf[start+4:], crc)
	return buf
}

// recordSizeV0 is the encoded size of an old-format record.
func recordSizeV0(publisher string, payload []byte) int {
	return frameBytes + bodyHeaderV0 + len(publisher) + len(payload)
}

// dataRecord is the metadata of a KindData record at generation 0.
func dataRecord(off, timeMicros uint64, publisher string) recordMeta {
	return recordMeta{offset: off, time: timeMicros, publisher: publisher}
}
