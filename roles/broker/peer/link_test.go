package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/roles/broker/tlsconf"
	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/transport/dual"
)

func TestHandshakeAndPing(t *testing.T) {
	ca := newTestCA(t)
	a := startNode(t, "broker-a", ca.creds(t, "broker-a"), nil)
	b := startNode(t, "broker-b", ca.creds(t, "broker-b"), nil)
	ctx := testCtx(t)
	l, err := a.Dial(ctx, "broker-b", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if p := l.Peer(); p.NodeID != "broker-b" || p.StorageID != "storage-of-broker-b" || p.Version != ProtocolVersion || !p.Dialed {
		t.Fatalf("dialer sees %+v", p)
	}
	for range 3 {
		if err := l.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The pong came from b's link, which runs only once b adopted it.
	got := b.Links()
	if len(got) != 1 || got[0].NodeID != "broker-a" || got[0].StorageID != "storage-of-broker-a" || got[0].Dialed {
		t.Fatalf("listener sees %+v", got)
	}
	if len(a.Links()) != 1 {
		t.Fatalf("dialer holds %+v", a.Links())
	}
	b.log.mustContain(t, "peer link accepted", "node_id=broker-a")
}

func TestBothEndsPingOverOneLinkEachWay(t *testing.T) {
	a, b, _, _ := pingBothWays(t)
	if len(a.Links()) != 2 || len(b.Links()) != 2 {
		t.Fatalf("links: a %+v, b %+v", a.Links(), b.Links())
	}
}

func TestDialRefusesAListenerOfAnotherNode(t *testing.T) {
	ca := newTestCA(t)
	a := startNode(t, "broker-a", ca.creds(t, "broker-a"), nil)
	b := startNode(t, "broker-b", ca.creds(t, "broker-b"), nil)
	_, err := a.Dial(testCtx(t), "broker-c", b.Addr().String())
	if !errors.Is(err, ErrWrongNode) || !errors.Is(err, tlsconf.ErrWrongNode) {
		t.Fatalf("Dial = %v, want ErrWrongNode", err)
	}
	if !strings.Contains(err.Error(), `names "broker-b", want "broker-c"`) {
		t.Fatalf("error does not say which node: %v", err)
	}
	if len(a.Links())+len(b.Links()) != 0 {
		t.Fatal("a refused link is held")
	}
}

func TestListenerRefusesAHelloForAnotherNodeThanTheCertificate(t *testing.T) {
	ca := newTestCA(t)
	// x holds a certificate for broker-x but says it is broker-a.
	x := startNode(t, "broker-x", ca.creds(t, "broker-x"), nil)
	x.cfg.NodeID = "broker-a"
	b := startNode(t, "broker-b", ca.creds(t, "broker-b"), nil)
	_, err := x.Dial(testCtx(t), "broker-b", b.Addr().String())
	if !errors.Is(err, ErrWrongNode) {
		t.Fatalf("Dial = %v, want ErrWrongNode", err)
	}
	if !strings.Contains(err.Error(), "3 wrong node") || !strings.Contains(err.Error(), `its certificate names "broker-x"`) {
		t.Fatalf("Dial = %v: want the close code and the listener's reason", err)
	}
	b.log.mustContain(t, "refused a peer connection: bad handshake", `the hello says node \"broker-a\", its certificate names \"broker-x\"`)
	if b.Refused() != 1 || len(b.Links()) != 0 {
		t.Fatalf("refused %d, links %+v", b.Refused(), b.Links())
	}
}

func TestListenerRefusesACertificateOfAnUnknownCA(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	// x trusts the cluster CA (so it accepts b) but its own certificate
	// comes from another CA.
	cr := other.creds(t, "broker-x")
	cr.CAs = ca.pool
	x := startNode(t, "broker-x", cr, nil)
	b := startNode(t, "broker-b", ca.creds(t, "broker-b"), nil)
	_, err := x.Dial(testCtx(t), "broker-b", b.Addr().String())
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Dial = %v, want ErrRefused", err)
	}
	b.log.mustContain(t, "refused a peer connection: bad client certificate", "not signed by the cluster CA")
	if b.Refused() != 1 || len(b.Links()) != 0 {
		t.Fatalf("refused %d, links %+v", b.Refused(), b.Links())
	}
}

func TestDialRefusesAListenerOfAnUnknownCA(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	a := startNode(t, "broker-a", ca.creds(t, "broker-a"), nil)
	b := startNode(t, "broker-b", other.creds(t, "broker-b"), nil)
	_, err := a.Dial(testCtx(t), "broker-b", b.Addr().String())
	if !errors.Is(err, tlsconf.ErrUntrustedPeer) {
		t.Fatalf("Dial = %v, want tlsconf.ErrUntrustedPeer", err)
	}
}

func TestListenerRefusesAConnectionWithoutCertificate(t *testing.T) {
	ca := newTestCA(t)
	b := startNode(t, "broker-b", ca.creds(t, "broker-b"), nil)
	ctx := testCtx(t)
	tc := &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{ALPN}, RootCAs: ca.pool, ServerName: "broker-b.node.felix"}
	qc, err := dual.Dial(ctx, transport.QUIC, b.Addr().String(), tc, transport.Config{})
	if err == nil {
		// The client may finish its side first; the refusal then ends
		// the connection.
		<-qc.Context().Done()
		err = context.Cause(qc.Context())
	}
	var alert tls.AlertError
	if !errors.Is(err, transport.ErrConnectionLost) || !errors.As(err, &alert) {
		t.Fatalf("err = %v, want the connection lost to a TLS alert from the listener", err)
	}
	b.log.mustContain(t, "refused a peer connection: bad client certificate", "the peer sent no certificate")
}

