package mux

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/felixmq/felix/transport"
)

// clientSettings is a valid first frame for a hand-made client.
func clientSettings() []byte {
	return appendSettings(nil, []setting{
		{settingStreamWindow, 1 << 20}, {settingConnWindow, 1 << 20},
		{settingMaxBidi, 10}, {settingMaxUni, 10},
	})
}

func dataFrame(stream uint64, n int, flags uint8) []byte {
	b := appendHeader(nil, frameData, flags, stream, n)
	return append(b, make([]byte, n)...)
}

func TestPeerViolationsCloseTheSession(t *testing.T) {
	cases := []struct {
		name   string
		cfg    transport.Config
		frames [][]byte
		want   string
	}{
		{"stream flow control", transport.Config{InitialStreamReceiveWindow: 1000},
			[][]byte{clientSettings(), dataFrame(0, 900, 0), dataFrame(0, 101, 0)}, "flow control violated on stream 0"},
		{"connection flow control", transport.Config{InitialStreamReceiveWindow: 1000, InitialConnReceiveWindow: 1500},
			[][]byte{clientSettings(), dataFrame(0, 1000, 0), dataFrame(4, 501, 0)}, "flow control violated: the connection"},
		{"stream limit", transport.Config{MaxIncomingStreams: 2},
			[][]byte{clientSettings(), dataFrame(0, 1, 0), dataFrame(8, 1, 0)}, "stream limit violated"},
		{"no settings first", transport.Config{},
			[][]byte{dataFrame(0, 1, 0)}, "SETTINGS must be the first frame"},
		{"unknown frame type", transport.Config{},
			[][]byte{clientSettings(), {0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, "unknown frame type"},
		{"data on a stream we never opened", transport.Config{},
			[][]byte{clientSettings(), dataFrame(1, 1, 0)}, "which we have not opened"},
		{"data after FIN", transport.Config{},
			[][]byte{clientSettings(), dataFrame(0, 1, flagFIN), dataFrame(0, 1, 0)}, "after its FIN"},
		{"oversized data frame", transport.Config{},
			[][]byte{clientSettings(), appendHeader(nil, frameData, 0, 0, maxDataPayload+1)}, "malformed frame"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, raw, _ := rawSession(t, tc.cfg)
			for _, f := range tc.frames {
				raw.send(f)
			}
			<-s.Context().Done()
			err := context.Cause(s.Context())
			if !errors.Is(err, transport.ErrConnectionLost) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("session ended with %v, want ErrConnectionLost saying %q", err, tc.want)
			}
		})
	}
}

func TestProtocolCloseReachesPeer(t *testing.T) {
	// A violation is reported to the peer in a CLOSE frame.
	s, raw, got := rawSession(t, transport.Config{InitialStreamReceiveWindow: 10})
	raw.send(clientSettings())
	raw.send(dataFrame(0, 11, 0))
	<-s.Context().Done()
	var all []byte
	for {
		b, ok := <-got
		if !ok {
			break
		}
		all = append(all, b...)
		if strings.Contains(string(all), "flow control violated") {
			return
		}
	}
	t.Fatalf("the peer got no CLOSE frame naming the violation: %q", all)
}

func TestPeerThatDoesNotReadIsDisconnected(t *testing.T) {
	a, peer := net.Pipe() // nobody reads peer: our writes stall
	s := Server(a, transport.Config{})
	defer s.CloseWithError(0, "")
	defer peer.Close()
	ping := appendU64Frame(nil, framePing, 0, 0, 1)
	var batch []byte
	for range 1000 {
		batch = append(batch, ping...)
	}
	peer.Write(clientSettings())
	for s.Err() == nil {
		if _, err := peer.Write(batch); err != nil {
			break
		}
	}
	<-s.Context().Done()
	if err := context.Cause(s.Context()); !errors.Is(err, transport.ErrConnectionLost) || !strings.Contains(err.Error(), "does not read") {
		t.Fatalf("session ended with %v", err)
	}
}
