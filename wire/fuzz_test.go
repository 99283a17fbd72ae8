package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"testing"
	"testing/iotest"
)

// The fuzz targets below cover every decoder in the package. Each is seeded
// with valid encodings of every variant, and checks two properties: the
// decoder never panics and fails only with the errors it documents, and a
// value it accepts encodes back to bytes that decode to the same value
// (for the binary codecs, to exactly the input bytes).

func FuzzParseMessage(f *testing.F) {
	for _, m := range sampleMessages() {
		b, err := MarshalMessage(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"type":"frobnicate","x":[1,{"y":null}]}`,
		`{"type":"error","message":"m","detail":{ "a" : "<&>", "n": 1e999 }}`,
		`{"type":"publish","tenant_id":"a","namespace":"b","stream":"c","payload":"aGk=","key":""}`,
		`{"type":"subscribe","tenant_id":"a","namespace":"b","stream":"c","start":{"offset":1}}`,
		`{"TYPE":"auth","Tenant_ID":"x"}`,
		`{"type":"auth","type":"zzz"}`,
		`{"type":"cache_value","value":null}`,
		`{"type":"cache_watch","tenant_id":"a","namespace":"b","cache":"c","key":"k","prefix":true,"from_offset":7,"watch_id":3,"request_id":1}`,
		`{"type":"cache_watch","tenant_id":"a","namespace":"b","cache":"c","key":"","retained":true,"request_id":2}`,
		`{"type":"cache_watch_ok","request_id":1,"watch_id":3,"offset":18446744073709551615,"resnapshot":true}`,
		`{"type":"cache_change","offset":5,"op":"put","key":"k","value":"dg==","expires_at_ms":1700000000000,"retained":true}`,
		`{"type":"cache_change","offset":6,"op":"expire","key":"k","value":null}`,
		`{"type":"cache_change","offset":6,"op":"delete","key":"k","value":""}`,
		`{"type":"cache_watch_state","offset":9,"count":2}`,
		`{"type":"cache_watch_lagged","watch_id":3,"resume_from":9}`,
		`{"type":"cache_put_if","tenant_id":"a","namespace":"b","cache":"c","key":"k","value":"dg==","ttl_ms":30000,"condition":"absent","request_id":7}`,
		`{"type":"cache_put_if","tenant_id":"a","namespace":"b","cache":"c","key":"k","value":"","condition":{"version":41,"x":1},"request_id":8}`,
		`{"type":"cache_put_if","condition":"present"}`, `{"type":"cache_put_if","condition":{"v":1}}`,
		`{"type":"cache_put_if","condition":null}`, `{"type":"cache_put_if","condition":{"version":-1}}`,
		`{"type":"cache_delete_if","tenant_id":"a","namespace":"b","cache":"c","key":"k","version":41,"request_id":9}`,
		`{ "type": "cache_condition_result", "applied": false, "version": 41, "request_id": 7 }`,
		`{"type":"cache_condition_result","applied":true,"request_id":7}`,
		`{"type":"cache_value","request_id":1,"key":"k","value":"dg==","version":18446744073709551615}`,
		`{"type":"publish_if","tenant_id":"acme","namespace":"games","stream":"match-7","payloads":["dGljaw=="],"expected_offset":120,"request_id":9}`,
		`{"type":"publish_if","tenant_id":"a","namespace":"b","stream":"c","payloads":[],"key":"","shard":1,"expected_offset":18446744073709551615,"request_id":1}`,
		`{"type":"group_seek","tenant_id":"a","namespace":"b","stream":"c","group":"g","start":{"offset":5},"if_new":true,"request_id":6}`,
		`{"type":"group_seek","start":"middle"}`, `{"type":"group_seek","start":{"offset":-1}}`, `{"type":"group_seek","start":null}`,
		`{"type":"group_nack","tenant_id":"a","namespace":"b","stream":"c","group":"g","offset":41,"attempts":1,"delay_ms":30000,"request_id":10}`,
		`{"type":"publish_if","expected_offset":-1}`, `{"type":"publish_if","expected_offset":1.5}`, `{"type":"publish_if","payloads":null}`,
		`{"type":"publish_refused","request_id":9,"offset_mismatch":{"tail":121}}`,
		`{"type":"commit","tenant_id":"a","namespace":"b","stream":"c","ops":[{"op":"publish","payload":"ZQ=="},{"op":"put","key":"k","value":"dg=="}],"request_id":1}`,
		`{"type":"commit","ops":null}`, `{"type":"commit","ops":[{"op":7}]}`, `{"type":"commit","expected_offset":-1}`,
		`{"type":"state_get","tenant_id":"a","namespace":"b","stream":"c","key":"k","shard":1,"request_id":2}`,
		`{"type":"state_value","request_id":2,"key":"k","value":null}`,
		`{"type":"publish_refused","request_id":9,"offset_mismatch":{"tail":-1}}`, `{"type":"publish_refused","offset_mismatch":null}`,
		`{"type":"publish_refused","request_id":9,"producer":{"reason":"sequence_gap","expected":-3}}`,
		`{"type":"publish_refused","request_id":9,"producer":{"reason":"made_up"}}`,
		`{"type":"publish_idempotent","tenant_id":"a","namespace":"b","stream":"c","payloads":["aGk="],"producer_id":1,"sequence":18446744073709551615}`,
		`{"type":"producer_init","tenant_id":"a","namespace":"b","stream":"c","request_id":-1}`,
		`{"type":"counter_add","tenant_id":"a","namespace":"b","cache":"c","key":"k","delta":-5,"request_id":1}`,
		`{"type":"counter_add","delta":9223372036854775808}`, `{"type":"counter_add","delta":1e3}`,
		`{"type":"counter_get","tenant_id":"a","namespace":"b","cache":"c","key":"k","request_id":2}`,
		`{"type":"counter_value","key":"k","value":9223372036854775807,"request_id":1}`,
		`{"type":"counter_value","key":"k","value":null,"request_id":2}`,
		`{"type":"group_records","records":[{"offset":1,"payload":null},{"offset":2,"payload":"","publisher":"p","timestamp_micros":3}],"request_id":1}`,
		`{"type":"group_records","records":null,"request_id":0}`, `{"type":"group_records","records":[{"offset":1,"payload":"eA==","attempts":0}]}`,
		`{"type":"group_records","records":[{"offset":1,"payload":"e\nA="}],"request_id":1}`,
		`{"type":5}`, `{}`, `null`, `[]`, `{"type":"publish","payload":"!!"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkParseMessage)
}

// checkParseMessage is the property every JSON message decoder keeps:
// ParseMessage fails only with invalid_request, and a message it accepts
// encodes to bytes that decode to the same message and encode the same
// again; Validate never panics on it.
func checkParseMessage(t *testing.T, b []byte) {
	m, err := ParseMessage(b)
	if err != nil {
		wantInvalid(t, err)
		return
	}
	if m == nil {
		t.Fatal("nil message without an error")
	}
	enc, err := MarshalMessage(m)
	if err != nil {
		t.Fatalf("accepted %q but cannot encode %#v: %v", b, m, err)
	}
	m2, err := ParseMessage(enc)
	if err != nil {
		t.Fatalf("re-encoding %q of %q does not parse: %v", enc, b, err)
	}
	if m2.MessageType() != m.MessageType() {
		t.Fatalf("type %q became %q", m.MessageType(), m2.MessageType())
	}
	if !sameMessage(t, m, m2) {
		t.Fatalf("round trip of %q via %q:\n first  %#v\n second %#v", b, enc, m, m2)
	}
	enc2, err := MarshalMessage(m2)
	if err != nil || !bytes.Equal(enc, enc2) {
		t.Fatalf("encoding is not stable: %q then %q (%v)", enc, enc2, err)
	}
	if v, ok := m.(Validator); ok {
		_ = v.Validate() // must not panic on anything that parsed
	}
}

func FuzzParseBinaryPublish(f *testing.F) {
	for _, p := range samplePublishes() {
		for _, flags := range []uint16{PublishFlags(false, false), PublishFlags(true, false), PublishFlags(false, true), PublishFlags(true, true)} {
			f.Add(flags, p.AppendFrame(nil, flags)[HeaderLen:])
		}
	}
	for _, p := range sampleIdempotentPublishes() {
		for _, keyed := range []bool{false, true} {
			flags := PublishFlags(true, keyed) | FlagBinaryPublishIdempotent
			f.Add(flags, p.AppendFrame(nil, flags)[HeaderLen:])
		}
	}
	f.Add(FlagBinaryPublishBatch|FlagBinaryPublishIdempotent, []byte{0, 0, 0, 0, 0, 0, 0, 1})
	f.Add(FlagBinaryPublishBatch, []byte{0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, flags uint16, b []byte) {
		p, err := ParseBinaryPublish(flags, b)
		if err != nil {
			wantInvalid(t, err)
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("decoded publish does not validate: %v", err)
		}
		frame := p.AppendFrame(nil, flags)
		h, err := ParseFrameHeader(frame)
		if err != nil || h.Flags != flags || int(h.Length) != len(b) {
			t.Fatalf("re-encoded header %+v, %v for a %d-byte body", h, err, len(b))
		}
		if !bytes.Equal(frame[HeaderLen:], b) {
			t.Fatalf("flags %#x: re-encoding\n got  % x\n want % x", flags, frame[HeaderLen:], b)
		}
		p2, err := ParseBinaryPublish(flags, frame[HeaderLen:])
		if err != nil || !reflect.DeepEqual(p, p2) {
			t.Fatalf("second decode %+v, %v; first %+v", p2, err, p)
		}
	})
}

func FuzzParseSharedEventBatch(f *testing.F) {
	for _, flags := range optionFlagSets() {
		for _, e := range sampleEventBatches() {
			f.Add(flags, AppendSharedEventBatchFrame(nil, flags, &e.EventBatchHeader, e.Payloads)[HeaderLen:])
		}
	}
	f.Fuzz(func(t *testing.T, flags uint16, b []byte) {
		e, err := ParseSharedEventBatch(flags, b)
		if err != nil {
			wantInvalid(t, err)
			return
		}
		if flags&FlagEventBatchTimestamps != 0 && len(e.Timestamps) != len(e.Payloads) {
			t.Fatalf("%d timestamps for %d payloads", len(e.Timestamps), len(e.Payloads))
		}
		frame := AppendSharedEventBatchFrame(nil, flags, &e.EventBatchHeader, e.Payloads)
		if !bytes.Equal(frame[HeaderLen:], b) {
			t.Fatalf("flags %#x: re-encoding\n got  % x\n want % x", flags, frame[HeaderLen:], b)
		}
		if h, err := ParseFrameHeader(frame); err != nil || h.Flags != flags || int(h.Length) != len(b) {
			t.Fatalf("re-encoded header %+v, %v", h, err)
		}
		e2, err := ParseSharedEventBatch(flags, frame[HeaderLen:])
		if err != nil || !reflect.DeepEqual(e, e2) {
			t.Fatalf("second decode %+v, %v; first %+v", e2, err, e)
		}
	})
}

func FuzzParseEventBatchWithID(f *testing.F) {
	for _, payloads := range [][][]byte{{}, {[]byte("x")}, {[]byte("a"), {}, []byte("ccc")}} {
		f.Add(AppendEventBatchWithIDFrame(nil, 77, payloads)[HeaderLen:])
	}
	f.Add(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, 1), 1<<31))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, payloads, err := ParseEventBatchWithID(b)
		if err != nil {
			wantInvalid(t, err)
			if id != 0 || payloads != nil {
				t.Fatalf("error with values %d %q", id, payloads)
			}
			return
		}
		frame := AppendEventBatchWithIDFrame(nil, id, payloads)
		if h, err := ParseFrameHeader(frame); err != nil || h.Flags != FlagBinaryEventBatch || int(h.Length) != len(b) {
			t.Fatalf("re-encoded header %+v, %v", h, err)
		}
		if !bytes.Equal(frame[HeaderLen:], b) {
			t.Fatalf("re-encoding\n got  % x\n want % x", frame[HeaderLen:], b)
		}
		id2, payloads2, err := ParseEventBatchWithID(frame[HeaderLen:])
		if err != nil || id2 != id || !reflect.DeepEqual(payloads, payloads2) {
			t.Fatalf("second decode %d %q %v", id2, payloads2, err)
		}
	})
}

