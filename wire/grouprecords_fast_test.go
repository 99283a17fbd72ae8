package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func groupRecordsSamples() (plain, escaped []*GroupRecords) {
	big := []byte(strings.Repeat("\x00\xffpayload", 512))
	plain = []*GroupRecords{
		{Records: []GroupRecord{}, RequestID: 0},
		{Records: nil, RequestID: 1},
		{Records: []GroupRecord{{Offset: 41, Payload: []byte("x"), Attempts: 1}}, RequestID: 1},
		{Records: []GroupRecord{{Offset: 0, Payload: []byte{}}}, RequestID: 2},
		{Records: []GroupRecord{{Offset: 7, Payload: nil}}, RequestID: 3},
		{Records: []GroupRecord{
			{Offset: 1<<64 - 1, Payload: []byte("ab"), Attempts: 1<<32 - 1, Publisher: "svc", TimestampMicros: 1<<64 - 1},
			{Offset: 42, Payload: []byte{}, Attempts: 3, Publisher: "producer/日本語", TimestampMicros: 1767225600000000},
			{Offset: 43, Payload: nil, TimestampMicros: 1},
			{Offset: 44, Payload: []byte("abc"), Publisher: "p"},
		}, RequestID: 1<<64 - 1},
		{Records: []GroupRecord{{Offset: 100, Payload: big, Attempts: 1}, {Offset: 101, Payload: big[:4095], Attempts: 2}, {Offset: 102, Payload: big[:4094]}}, RequestID: 9},
	}
	escaped = []*GroupRecords{
		{Records: []GroupRecord{{Offset: 1, Payload: []byte("v"), Publisher: `say "hi"`}}, RequestID: 1},
		{Records: []GroupRecord{{Offset: 1, Payload: []byte("v")}, {Offset: 2, Payload: []byte("v"), Publisher: "a<b>"}}, RequestID: 2},
		{Records: []GroupRecord{{Offset: 1, Payload: []byte("v"), Publisher: "back\\slash"}}, RequestID: 3},
		{Records: []GroupRecord{{Offset: 1, Payload: []byte("v"), Publisher: "tab\there"}}, RequestID: 4},
		{Records: []GroupRecord{{Offset: 1, Payload: []byte("v"), Publisher: "line\u2028sep"}}, RequestID: 5},
		{Records: []GroupRecord{{Offset: 1, Payload: []byte("v"), Publisher: "bad\xffutf8"}}, RequestID: 6},
	}
	return plain, escaped
}

func TestGroupRecordsFastPath(t *testing.T) {
	plain, escaped := groupRecordsSamples()
	for _, m := range plain {
		if !checkSameAsGeneral(t, m) {
			t.Errorf("%#v did not take the fast path", m)
		}
	}
	for _, m := range escaped {
		if checkSameAsGeneral(t, m) {
			t.Errorf("%#v, which encoding/json escapes, took the fast path", m)
		}
	}
	b, _ := MarshalMessage(&GroupRecords{Records: []GroupRecord{{Offset: 41, Payload: []byte("x"), Attempts: 1}}, RequestID: 1})
	if want := `{"type":"group_records","records":[{"offset":41,"payload":"eA==","attempts":1}],"request_id":1}`; string(b) != want {
		t.Fatalf("wrote %s, the spec's form is %s", b, want)
	}
}

// The payloads of one answer share a buffer, but each is capped at its
// own length: appending to one leaves the next alone.
func TestGroupRecordsFastPayloadsAreSeparate(t *testing.T) {
	b, _ := MarshalMessage(&GroupRecords{Records: []GroupRecord{{Offset: 1, Payload: []byte("one")}, {Offset: 2, Payload: []byte{}}, {Offset: 3, Payload: []byte("three")}}})
	m, ok := parseGroupRecords(b)
	if !ok {
		t.Fatalf("%s did not take the fast path", b)
	}
	for i := range m.Records {
		_ = append(m.Records[i].Payload, "XXXXXXXX"...)
	}
	if got := m.Records; string(got[0].Payload) != "one" || string(got[1].Payload) != "" || got[1].Payload == nil || string(got[2].Payload) != "three" {
		t.Fatalf("payloads %q %q %q", got[0].Payload, got[1].Payload, got[2].Payload)
	}
}

