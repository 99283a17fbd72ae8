package peer

import (
	"bytes"
	"testing"

	"github.com/felixmq/felix/wire"
)

func TestMessagesRoundTripThroughFrames(t *testing.T) {
	msgs := []wire.Message{
		&Hello{NodeID: "broker-a", StorageID: "s1", Version: 1, To: "broker-b"},
		&Welcome{NodeID: "broker-b", StorageID: "s2", Version: 1},
		&Ping{Seq: 7},
		&Pong{Seq: 7},
	}
	var buf []byte
	for _, m := range msgs {
		var err error
		if buf, err = appendFrame(buf, m); err != nil {
			t.Fatal(err)
		}
	}
	fr := wire.NewFrameReader(bytes.NewReader(buf), 0)
	for _, want := range msgs {
		f, err := fr.Next()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseMessage(f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if got.MessageType() != want.MessageType() {
			t.Fatalf("got %s, want %s", got.MessageType(), want.MessageType())
		}
		g, _ := wire.MarshalMessage(got)
		w, _ := wire.MarshalMessage(want)
		if !bytes.Equal(g, w) {
			t.Fatalf("got %s, want %s", g, w)
		}
	}
}

func TestParseMessage(t *testing.T) {
	if m, err := ParseMessage([]byte(`{"type":"peer_ship","x":1}`)); err != nil || m.MessageType() != "peer_ship" {
		t.Fatalf("unknown type: %v, %v", m, err)
	}
	if _, ok := mustParse(t, `{"type":"peer_ship"}`).(*Unknown); !ok {
		t.Fatal("an unknown type is not *Unknown")
	}
	for _, bad := range []string{`[]`, `{}`, `{"type":""}`, `{"type":"peer_ping","seq":"x"}`, `not json`} {
		if _, err := ParseMessage([]byte(bad)); err == nil {
			t.Errorf("ParseMessage(%s) accepted", bad)
		}
	}
}

func mustParse(t *testing.T, s string) wire.Message {
	t.Helper()
	m, err := ParseMessage([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
