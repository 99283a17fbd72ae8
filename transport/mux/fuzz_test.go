package mux

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
)

// validFrames is one of every frame the session sends.
func validFrames() [][]byte {
	return [][]byte{
		clientSettings(),
		appendSettings(nil, nil),
		dataFrame(0, 0, flagFIN),
		dataFrame(4, 5, 0),
		appendU64Frame(nil, frameWindow, 0, 0, 1<<20),
		appendU64Frame(nil, frameReset, 0, 2, 7),
		appendU64Frame(nil, frameStopSending, 0, 0, 9),
		appendU64Frame(nil, frameConnWindow, 0, 0, 1<<30),
		appendU64Frame(nil, frameMaxStreams, flagUni, 0, 11),
		appendU64Frame(nil, framePing, 0, 0, 12345),
		appendU64Frame(nil, framePing, flagAck, 0, 12345),
		appendClose(nil, 0, 3, "bye"),
		appendClose(nil, flagProtocol, 0, "bad"),
	}
}

// FuzzParseFrame checks the frame decoder: it never panics, never reads
// past its input, and a frame it accepts encodes back to the same bytes.
func FuzzParseFrame(f *testing.F) {
	for _, b := range validFrames() {
		f.Add(b)
	}
	f.Add(bytes.Join(validFrames(), nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		for len(b) > 0 {
			h, p, n, err := parseFrame(b)
			if err != nil {
				return
			}
			if n != headerLen+len(p) || n > len(b) || uint32(len(p)) != h.length {
				t.Fatalf("frame of %d bytes with a %d-byte payload, header says %d", n, len(p), h.length)
			}
			re := appendHeader(nil, h.typ, h.flags, h.stream, len(p))
			if !bytes.Equal(append(re, p...), b[:n]) {
				t.Fatalf("re-encoded frame differs")
			}
			if h.typ == frameSettings {
				if ss := parseSettings(p); len(appendSettings(nil, ss)) != n {
					t.Fatal("settings do not re-encode")
				}
			}
			b = b[n:]
		}
	})
}

// FuzzSession feeds arbitrary bytes to a server session as its peer's
// frames: the session never panics, and it ends and stops its
// goroutines when closed.
func FuzzSession(f *testing.F) {
	settings := clientSettings()
	for _, b := range validFrames() {
		f.Add(append(append([]byte(nil), settings...), b...))
	}
	f.Add(bytes.Join(validFrames(), nil))
	seq := append([]byte(nil), settings...)
	seq = append(seq, dataFrame(0, 10, 0)...)
	seq = append(seq, appendU64Frame(nil, frameStopSending, 0, 0, 1)...)
	seq = append(seq, dataFrame(2, 3, flagFIN)...)
	seq = append(seq, appendU64Frame(nil, frameReset, 0, 0, 4)...)
	f.Add(seq)
	f.Fuzz(func(t *testing.T, b []byte) {
		a, peer := net.Pipe()
		s := Server(a, transport.Config{InitialStreamReceiveWindow: 1 << 10, InitialConnReceiveWindow: 4 << 10, MaxIncomingStreams: 8, MaxIncomingUniStreams: 8})
		go func() { // drain what the session writes
			buf := make([]byte, 4096)
			for {
				if _, err := peer.Read(buf); err != nil {
					return
				}
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		go func() { // accept and read streams, as a broker would
			for {
				st, err := s.AcceptStream(ctx)
				if err != nil {
					return
				}
				st.Write([]byte("x"))
				go func() {
					buf := make([]byte, 512)
					for {
						if _, err := st.Read(buf); err != nil {
							return
						}
					}
				}()
			}
		}()
		peer.SetWriteDeadline(time.Now().Add(time.Second))
		for len(b) > 0 { // chop the input into writes of varying size
			var two [2]byte
			copy(two[:], b)
			n := min(len(b), 1+int(binary.BigEndian.Uint16(two[:])%64))
			if _, err := peer.Write(b[:n]); err != nil {
				break
			}
			b = b[n:]
		}
		s.CloseWithError(0, "")
		peer.Close()
		select {
		case <-s.done:
		default:
			t.Fatal("session not done after CloseWithError")
		}
	})
}
