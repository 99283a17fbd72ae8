package felix

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
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
	cfg := Config{Addr: addr, Token: "t", Tenant: "default", RootCAs: x509.NewCertPool(), DialTimeout: 200 * time.Millisecond,
		Transport: TransportQUIC}
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
	de := dialError("127.0.0.1:1", TransportQUIC, time.Now(), context.DeadlineExceeded)
	if !de.Timeout() || strings.Contains(de.Error(), "deadline") {
		t.Fatalf("%q timeout=%v", de.Error(), de.Timeout())
	}
	other := dialError("127.0.0.1:1", TransportQUIC, time.Now(), errors.New("tls: bad certificate"))
	if other.Timeout() || !strings.Contains(other.Error(), "tls: bad certificate") {
		t.Fatalf("%q timeout=%v", other.Error(), other.Timeout())
	}
}

// TestTransportChoice: "tcp" and "auto" are valid choices (with nothing
// listening they fail to dial, as "quic" does); anything else is an
// invalid config naming the field.
func TestTransportChoice(t *testing.T) {
	base := Config{Addr: "127.0.0.1:1", Token: "t", Tenant: "default", RootCAs: x509.NewCertPool(),
		DialTimeout: 2 * time.Second, AutoFallback: 100 * time.Millisecond}
	for _, kind := range []string{TransportTCP, TransportAuto} {
		cfg := base
		cfg.Transport = kind
		c, err := Connect(context.Background(), cfg)
		if err == nil {
			c.Close()
			t.Fatalf("Transport %q connected", kind)
		}
		var de *DialError
		if !errors.As(err, &de) {
			t.Fatalf("Transport %q: %v, want a *DialError", kind, err)
		}
	}
	cfg := base
	cfg.Transport = "carrier-pigeon"
	if _, err := Connect(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `Transport "carrier-pigeon"`) {
		t.Fatalf("Transport carrier-pigeon: %v, want an invalid config naming it", err)
	}
	if got := base.withDefaults().Transport; testTransport == transport.QUIC && got != TransportQUIC {
		t.Fatalf("default Transport = %q, want quic", got)
	}
}

// TestDialTimeoutSentinelsAreTimeouts: the transport's handshake and idle
// timeouts count as a dial that nothing answered.
func TestDialTimeoutSentinelsAreTimeouts(t *testing.T) {
	for _, err := range []error{transport.ErrHandshakeTimeout, transport.ErrIdleTimeout} {
		if de := dialError("127.0.0.1:1", TransportQUIC, time.Now(), err); !de.Timeout() {
			t.Errorf("%v: Timeout() = false", err)
		}
	}
}