func FuzzFrameReader(f *testing.F) {
	var stream []byte
	for _, m := range sampleMessages() {
		stream, _ = AppendMessageFrame(stream, m)
	}
	f.Add(stream, uint16(0), false)
	for _, p := range samplePublishes() {
		for _, flags := range []uint16{PublishFlags(false, false), PublishFlags(true, false), PublishFlags(false, true), PublishFlags(true, true)} {
			f.Add(p.AppendFrame(nil, flags), uint16(0), true)
		}
	}
	for _, flags := range optionFlagSets() {
		e := sampleEventBatches()[0]
		f.Add(AppendSharedEventBatchFrame(nil, flags, &e.EventBatchHeader, e.Payloads), uint16(64), false)
	}
	f.Add(AppendEventBatchWithIDFrame(nil, 3, [][]byte{[]byte("x")}), uint16(16), true)
	f.Add(FrameHeader{Length: 1 << 30}.Append(nil), uint16(0), false)
	f.Add([]byte("FLX1\x00\x02\x00\x00\x00\x00\x00\x00"), uint16(0), false)
	f.Fuzz(func(t *testing.T, b []byte, limit uint16, oneByte bool) {
		var r io.Reader = bytes.NewReader(b)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		max := uint32(limit)
		if max == 0 {
			max = DefaultMaxFrameBytes
		}
		fr := NewFrameReader(r, uint32(limit))
		off := 0
		for {
			fm, err := fr.Next()
			if err != nil {
				checkFrameReaderEnd(t, b[off:], max, err)
				return
			}
			if uint32(len(fm.Payload)) > max {
				t.Fatalf("payload of %d bytes over the %d limit", len(fm.Payload), max)
			}
			enc := AppendFrame(nil, fm.Flags, fm.Payload)
			if !bytes.HasPrefix(b[off:], enc) {
				t.Fatalf("frame at %d re-encodes to bytes that are not the input", off)
			}
			off += len(enc)
		}
	})
}

