package wire

import (
	"bytes"
	"errors"
	"io"
	"os"
	"runtime"
	"testing"
	"testing/iotest"
)

func TestFrameHeaderRoundTrip(t *testing.T) {
	for _, h := range []FrameHeader{{}, {Flags: 0xffff, Length: 1<<32 - 1}, {Flags: FlagBinaryPublishBatch, Length: 12}} {
		b := h.Append(nil)
		if len(b) != HeaderLen {
			t.Fatalf("header is %d bytes", len(b))
		}
		if !bytes.Equal(b[:6], []byte{'F', 'L', 'X', '1', 0, 1}) {
			t.Fatalf("magic and version: % x", b[:6])
		}
		got, err := ParseFrameHeader(b)
		if err != nil || got != h {
			t.Fatalf("parse %+v = %+v, %v", h, got, err)
		}
	}
	b := AppendFrame([]byte("pre"), 0x1234, []byte("body"))
	want := []byte{'p', 'r', 'e', 0x46, 0x4c, 0x58, 0x31, 0, 1, 0x12, 0x34, 0, 0, 0, 4, 'b', 'o', 'd', 'y'}
	if !bytes.Equal(b, want) {
		t.Fatalf("AppendFrame\n got  % x\n want % x", b, want)
	}
}

func TestFrameHeaderErrors(t *testing.T) {
	good := FrameHeader{Flags: 0, Length: 3}.Append(nil)
	badMagic := append([]byte{}, good...)
	badMagic[0] = 'G'
	badVersion := append([]byte{}, good...)
	badVersion[5] = 2
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrShortHeader},
		{"short", good[:11], ErrShortHeader},
		{"bad magic", badMagic, ErrBadMagic},
		{"bad version", badVersion, ErrBadVersion},
		{"version 0", append(append([]byte{}, good[:4]...), 0, 0, 0, 0, 0, 0, 0, 3), ErrBadVersion},
	}
	for _, c := range cases {
		_, err := ParseFrameHeader(c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
			continue
		}
		wantInvalid(t, err)
		// The same failure from a FrameReader, when the header is whole.
		if len(c.in) == HeaderLen {
			_, err := NewFrameReader(bytes.NewReader(append(c.in, "abc"...)), 0).Next()
			if !errors.Is(err, c.want) {
				t.Errorf("%s via FrameReader: %v", c.name, err)
			}
			wantInvalid(t, err)
		}
	}
	// Longer input is fine: only the first 12 bytes are read.
	if _, err := ParseFrameHeader(append(good, 1, 2, 3)); err != nil {
		t.Fatal(err)
	}
}

// headerOnlyReader serves a frame header and fails the test if anything
// reads past it.
type headerOnlyReader struct {
	t   *testing.T
	hdr []byte
}

func (r *headerOnlyReader) Read(p []byte) (int, error) {
	if len(r.hdr) == 0 {
		r.t.Fatal("FrameReader read past the header of an oversized frame")
	}
	n := copy(p, r.hdr)
	r.hdr = r.hdr[n:]
	return n, nil
}

func TestFrameReaderRefusesOversizedFrame(t *testing.T) {
	for _, tc := range []struct {
		limit, length uint32
	}{
		{0, DefaultMaxFrameBytes + 1}, // 0 means the 16 MiB default
		{0, 1<<32 - 1},
		{1024, 1025},
	} {
		hdr := FrameHeader{Flags: FlagBinaryPublishBatch, Length: tc.length}.Append(nil)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		fr := NewFrameReader(&headerOnlyReader{t: t, hdr: hdr}, tc.limit)
		_, err := fr.Next()
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("limit %d length %d: %v, want ErrFrameTooLarge", tc.limit, tc.length, err)
		}
		wantInvalid(t, err)
		if fr.buf != nil {
			t.Fatalf("reader allocated a %d-byte buffer for a refused frame", cap(fr.buf))
		}
		// The refusal allocates only small values (the reader, the error
		// and its message), never anything near the declared length.
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
			t.Fatalf("refusing a %d-byte frame allocated %d bytes", tc.length, n)
		}
	}
	// Exactly the limit is accepted.
	frame := AppendFrame(nil, 0, make([]byte, 1024))
	if f, err := NewFrameReader(bytes.NewReader(frame), 1024).Next(); err != nil || len(f.Payload) != 1024 {
		t.Fatalf("frame at the limit: %d bytes, %v", len(f.Payload), err)
	}
	if DefaultMaxFrameBytes != 16<<20 {
		t.Fatalf("DefaultMaxFrameBytes = %d", DefaultMaxFrameBytes)
	}
}

