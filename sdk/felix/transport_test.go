package felix

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/transport/tcptr"
)

// TestAutoFallsBackToTCPAndRemembers: with Transport "auto", a broker
// reachable only over TCP (nothing answers on UDP) is connected to over
// TCP once QUIC has had AutoFallback, and the choice is remembered: the
// next connection of the same client dials TCP at once.
func TestAutoFallsBackToTCPAndRemembers(t *testing.T) {
	cert, pool := selfSigned(t)
	tlsConf := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{ALPN}, MinVersion: tls.VersionTLS13}
	ln, err := tcptr.Listen("127.0.0.1:0", tlsConf, transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// A UDP socket on the same port that reads nothing: QUIC hears
	// silence, as behind a firewall that drops UDP.
	pc, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		t.Skipf("cannot hold the UDP port of the TCP listener: %v", err)
	}
	defer pc.Close()
	accepted := make(chan transport.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			accepted <- c
		}
	}()

	cfg := Config{Addr: ln.Addr().String(), RootCAs: pool, ServerName: "localhost", Tenant: "acme", Token: goodToken,
		Transport: TransportAuto, AutoFallback: 50 * time.Millisecond, DialTimeout: 5 * time.Second}.withDefaults()
	tc, err := cfg.tlsConfig()
	if err != nil {
		t.Fatal(err)
	}
	c, err := dial(context.Background(), cfg, tc)
	if err != nil {
		t.Fatalf("auto dial: %v", err)
	}
	defer c.CloseWithError(0, "")
	if c.Kind() != transport.TCP {
		t.Fatalf("auto connected over %s, want tcp", c.Kind())
	}
	<-accepted
	if got := cfg.auto.get(); got != transport.TCP {
		t.Fatalf("auto remembered %q, want tcp", got)
	}
	// Remembered: even with a fallback longer than the dial timeout, the
	// second dial goes straight to TCP.
	cfg.AutoFallback = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c2, err := dial(ctx, cfg, tc)
	if err != nil {
		t.Fatalf("second auto dial: %v", err)
	}
	defer c2.CloseWithError(0, "")
	if c2.Kind() != transport.TCP {
		t.Fatalf("second dial over %s", c2.Kind())
	}
}

// TestTCPDialTimeoutSaysTCP: a TCP listener that never handshakes ends in
// a timeout whose message names the transport.
func TestTCPDialTimeoutSaysTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent, until the test ends
		}
	}()
	_, pool := selfSigned(t)
	cfg := Config{Addr: ln.Addr().String(), RootCAs: pool, Tenant: "acme", Token: goodToken,
		Transport: TransportTCP, DialTimeout: 200 * time.Millisecond}
	c, err := Connect(context.Background(), cfg)
	if err == nil {
		c.Close()
		t.Fatal("connected to a listener that never handshakes")
	}
	if !strings.Contains(err.Error(), "nothing answered at "+cfg.Addr+" over TLS over TCP") {
		t.Fatalf("err %q", err)
	}
}