// Spellings that are not MarshalMessage's are left to the general path.
func TestGroupRecordsFastPathLeavesOtherForms(t *testing.T) {
	for _, s := range []string{
		`{"type":"group_records","records":[],"request_id":1} `,
		`{"type":"group_records", "records":[],"request_id":1}`,
		`{"type":"group_records","records":[ ],"request_id":1}`,
		`{"type":"group_records","request_id":1,"records":[]}`,
		`{"type":"group_records","records":[],"request_id":1,"x":2}`,
		`{"type":"group_records","records":[],"request_id":01}`,
		`{"type":"group_records","records":[],"request_id":18446744073709551616}`,
		`{"type":"group_records","records":{},"request_id":1}`,
		`{"type":"group_records","records":[{"offset":1,"payload":"eA=="},],"request_id":1}`,
		`{"type":"group_records","records":[{"payload":"eA==","offset":1}],"request_id":1}`,
		`{"type":"group_records","records":[{"offset":1,"payload":"eA==","x":1}],"request_id":1}`,
		`{"type":"group_records","records":[{"offset":1,"payload":"eA"}],"request_id":1}`,
		`{"type":"group_records","records":[{"offset":1,"payload":"eA==\n"}],"request_id":1}`,
		`{"type":"group_records","records":[{"offset":1,"payload":"e\/A="}],"request_id":1}`,
		`{"type":"group_records","records":[{"offset":1,"payload":"eA==","attempts":0}],"request_id":1}`,
		`{"type":"group_records","records":[{"offset":1,"payload":"eA==","attempts":4294967296}],"request_id":1}`,
		`{"type":"group_records","records":[{"offset":1,"payload":"eA==","publisher":""}],"request_id":1}`,
		`{"type":"group_records","records":[{"offset":1,"payload":"eA==","publisher":"\u0041"}],"request_id":1}`,
		`{"type":"group_records","records":[{"offset":1,"payload":"eA==","timestamp_micros":0}],"request_id":1}`,
		`{"type":"group_records","records":[{"offset":1,"payload":"eA==","publisher":"p","attempts":1}],"request_id":1}`,
		`{"type":"group_records","records":[{"offset":-1,"payload":"eA=="}],"request_id":1}`,
		`{"type":"group_records","records":[{"offset":1,"payload":"eA=="}]`,
	} {
		if _, ok := parseGroupRecords([]byte(s)); ok {
			t.Errorf("%s took the group_records fast path", s)
		}
	}
}

// groupRecordsFromFuzz builds an answer of n%6 records from the fuzzer's
// values: data split between them, nil payloads and the optional fields
// chosen by bits of shape, records nil when shape's top bit is set.
func groupRecordsFromFuzz(data []byte, n uint8, offset uint64, attempts uint32, publisher string, ts uint64, shape uint16, reqID uint64) *GroupRecords {
	m := &GroupRecords{RequestID: reqID}
	if shape&0x8000 != 0 {
		return m
	}
	k := int(n % 6)
	m.Records = make([]GroupRecord, k)
	for i := range m.Records {
		r := &m.Records[i]
		r.Offset = offset + uint64(i)
		r.Payload = data[i*len(data)/k : (i+1)*len(data)/k]
		bits := shape >> (3 * i)
		if bits&1 != 0 {
			r.Payload = nil
		} else if r.Payload == nil {
			r.Payload = []byte{}
		}
		if bits&2 != 0 {
			r.Attempts = attempts >> i
			r.Publisher = publisher
		}
		if bits&4 != 0 {
			r.TimestampMicros = ts >> i
		}
	}
	return m
}