func TestFrameReaderEOF(t *testing.T) {
	frame := AppendFrame(nil, 7, []byte("payload"))
	// A clean end before any header byte is io.EOF.
	if _, err := NewFrameReader(bytes.NewReader(nil), 0).Next(); err != io.EOF {
		t.Fatalf("empty stream: %v, want io.EOF", err)
	}
	fr := NewFrameReader(bytes.NewReader(frame), 0)
	if _, err := fr.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := fr.Next(); err != io.EOF {
		t.Fatalf("after a whole frame: %v, want io.EOF", err)
	}
	// An end anywhere inside a frame is io.ErrUnexpectedEOF.
	for n := 1; n < len(frame); n++ {
		_, err := NewFrameReader(bytes.NewReader(frame[:n]), 0).Next()
		if err != io.ErrUnexpectedEOF {
			t.Fatalf("stream cut at %d of %d: %v, want io.ErrUnexpectedEOF", n, len(frame), err)
		}
	}
	// Other read errors pass through unchanged.
	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader(frame[:HeaderLen+2]), iotest.ErrReader(boom))
	if _, err := NewFrameReader(r, 0).Next(); err != boom {
		t.Fatalf("read error: %v, want boom", err)
	}
}

func TestFrameReaderSequenceAndReuse(t *testing.T) {
	var stream []byte
	payloads := [][]byte{[]byte("first"), {}, []byte("third, longer than the first"), []byte("x")}
	for i, p := range payloads {
		stream = AppendFrame(stream, uint16(i), p)
	}
	// One byte at a time exercises short reads.
	fr := NewFrameReader(iotest.OneByteReader(bytes.NewReader(stream)), 0)
	var owned []Frame
	for i, p := range payloads {
		f, err := fr.NextOwned()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if f.Flags != uint16(i) || !bytes.Equal(f.Payload, p) {
			t.Fatalf("frame %d = %+v", i, f)
		}
		owned = append(owned, f)
	}
	for i, f := range owned {
		if !bytes.Equal(f.Payload, payloads[i]) {
			t.Fatalf("owned frame %d changed to %q", i, f.Payload)
		}
	}
	if _, err := fr.NextOwned(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func TestFrameReaderLargePayload(t *testing.T) {
	// Larger than the retained buffer: read in growing chunks, and not kept.
	payload := bytes.Repeat([]byte("0123456789abcdef"), (3*retainedBufBytes+5)/16)
	payload = append(payload, 1, 2, 3)
	stream := AppendFrame(nil, 0, payload)
	stream = AppendFrame(stream, 0, []byte("small"))
	fr := NewFrameReader(iotest.HalfReader(bytes.NewReader(stream)), 0)
	f, err := fr.Next()
	if err != nil || !bytes.Equal(f.Payload, payload) {
		t.Fatalf("large frame: %d bytes, %v", len(f.Payload), err)
	}
	if cap(fr.buf) > retainedBufBytes {
		t.Fatalf("reader kept a %d-byte buffer", cap(fr.buf))
	}
	if f, err := fr.Next(); err != nil || string(f.Payload) != "small" {
		t.Fatalf("frame after the large one: %q, %v", f.Payload, err)
	}
	// Cut inside the large payload, past the first chunk.
	cut := AppendFrame(nil, 0, payload)[:HeaderLen+retainedBufBytes+10]
	if _, err := NewFrameReader(bytes.NewReader(cut), 0).Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut large frame: %v", err)
	}
	// Cut exactly at the first chunk boundary.
	cut = AppendFrame(nil, 0, payload)[:HeaderLen+retainedBufBytes]
	if _, err := NewFrameReader(bytes.NewReader(cut), 0).Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("large frame cut at the chunk boundary: %v", err)
	}
}

// stutterReader returns at most step bytes per call and fails every other
// call with a timeout, as a stream whose read deadline keeps being hit
// would.
type stutterReader struct {
	r    io.Reader
	step int
	n    int
}

func (s *stutterReader) Read(p []byte) (int, error) {
	s.n++
	if s.n%2 == 0 {
		return 0, os.ErrDeadlineExceeded
	}
	return s.r.Read(p[:min(len(p), s.step)])
}

