package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// splitFrame parses the header of a single whole frame and returns its
// flags and body, failing when the declared length does not match.
func splitFrame(t testing.TB, frame []byte) (uint16, []byte) {
	t.Helper()
	h, err := ParseFrameHeader(frame)
	if err != nil {
		t.Fatalf("header: %v", err)
	}
	body := frame[HeaderLen:]
	if int(h.Length) != len(body) {
		t.Fatalf("header declares %d bytes, body has %d", h.Length, len(body))
	}
	return h.Flags, body
}

func samplePublishes() []BinaryPublish {
	return []BinaryPublish{
		{RequestID: 42, Key: []byte("user-7"), TenantID: "acme", Namespace: "prod", Stream: "events",
			Payloads: [][]byte{[]byte("one"), {}, bytes.Repeat([]byte{0xab}, 300)}},
		{RequestID: 1<<64 - 1, Key: []byte{0}, TenantID: "t", Namespace: "n", Stream: "s", Payloads: [][]byte{}},
		{TenantID: "", Namespace: "", Stream: "", Payloads: [][]byte{[]byte("x")}},
	}
}

func TestBinaryPublishRoundTrip(t *testing.T) {
	for _, acked := range []bool{false, true} {
		for _, keyed := range []bool{false, true} {
			flags := PublishFlags(acked, keyed)
			for i, p := range samplePublishes() {
				name := fmt.Sprintf("acked=%v keyed=%v #%d", acked, keyed, i)
				if err := p.Validate(); err != nil {
					t.Fatalf("%s: validate: %v", name, err)
				}
				frame := p.AppendFrame([]byte("prefix"), flags)
				if !bytes.HasPrefix(frame, []byte("prefix")) {
					t.Fatalf("%s: AppendFrame dropped dst", name)
				}
				gotFlags, body := splitFrame(t, frame[len("prefix"):])
				if gotFlags != flags {
					t.Fatalf("%s: flags %#x want %#x", name, gotFlags, flags)
				}
				if len(body) != p.BodyLen(flags) {
					t.Fatalf("%s: body %d bytes, BodyLen says %d", name, len(body), p.BodyLen(flags))
				}
				got, err := ParseBinaryPublish(flags, body)
				if err != nil {
					t.Fatalf("%s: parse: %v", name, err)
				}
				want := p
				if !acked {
					want.RequestID = 0
				}
				if !keyed {
					want.Key = nil
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s:\n got  %+v\n want %+v", name, got, want)
				}
			}
		}
	}
}

func TestBinaryPublishLayout(t *testing.T) {
	p := BinaryPublish{RequestID: 0x0102030405060708, Key: []byte("k1"), TenantID: "ac", Namespace: "n", Stream: "st",
		Payloads: [][]byte{[]byte("P")}}
	_, body := splitFrame(t, p.AppendFrame(nil, PublishFlags(true, true)))
	want := []byte{
		1, 2, 3, 4, 5, 6, 7, 8, // request_id
		0, 2, 'k', '1', // key, after request_id and before tenant
		0, 2, 'a', 'c', // tenant
		0, 1, 'n', // namespace
		0, 2, 's', 't', // stream
		0, 0, 0, 1, // count
		0, 0, 0, 1, 'P', // payload
	}
	if !bytes.Equal(body, want) {
		t.Fatalf("acked+keyed body\n got  % x\n want % x", body, want)
	}
	_, plain := splitFrame(t, p.AppendFrame(nil, PublishFlags(false, false)))
	if !bytes.Equal(plain, want[12:]) {
		t.Fatalf("plain body\n got  % x\n want % x", plain, want[12:])
	}
	_, keyed := splitFrame(t, p.AppendFrame(nil, PublishFlags(false, true)))
	if !bytes.Equal(keyed, want[8:]) {
		t.Fatalf("keyed body\n got  % x\n want % x", keyed, want[8:])
	}
	_, acked := splitFrame(t, p.AppendFrame(nil, PublishFlags(true, false)))
	if !bytes.Equal(acked, append(append([]byte{}, want[:8]...), want[12:]...)) {
		t.Fatalf("acked body % x", acked)
	}
}