// FuzzGroupRecordsFastEncode: whatever the records, MarshalMessage writes
// what encoding/json writes, and ParseMessage reads it back as
// encoding/json does.
func FuzzGroupRecordsFastEncode(f *testing.F) {
	f.Add([]byte("hello, world"), uint8(3), uint64(41), uint32(1), "svc", uint64(1767225600000000), uint16(0x0ff2), uint64(7))
	f.Add([]byte{}, uint8(0), uint64(0), uint32(0), "", uint64(0), uint16(0), uint64(0))
	f.Add([]byte{0, 0xff}, uint8(2), uint64(1<<64-1), uint32(1<<32-1), "a<b>", uint64(1), uint16(0x8000), uint64(1<<64-1))
	f.Add([]byte(strings.Repeat("x", 4096)), uint8(5), uint64(9), uint32(2), `q"uote`, uint64(2), uint16(0x1249), uint64(3))
	f.Fuzz(func(t *testing.T, data []byte, n uint8, offset uint64, attempts uint32, publisher string, ts uint64, shape uint16, reqID uint64) {
		checkSameAsGeneral(t, groupRecordsFromFuzz(data, n, offset, attempts, publisher, ts, shape, reqID))
	})
}

// FuzzGroupRecordsFastParse: any bytes the fast decoder takes,
// encoding/json decodes to the same message.
func FuzzGroupRecordsFastParse(f *testing.F) {
	plain, escaped := groupRecordsSamples()
	for _, m := range append(plain, escaped...) {
		b, _ := MarshalMessage(m)
		f.Add(b)
	}
	f.Add([]byte(`{"type":"group_records","records":[{"offset":1,"payload":"eB==","attempts":1}],"request_id":1}`))
	f.Add([]byte(`{"type":"group_records","records":[{"offset":1,"payload":"eA==","publisher":"\u0041"}],"request_id":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, ok := parseGroupRecords(b)
		if !ok {
			return
		}
		var head struct {
			Type *string `json:"type"`
		}
		if err := json.Unmarshal(b, &head); err != nil || head.Type == nil || *head.Type != "group_records" {
			t.Fatalf("%q: fast group_records, general type %v (%v)", b, head.Type, err)
		}
		var general GroupRecords
		if err := json.Unmarshal(b, &general); err != nil || !reflect.DeepEqual(*m, general) {
			t.Fatalf("%q: fast %#v, encoding/json %#v (%v)", b, *m, general, err)
		}
	})
}

// BenchmarkGroupRecords compares the fast path with encoding/json on a
// poll of 100 records of 4 KiB, the shape of felix bench group.
func BenchmarkGroupRecords(b *testing.B) {
	m := &GroupRecords{Records: make([]GroupRecord, 100), RequestID: 12345}
	for i := range m.Records {
		m.Records[i] = GroupRecord{Offset: 1_000_000 + uint64(i), Payload: bytes.Repeat([]byte{byte(i)}, 4096), Attempts: 1}
	}
	enc, _ := MarshalMessage(m)
	b.Run("encode/fast", func(b *testing.B) {
		b.SetBytes(int64(len(enc)))
		for b.Loop() {
			_, _ = MarshalMessage(m)
		}
	})
	b.Run("encode/json", func(b *testing.B) {
		b.SetBytes(int64(len(enc)))
		for b.Loop() {
			_, _ = marshalMessageGeneral(m)
		}
	})
	b.Run("decode/fast", func(b *testing.B) {
		b.SetBytes(int64(len(enc)))
		for b.Loop() {
			_, _ = ParseMessage(enc)
		}
	})
	b.Run("decode/json", func(b *testing.B) {
		b.SetBytes(int64(len(enc)))
		for b.Loop() {
			var v GroupRecords
			_ = json.Unmarshal(enc, &v)
		}
	})
}
