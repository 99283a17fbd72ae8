package felix

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestDialTimeoutSaysNothingAnswered dials a UDP socket that reads
// nothing: QUIC sees no answer and no refusal, and the error must say so
// rather than quic-go's "no recent network activity".
func TestDialTimeoutSaysNothingAnswered(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	addr := pc.LocalAddr().String()
	cfg := Config{Addr: addr, Token: "t", Tenant: "default", RootCAs: x509.NewCertPool(), DialTimeout: 200 * time.Millisecond}
	c, err := Connect(context.Background(), cfg)
	if err == nil {
		c.Close()
		t.Fatal("connected to a socket that never answers")
	}
	var de *DialError
	if !errors.As(err, &de) || !de.Timeout() {
		t.Fatalf("err %v (%T): want a *DialError that timed out", err, err)
	}
	if de.Addr != addr || !strings.Contains(err.Error(), "nothing answered at "+addr+" over QUIC (UDP)") {
		t.Fatalf("err %q", err)
	}
}

// TestDialContextDeadlineIsATimeout covers a caller's deadline ending the
// dial: the same honest message, not "context deadline exceeded".
func TestDialContextDeadlineIsATimeout(t *testing.T) {
	de := dialError("127.0.0.1:1", time.Now(), context.DeadlineExceeded)
	if !de.Timeout() || strings.Contains(de.Error(), "deadline") {
		t.Fatalf("%q timeout=%v", de.Error(), de.Timeout())
	}
	other := dialError("127.0.0.1:1", time.Now(), errors.New("tls: bad certificate"))
	if other.Timeout() || !strings.Contains(other.Error(), "tls: bad certificate") {
		t.Fatalf("%q timeout=%v", other.Error(), other.Timeout())
	}
}