// A timeout anywhere inside a frame loses nothing: the next call resumes
// the frame where the read stopped, small and large payloads alike.
func TestFrameReaderResumesAfterTimeout(t *testing.T) {
	large := bytes.Repeat([]byte("abcdefgh"), (retainedBufBytes+3)/8+1)
	payloads := [][]byte{[]byte("first"), {}, []byte("third, longer than the first"), large, []byte("x")}
	var stream []byte
	for i, p := range payloads {
		stream = AppendFrame(stream, uint16(i), p)
	}
	for _, owned := range []bool{false, true} {
		for _, step := range []int{1, 5, 13, 4096, 1 << 20} {
			fr := NewFrameReader(&stutterReader{r: bytes.NewReader(stream), step: step}, 0)
			for i, p := range payloads {
				var f Frame
				var err error
				for timeouts := 0; ; timeouts++ {
					if owned {
						f, err = fr.NextOwned()
					} else {
						f, err = fr.Next()
					}
					if !errors.Is(err, os.ErrDeadlineExceeded) {
						break
					}
					if timeouts > 4*len(stream) {
						t.Fatal("no progress")
					}
				}
				if err != nil || f.Flags != uint16(i) || !bytes.Equal(f.Payload, p) {
					t.Fatalf("owned=%v step %d frame %d: flags %d, %d bytes, %v", owned, step, i, f.Flags, len(f.Payload), err)
				}
			}
			for {
				_, err := fr.Next()
				if errors.Is(err, os.ErrDeadlineExceeded) {
					continue
				}
				if err != io.EOF {
					t.Fatalf("owned=%v step %d: end %v, want io.EOF", owned, step, err)
				}
				break
			}
		}
	}
	// A stream that ends after a timeout inside a header is cut short.
	fr := NewFrameReader(&stutterReader{r: bytes.NewReader(stream[:3]), step: 3}, 0)
	if _, err := fr.Next(); err != io.ErrUnexpectedEOF && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal(err)
	}
	for {
		_, err := fr.Next()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != io.ErrUnexpectedEOF {
			t.Fatalf("cut inside a header: %v, want io.ErrUnexpectedEOF", err)
		}
		break
	}
}

// After a framing error the reader keeps returning it: it never resumes
// a frame whose header it refused, nor makes one up.
func TestFrameReaderFramingErrorSticks(t *testing.T) {
	good := AppendFrame(nil, 9, []byte("hello"))
	badMagic := append([]byte("XXXX"), good[4:]...)
	tooLarge := FrameHeader{Flags: 1, Length: 100}.Append(nil)
	for name, stream := range map[string][]byte{
		"bad magic after a frame":  append(append([]byte{}, good...), badMagic...),
		"bad magic first":          append(append([]byte{}, badMagic...), good...),
		"too large after an empty": append(AppendFrame(nil, 9, nil), append(tooLarge, good...)...),
	} {
		fr := NewFrameReader(bytes.NewReader(stream), 10)
		var first error
		for i := 0; i < 4; i++ {
			_, err := fr.Next()
			if err != nil && first == nil {
				first = err
				continue
			}
			if first != nil && err != first {
				t.Fatalf("%s: call %d after %v returned %v", name, i, first, err)
			}
		}
		if first == nil {
			t.Fatalf("%s: no error", name)
		}
	}
}

// A frame begun by Next and finished by NextOwned is returned in a buffer
// the caller owns, not the reader's reused one.
func TestFrameReaderResumedAsOwned(t *testing.T) {
	first := AppendFrame(nil, 1, []byte("first payload"))
	second := AppendFrame(nil, 2, []byte("SECOND"))
	fr := NewFrameReader(&stutterReader{r: io.MultiReader(bytes.NewReader(first[:HeaderLen+3]),
		bytes.NewReader(first[HeaderLen+3:]), bytes.NewReader(second)), step: 1 << 10}, 0)
	if _, err := fr.Next(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("want the read to stop inside the first frame, got %v", err)
	}
	f1, err := fr.NextOwned()
	for errors.Is(err, os.ErrDeadlineExceeded) {
		f1, err = fr.NextOwned()
	}
	if err != nil || string(f1.Payload) != "first payload" {
		t.Fatalf("first frame %q, %v", f1.Payload, err)
	}
	f2, err := fr.Next()
	for errors.Is(err, os.ErrDeadlineExceeded) {
		f2, err = fr.Next()
	}
	if err != nil || string(f2.Payload) != "SECOND" {
		t.Fatalf("second frame %q, %v", f2.Payload, err)
	}
	if string(f1.Payload) != "first payload" {
		t.Fatalf("the owned frame changed to %q when the next was read", f1.Payload)
	}
}