func TestVersionMismatchIsRefused(t *testing.T) {
	ca := newTestCA(t)
	a := startNode(t, "broker-a", ca.creds(t, "broker-a"), func(c *Config) { c.version = ProtocolVersion + 1 })
	b := startNode(t, "broker-b", ca.creds(t, "broker-b"), nil)
	_, err := a.Dial(testCtx(t), "broker-b", b.Addr().String())
	if !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("Dial = %v, want ErrVersionMismatch", err)
	}
	b.log.mustContain(t, "refused a peer connection: bad handshake",
		fmt.Sprintf("speaks peer protocol version %d, this node %d", ProtocolVersion+1, ProtocolVersion))
}

func TestStorageMismatchIsRefused(t *testing.T) {
	ca := newTestCA(t)
	a := startNode(t, "broker-a", ca.creds(t, "broker-a"), nil)
	b := startNode(t, "broker-b", ca.creds(t, "broker-b"), nil)
	_, err := a.DialTarget(testCtx(t), Target{NodeID: "broker-b", Addr: b.Addr().String(), StorageID: "an-older-disk"})
	if !errors.Is(err, ErrStorageMismatch) {
		t.Fatalf("Dial = %v, want ErrStorageMismatch", err)
	}
	if len(a.Links()) != 0 {
		t.Fatal("a refused link is held")
	}
}

func TestTooManyLinksAreRefused(t *testing.T) {
	ca := newTestCA(t)
	a := startNode(t, "broker-a", ca.creds(t, "broker-a"), nil)
	c := startNode(t, "broker-c", ca.creds(t, "broker-c"), func(c *Config) {
		c.DialAttempts, c.DialBackoff = 3, time.Millisecond
	})
	b := startNode(t, "broker-b", ca.creds(t, "broker-b"), func(c *Config) { c.MaxLinks = 1 })
	ctx := testCtx(t)
	if _, err := a.Dial(ctx, "broker-b", b.Addr().String()); err != nil {
		t.Fatal(err)
	}
	_, err := c.Dial(ctx, "broker-b", b.Addr().String())
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("Dial = %v, want ErrBusy", err)
	}
	b.log.mustContain(t, "refused a peer connection: too many links")
	// ErrBusy may pass: c tried every attempt it had.
	if got := b.Refused(); got != 3 {
		t.Fatalf("b refused %d dials, want 3 (one per attempt)", got)
	}
}

func TestCloseEndsLinksAtBothEnds(t *testing.T) {
	ca := newTestCA(t)
	a := startNode(t, "broker-a", ca.creds(t, "broker-a"), nil)
	b := startNode(t, "broker-b", ca.creds(t, "broker-b"), nil)
	ctx := testCtx(t)
	l, err := a.Dial(ctx, "broker-b", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	<-l.Done()
	if !errors.Is(l.Err(), ErrClosed) {
		t.Fatalf("link ended with %v, want ErrClosed (the other node shut down)", l.Err())
	}
	if err := l.Ping(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ping after the end = %v", err)
	}
	if _, err := b.Dial(ctx, "broker-a", a.Addr().String()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Dial after Close = %v", err)
	}
}

func TestCloseLeavesNoGoroutine(t *testing.T) {
	a, b, ab, _ := pingBothWays(t)
	if err := ab.Close(); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
	// Close waits for every goroutine's wg.Done; the goroutine may still
	// be on its way out of its function for a moment after that.
	var left string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left = ""
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "peer.(*Endpoint)") || strings.Contains(g, "peer.(*Link)") {
				left = g
			}
		}
		if left == "" || time.Now().After(deadline) {
			break
		}
	}
	if left != "" {
		t.Fatalf("a goroutine outlives Close:\n%s", left)
	}
}

// pingBothWays starts brokers a and b from one CA, dials a link each way
// and pings over both.
func pingBothWays(t *testing.T) (a, b *node, ab, ba *Link) {
	t.Helper()
	ca := newTestCA(t)
	a = startNode(t, "broker-a", ca.creds(t, "broker-a"), nil)
	b = startNode(t, "broker-b", ca.creds(t, "broker-b"), nil)
	ctx := testCtx(t)
	var err error
	if ab, err = a.Dial(ctx, "broker-b", b.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if ba, err = b.Dial(ctx, "broker-a", a.Addr().String()); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Link{ab, ba} {
		if err := l.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, ab, ba
}

// A dial to an address nobody listens at fails at once, not after the
// back-off of every attempt: the calls sharing it (a forward to a dead
// owner) answer owner_unreachable without waiting. (Over TCP: the
// kernel refuses the connection; QUIC hears nothing and waits.)
func TestADialToAnAddressNobodyListensAtFailsAtOnce(t *testing.T) {
	if testTransport != transport.TCP {
		t.Skip("a refused connection is a TCP answer")
	}
	ca := newTestCA(t)
	a := startNode(t, "broker-a", ca.creds(t, "broker-a"), func(c *Config) {
		c.DialAttempts, c.DialBackoff = 5, time.Hour
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(testCtx(t), 30*time.Second)
	defer cancel()
	_, err = a.Dial(ctx, "broker-b", addr)
	if !errors.Is(err, syscall.ECONNREFUSED) || ctx.Err() != nil {
		t.Fatalf("Dial = %v (context %v), want connection refused at once", err, ctx.Err())
	}
}