func TestPublishFlags(t *testing.T) {
	cases := map[[2]bool]uint16{
		{false, false}: 0x0001,
		{true, false}:  0x0003,
		{false, true}:  0x0081,
		{true, true}:   0x0083,
	}
	for in, want := range cases {
		if got := PublishFlags(in[0], in[1]); got != want {
			t.Errorf("PublishFlags(%v, %v) = %#x, want %#x", in[0], in[1], got, want)
		}
	}
}

func TestBinaryPublishEmptyKeyIsNoKey(t *testing.T) {
	p := BinaryPublish{Key: []byte{}, TenantID: "a", Namespace: "b", Stream: "c", Payloads: [][]byte{[]byte("x")}}
	flags := PublishFlags(false, true)
	_, body := splitFrame(t, p.AppendFrame(nil, flags))
	got, err := ParseBinaryPublish(flags, body)
	if err != nil || got.Key != nil {
		t.Fatalf("empty key decodes as %#v, %v; want nil", got.Key, err)
	}
}

func TestBinaryPublishMalformed(t *testing.T) {
	p := samplePublishes()[0]
	for _, flags := range []uint16{PublishFlags(false, false), PublishFlags(true, false), PublishFlags(false, true), PublishFlags(true, true)} {
		_, body := splitFrame(t, p.AppendFrame(nil, flags))
		for n := 0; n < len(body); n++ {
			if _, err := ParseBinaryPublish(flags, body[:n]); err == nil {
				t.Fatalf("flags %#x: body cut to %d of %d bytes accepted", flags, n, len(body))
			} else {
				wantInvalid(t, err)
			}
		}
		if _, err := ParseBinaryPublish(flags, append(body[:len(body):len(body)], 0)); err == nil {
			t.Fatalf("flags %#x: trailing byte accepted", flags)
		} else {
			wantInvalid(t, err)
		}
	}
	// A count far larger than the body is refused before allocating.
	huge := []byte{0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}
	if _, err := ParseBinaryPublish(FlagBinaryPublishBatch, huge); err == nil {
		t.Fatal("count of 2^32-1 in a 10-byte body accepted")
	} else {
		wantInvalid(t, err)
	}
	// A payload length past the end.
	bad := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 'x'}
	if _, err := ParseBinaryPublish(FlagBinaryPublishBatch, bad); err == nil {
		t.Fatal("payload length past the end accepted")
	}
}

func TestBinaryPublishValidate(t *testing.T) {
	long := strings.Repeat("x", 1<<16)
	for _, p := range []BinaryPublish{
		{TenantID: long}, {Namespace: long}, {Stream: long}, {Key: []byte(long)},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("oversized field accepted: %d %d %d %d", len(p.TenantID), len(p.Namespace), len(p.Stream), len(p.Key))
		} else {
			wantInvalid(t, err)
		}
	}
	ok := BinaryPublish{TenantID: long[:1<<16-1], Key: []byte(long[:1<<16-1])}
	if err := ok.Validate(); err != nil {
		t.Errorf("65535-byte names refused: %v", err)
	}
}

// optionFlagSets returns every combination of the event batch option flags.
func optionFlagSets() []uint16 {
	opts := []uint16{FlagEventBatchOffsets, FlagEventBatchSkipped, FlagEventBatchTimestamps, FlagEventBatchPublisher}
	var out []uint16
	for mask := 0; mask < 1<<len(opts); mask++ {
		f := FlagBinaryEventBatchShared
		for i, o := range opts {
			if mask&(1<<i) != 0 {
				f |= o
			}
		}
		out = append(out, f)
	}
	return out
}

