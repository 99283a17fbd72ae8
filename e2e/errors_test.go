package e2e

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestPubWithNoBrokerSaysNothingAnswered runs felix pub against a UDP
// port nobody listens on: QUIC gets no "connection refused", so the
// error must say that nothing answered and point at felix serve and the
// address, and the exit code must be non-zero.
func TestPubWithNoBrokerSaysNothingAnswered(t *testing.T) {
	n := startServe(t) // for a CA file and a token the client accepts
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	pc.Close() // nothing listens there now

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, errOut, code := n.felix(ctx, "pub", "--broker", dead, "events", "hello")
	if code == 0 {
		t.Fatalf("felix pub exited 0 with nothing at %s; stdout %q", dead, out)
	}
	for _, want := range []string{
		"error: felix: nothing answered at " + dead + " over QUIC (UDP)",
		"\nhint: is felix serve (or felix broker) running, and is the address right?",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "deadline exceeded") || strings.Contains(errOut, "no recent network activity") {
		t.Errorf("stderr still speaks quic-go's words:\n%s", errOut)
	}
}
