package peer

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"strings"
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

// TestCloseCodesMatchProtocolDoc checks the close code table of
// docs/protocol.md's peer section lists exactly these codes, in order.
func TestCloseCodesMatchProtocolDoc(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Peer protocol (broker to broker)")
	if !ok {
		t.Fatal("docs/protocol.md has no peer protocol section")
	}
	rows := regexp.MustCompile(`(?m)^\| (\d+) \| ([a-z ]+) \|`).FindAllStringSubmatch(section, -1)
	if len(rows) != len(closeCodeNames) {
		t.Fatalf("the doc has %d close code rows, the code %d", len(rows), len(closeCodeNames))
	}
	for i, r := range rows {
		want := closeCodeNames[i]
		if r[1] != strconv.FormatUint(uint64(want.Code), 10) || r[2] != want.Name {
			t.Errorf("doc row %d is %s %q, want %d %q", i, r[1], r[2], want.Code, want.Name)
		}
	}
}