func sampleEventBatches() []SharedEventBatch {
	return []SharedEventBatch{
		{EventBatchHeader: EventBatchHeader{BaseOffset: 1200, SkippedBefore: 3, Timestamps: []uint64{1, 2, 1<<64 - 1}, Publisher: "svc-orders"},
			Payloads: [][]byte{[]byte("a"), {}, bytes.Repeat([]byte{7}, 100)}},
		{EventBatchHeader: EventBatchHeader{BaseOffset: 1<<64 - 1, Publisher: ""}, Payloads: [][]byte{}},
		{EventBatchHeader: EventBatchHeader{Timestamps: []uint64{9}}, Payloads: [][]byte{[]byte("only")}},
	}
}

// expectedBatch is what decoding an encoded batch yields under flags: the
// parts the flags leave out are zero, and timestamps are one per payload.
func expectedBatch(e SharedEventBatch, flags uint16) SharedEventBatch {
	var want SharedEventBatch
	want.Payloads = e.Payloads
	if flags&FlagEventBatchOffsets != 0 {
		want.BaseOffset = e.BaseOffset
	}
	if flags&FlagEventBatchSkipped != 0 {
		want.SkippedBefore = e.SkippedBefore
	}
	if flags&FlagEventBatchTimestamps != 0 {
		want.Timestamps = make([]uint64, len(e.Payloads))
		copy(want.Timestamps, e.Timestamps)
	}
	if flags&FlagEventBatchPublisher != 0 {
		want.Publisher = e.Publisher
	}
	return want
}

func TestSharedEventBatchRoundTrip(t *testing.T) {
	sets := optionFlagSets()
	if len(sets) != 16 {
		t.Fatalf("%d flag sets", len(sets))
	}
	for _, flags := range sets {
		for i, e := range sampleEventBatches() {
			name := fmt.Sprintf("flags=%#04x #%d", flags, i)
			frame := AppendSharedEventBatchFrame(nil, flags, &e.EventBatchHeader, e.Payloads)
			gotFlags, body := splitFrame(t, frame)
			if gotFlags != flags {
				t.Fatalf("%s: header flags %#x", name, gotFlags)
			}
			if len(body) != SharedEventBatchLen(flags, &e.EventBatchHeader, e.Payloads) {
				t.Fatalf("%s: body %d bytes, SharedEventBatchLen says %d", name, len(body), SharedEventBatchLen(flags, &e.EventBatchHeader, e.Payloads))
			}
			got, err := ParseSharedEventBatch(flags, body)
			if err != nil {
				t.Fatalf("%s: parse: %v", name, err)
			}
			if want := expectedBatch(e, flags); !reflect.DeepEqual(got, want) {
				t.Errorf("%s:\n got  %+v\n want %+v", name, got, want)
			}
			for n := 0; n < len(body); n++ {
				if _, err := ParseSharedEventBatch(flags, body[:n]); err == nil {
					t.Fatalf("%s: cut to %d of %d bytes accepted", name, n, len(body))
				} else {
					wantInvalid(t, err)
				}
			}
			if _, err := ParseSharedEventBatch(flags, append(body[:len(body):len(body)], 0)); err == nil {
				t.Fatalf("%s: trailing byte accepted", name)
			}
		}
	}
}