// checkFrameReaderEnd checks that the error a FrameReader stopped with is
// the one the unread rest of its input calls for.
func checkFrameReaderEnd(t *testing.T, rest []byte, max uint32, err error) {
	t.Helper()
	if len(rest) == 0 {
		if err != io.EOF {
			t.Fatalf("at a frame boundary with no input left: %v, want io.EOF", err)
		}
		return
	}
	h, herr := ParseFrameHeader(rest)
	switch {
	case len(rest) < HeaderLen:
		if err != io.ErrUnexpectedEOF {
			t.Fatalf("partial header: %v", err)
		}
	case herr != nil:
		wantInvalid(t, err)
		if err.Error() != herr.Error() {
			t.Fatalf("header error %v, ParseFrameHeader says %v", err, herr)
		}
	case h.Length > max:
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("frame of %d over %d: %v", h.Length, max, err)
		}
		wantInvalid(t, err)
	case uint64(len(rest)) < HeaderLen+uint64(h.Length):
		if err != io.ErrUnexpectedEOF {
			t.Fatalf("partial payload: %v", err)
		}
	default:
		t.Fatalf("reader stopped with %v on a whole frame", err)
	}
}

func FuzzParseFrameHeader(f *testing.F) {
	f.Add(FrameHeader{}.Append(nil))
	f.Add(FrameHeader{Flags: 0xffff, Length: 1<<32 - 1}.Append(nil))
	f.Add(AppendFrame(nil, FlagBinaryEventBatchShared|FlagEventBatchOffsets, []byte("xyz")))
	f.Add([]byte("FLX1\x00\x02\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("FLX2\x00\x01\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("FLX1\x00\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseFrameHeader(b)
		var want error
		switch {
		case len(b) < HeaderLen:
			want = ErrShortHeader
		case binary.BigEndian.Uint32(b) != Magic:
			want = ErrBadMagic
		case binary.BigEndian.Uint16(b[4:]) != Version:
			want = ErrBadVersion
		}
		if want != nil {
			if !errors.Is(err, want) {
				t.Fatalf("% x: %v, want %v", b, err, want)
			}
			wantInvalid(t, err)
			return
		}
		if err != nil {
			t.Fatalf("valid header % x refused: %v", b[:HeaderLen], err)
		}
		if enc := h.Append(nil); !bytes.Equal(enc, b[:HeaderLen]) {
			t.Fatalf("header re-encodes as % x, input % x", enc, b[:HeaderLen])
		}
	})
}

// timeoutReader fails the reads that pattern's bits (taken in turn) pick
// with a timeout, and hands out at most a few bytes per successful read.
type timeoutReader struct {
	r       io.Reader
	pattern uint64
	n       uint
}

func (tr *timeoutReader) Read(p []byte) (int, error) {
	bit := tr.pattern>>(tr.n%64)&1 == 1
	tr.n++
	if bit {
		return 0, os.ErrDeadlineExceeded
	}
	return tr.r.Read(p[:min(len(p), 1+int(tr.n%7))])
}

// A FrameReader whose reads keep timing out, anywhere in a frame, yields
// the same frames and the same end as one that reads the input cleanly.
func FuzzFrameReaderResume(f *testing.F) {
	e := sampleEventBatches()[0]
	stream := AppendSharedEventBatchFrame(nil, optionFlagSets()[0], &e.EventBatchHeader, e.Payloads)
	stream = AppendFrame(stream, 0, nil)
	stream = AppendFrame(stream, 1, bytes.Repeat([]byte("z"), 300))
	f.Add(stream, uint16(0), uint64(0x5555), false)
	f.Add(stream[:len(stream)-7], uint16(0), uint64(0xf0f0f0f0), true)
	f.Add(stream, uint16(100), uint64(1), true)
	f.Fuzz(func(t *testing.T, b []byte, limit uint16, pattern uint64, owned bool) {
		if pattern == ^uint64(0) {
			pattern = 0 // every read a timeout would never progress
		}
		read := func(fr *FrameReader) (Frame, error) {
			if owned {
				return fr.NextOwned()
			}
			return fr.Next()
		}
		clean := NewFrameReader(bytes.NewReader(b), uint32(limit))
		stutter := NewFrameReader(&timeoutReader{r: bytes.NewReader(b), pattern: pattern}, uint32(limit))
		for i := 0; ; i++ {
			want, werr := read(clean)
			var got Frame
			var gerr error
			for tries := 0; ; tries++ {
				got, gerr = read(stutter)
				if !errors.Is(gerr, os.ErrDeadlineExceeded) {
					break
				}
				if tries > 64*(len(b)+2) {
					t.Fatal("no progress through timeouts")
				}
			}
			if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
				t.Fatalf("frame %d: error %v, clean read says %v", i, gerr, werr)
			}
			if werr != nil {
				return
			}
			if got.Flags != want.Flags || !bytes.Equal(got.Payload, want.Payload) {
				t.Fatalf("frame %d differs from the clean read", i)
			}
		}
	})
}

// FuzzLeadingType checks the shortcut ParseMessage takes for a message
// that starts with its type against a full decode: whenever it answers,
// a valid message has that type and no other.
func FuzzLeadingType(f *testing.F) {
	f.Add([]byte(`{"type":"cache_put","key":"k"}`))
	f.Add([]byte(`{"type":"a","type":"b"}`))
	f.Add([]byte(`{"type":"a\u0062"}`))
	f.Add([]byte(`{"type":"cache_get","x":{"type":"y"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, ok := leadingType(b)
		if !ok || !json.Valid(b) {
			return
		}
		var head struct {
			Type *string `json:"type"`
		}
		if err := json.Unmarshal(b, &head); err != nil {
			return // valid JSON that is not an object of this shape
		}
		if head.Type == nil || *head.Type != typ {
			t.Fatalf("leadingType(%q) = %q, a full decode %v", b, typ, head.Type)
		}
	})
}
