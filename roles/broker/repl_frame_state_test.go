package broker

import (
	"bytes"
	"testing"

	flog "github.com/felixmq/felix/log"
)

// A commit record's state section travels in a repl_append body beside
// records without one, so a follower's copy holds the whole commit.
func TestReplFrameCarriesAStateSection(t *testing.T) {
	in := []flog.Record{
		{Offset: 5, Payload: []byte("plain")},
		{Offset: 6, Payload: []byte("event"), State: []byte("ops"), Publisher: "p"},
		{Offset: 7, Payload: []byte("x"), State: []byte{}},
	}
	b, err := appendReplRecords(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := parseReplRecords(b, 5, 10)
	if err != nil || len(out) != 3 {
		t.Fatalf("parse: %d records, %v", len(out), err)
	}
	if out[0].State != nil || !bytes.Equal(out[1].State, []byte("ops")) || string(out[1].Payload) != "event" ||
		out[2].State == nil || len(out[2].State) != 0 {
		t.Fatalf("states: %q %q %q", out[0].State, out[1].State, out[2].State)
	}
	if _, err := parseReplRecords(b[:len(b)-len("x")-4-1], 5, 10); err == nil {
		t.Fatal("a truncated body parsed")
	}
}