func TestSharedEventBatchLayout(t *testing.T) {
	h := EventBatchHeader{BaseOffset: 0x10, SkippedBefore: 0x20, Timestamps: []uint64{0x30, 0x40}, Publisher: "pb"}
	flags := FlagBinaryEventBatchShared | EventBatchOptionFlags
	_, body := splitFrame(t, AppendSharedEventBatchFrame(nil, flags, &h, [][]byte{[]byte("A"), []byte("BC")}))
	want := []byte{
		0, 0, 0, 0, 0, 0, 0, 0x10, // base_offset
		0, 0, 0, 0, 0, 0, 0, 0x20, // skipped_before
		0, 0, 0, 2, // count
		0, 0, 0, 1, 'A',
		0, 0, 0, 2, 'B', 'C',
		0, 0, 0, 0, 0, 0, 0, 0x30, // timestamps, one per event
		0, 0, 0, 0, 0, 0, 0, 0x40,
		0, 2, 'p', 'b', // publisher, once
	}
	if !bytes.Equal(body, want) {
		t.Fatalf("body\n got  % x\n want % x", body, want)
	}
	// Without options the body is only the count and the payloads, and a
	// nil header is allowed.
	_, bare := splitFrame(t, AppendSharedEventBatchFrame(nil, FlagBinaryEventBatchShared, nil, [][]byte{[]byte("A"), []byte("BC")}))
	if !bytes.Equal(bare, want[16:31]) {
		t.Fatalf("bare body % x", bare)
	}
	if EventBatchOptionFlags != 0x0010|0x0020|0x2000|0x4000 {
		t.Fatalf("EventBatchOptionFlags = %#x", EventBatchOptionFlags)
	}
}

func TestSharedEventBatchMissingTimestampsEncodeAsZero(t *testing.T) {
	flags := FlagBinaryEventBatchShared | FlagEventBatchTimestamps
	h := EventBatchHeader{Timestamps: []uint64{5}}
	_, body := splitFrame(t, AppendSharedEventBatchFrame(nil, flags, &h, [][]byte{{1}, {2}, {3}}))
	got, err := ParseSharedEventBatch(flags, body)
	if err != nil || !reflect.DeepEqual(got.Timestamps, []uint64{5, 0, 0}) {
		t.Fatalf("timestamps %v, %v", got.Timestamps, err)
	}
}

func TestEventBatchWithID(t *testing.T) {
	for _, payloads := range [][][]byte{{}, {[]byte("x")}, {[]byte("a"), {}, []byte("ccc")}} {
		frame := AppendEventBatchWithIDFrame(nil, 77, payloads)
		flags, body := splitFrame(t, frame)
		if flags != FlagBinaryEventBatch {
			t.Fatalf("flags %#x", flags)
		}
		id, got, err := ParseEventBatchWithID(body)
		if err != nil || id != 77 || !reflect.DeepEqual(got, payloads) {
			t.Fatalf("parse = %d %q %v; want 77 %q", id, got, err, payloads)
		}
		for n := 0; n < len(body); n++ {
			id, got, err := ParseEventBatchWithID(body[:n])
			if err == nil {
				t.Fatalf("cut to %d of %d bytes accepted", n, len(body))
			}
			wantInvalid(t, err)
			if id != 0 || got != nil {
				t.Fatalf("error result carries values: %d %q", id, got)
			}
		}
		if _, _, err := ParseEventBatchWithID(append(body[:len(body):len(body)], 1)); err == nil {
			t.Fatal("trailing byte accepted")
		}
	}
	body := binary.BigEndian.AppendUint64(nil, 1)
	body = binary.BigEndian.AppendUint32(body, 1<<31)
	if _, _, err := ParseEventBatchWithID(body); err == nil {
		t.Fatal("count past the end accepted")
	}
}

func TestDecodedSlicesAliasInput(t *testing.T) {
	p := BinaryPublish{TenantID: "a", Namespace: "b", Stream: "c", Payloads: [][]byte{[]byte("xy"), []byte("z")}}
	_, body := splitFrame(t, p.AppendFrame(nil, FlagBinaryPublishBatch))
	got, err := ParseBinaryPublish(FlagBinaryPublishBatch, body)
	if err != nil {
		t.Fatal(err)
	}
	// Each payload's capacity ends at its own length, so appending to one
	// cannot overwrite the next.
	if cap(got.Payloads[0]) != 2 {
		t.Fatalf("payload capacity %d, want 2", cap(got.Payloads[0]))
	}
	_ = append(got.Payloads[0], '!')
	if string(got.Payloads[1]) != "z" {
		t.Fatalf("append to one payload changed the next: %q", got.Payloads[1])
	}
}
