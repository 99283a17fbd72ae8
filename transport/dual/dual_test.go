package dual

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/internal/testcert"
	"github.com/felixmq/felix/transport"
)

func testTLS(t *testing.T) (server, client *tls.Config) { return testcert.Pair(t, "felix/1") }

// TestListenPairSharesThePort: one host:port reaches both listeners, each
// over its own transport; "off" binds QUIC alone.
func TestListenPairSharesThePort(t *testing.T) {
	stls, ctls := testTLS(t)
	lns, err := Listen("127.0.0.1:0", "", stls, transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	if len(lns) != 2 {
		t.Fatalf("%d listeners, want 2", len(lns))
	}
	addr := lns[0].Addr().String()
	if got := lns[1].Addr().String(); got != addr {
		t.Fatalf("TCP listener at %s, QUIC at %s: want one port", got, addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, kind := range []transport.Kind{transport.QUIC, transport.TCP} {
		go func() {
			if c, err := lns[i].Accept(ctx); err == nil {
				<-ctx.Done()
				c.CloseWithError(0, "")
			}
		}()
		c, err := Dial(ctx, kind, addr, ctls, transport.Config{})
		if err != nil {
			t.Fatalf("dial %s: %v", kind, err)
		}
		if c.Kind() != kind {
			t.Fatalf("dialed %s, connected over %s", kind, c.Kind())
		}
		c.CloseWithError(0, "")
	}
	if _, err := Dial(ctx, "carrier-pigeon", addr, ctls, transport.Config{}); err == nil || !strings.Contains(err.Error(), "unknown transport") {
		t.Fatalf("unknown transport: %v", err)
	}

	one, err := Listen("127.0.0.1:0", Off, stls, transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer one[0].Close()
	if len(one) != 1 {
		t.Fatalf("off: %d listeners", len(one))
	}
}

// TestListenNamesATakenTCPPort: an explicit QUIC port whose TCP twin is
// taken fails, naming the address and how to choose another.
func TestListenNamesATakenTCPPort(t *testing.T) {
	stls, _ := testTLS(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	lns, err := Listen(taken.Addr().String(), "", stls, transport.Config{})
	if err == nil {
		for _, ln := range lns {
			ln.Close()
		}
		t.Skip("the kernel let UDP and TCP share the port this time: nothing was taken")
	}
	if !strings.Contains(err.Error(), taken.Addr().String()) || !strings.Contains(err.Error(), `"off"`) {
		t.Fatalf("error %q does not name the address and the way out", err)
	}
}

// TestDialAutoFallsBack: nothing on UDP, a TCP listener on the port: auto
// connects over TCP after the fallback delay; with nothing at all it fails
// naming both transports.
func TestDialAutoFallsBack(t *testing.T) {
	stls, ctls := testTLS(t)
	lns, err := Listen("127.0.0.1:0", "", stls, transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	addr := lns[0].Addr().String()
	lns[0].Close() // QUIC gone: UDP to the port goes unanswered
	defer lns[1].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		if c, err := lns[1].Accept(ctx); err == nil {
			<-ctx.Done()
			c.CloseWithError(0, "")
		}
	}()
	c, err := DialAuto(ctx, addr, addr, 50*time.Millisecond, ctls, transport.Config{HandshakeTimeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("auto: %v", err)
	}
	if c.Kind() != transport.TCP {
		t.Fatalf("auto connected over %s", c.Kind())
	}
	c.CloseWithError(0, "")

	lns[1].Close()
	_, err = DialAuto(ctx, addr, addr, 50*time.Millisecond, ctls, transport.Config{HandshakeTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "quic:") || !strings.Contains(err.Error(), "tcp:") {
		t.Fatalf("nothing listening: %v, want both transports' errors", err)
	}
}
