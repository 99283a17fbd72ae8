package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// TestAutoConnectsWhereUDPIsDropped: between the client and the broker a
// UDP proxy drops every datagram (a network that blocks UDP) and a TCP
// proxy relays. A client with Transport "auto" connects over TCP and
// works; so does the CLI with --transport auto. A QUIC-only client times
// out, saying nothing answered over QUIC.
func TestAutoConnectsWhereUDPIsDropped(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "viatcp", "--durable")
	udp, tcp := newUDPProxy(t, n.client.BrokerAddr), newTCPProxy(t, n.client.BrokerAddr)
	udp.drop = func(bool) bool { return true }

	cfg := n.sdkConfig(n.adminToken())
	cfg.Addr, cfg.TCPAddr, cfg.ServerName = udp.addr(), tcp.addr(), "127.0.0.1"
	cfg.Transport, cfg.AutoFallback = felix.TransportAuto, 200*time.Millisecond
	c := connectSDK(t, ctx, cfg, "the broker through a UDP-dropping network")
	if _, err := c.PublishAcked(ctx, "default", "viatcp", []byte("over tcp"), felix.AckPerMessage); err != nil {
		t.Fatalf("publish over auto: %v", err)
	}
	if tcp.accepted.Load() == 0 || udp.dropped.Load() == 0 {
		t.Fatalf("tcp accepted %d, udp dropped %d: auto did not fall back", tcp.accepted.Load(), udp.dropped.Load())
	}

	out := n.mustFelix(ctx, "read", "viatcp", "--from", "0", "--count", "1",
		"--broker", udp.addr(), "--broker-tcp", tcp.addr(), "--transport", "auto")
	if !strings.Contains(out, "over tcp") {
		t.Fatalf("felix read over auto printed %q", out)
	}

	quicOnly := cfg
	quicOnly.Transport, quicOnly.DialTimeout = felix.TransportQUIC, time.Second
	qc, err := felix.Connect(ctx, quicOnly)
	if err == nil {
		qc.Close()
		t.Fatal("a QUIC client connected through a proxy that drops every datagram")
	}
	var de *felix.DialError
	if !errors.As(err, &de) || !de.Timeout() || !strings.Contains(err.Error(), "over QUIC (UDP)") {
		t.Fatalf("QUIC-only client: %v, want a DialError that timed out over QUIC", err)
	}
}

// TestTCPConnectionResetEndsSubscriptionLoudly: a TCP reset between a
// subscriber and the broker ends the subscription at once with
// ErrSubscriptionLost, and a stalled TCP path ends it within the idle
// timeout, as a silent QUIC path does.
func TestTCPConnectionResetEndsSubscriptionLoudly(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "resets")
	for _, fault := range []string{"reset", "stall"} {
		t.Run(fault, func(t *testing.T) {
			p := newTCPProxy(t, n.client.BrokerAddr)
			cfg := n.sdkConfig(n.adminToken())
			cfg.Addr, cfg.ServerName, cfg.Transport = p.addr(), "127.0.0.1", felix.TransportTCP
			cfg.KeepAlive, cfg.MaxIdleTimeout = 300*time.Millisecond, 2*time.Second
			c := connectSDK(t, ctx, cfg, "the broker through a TCP proxy")
			var sub *felix.Subscription
			var err error
			eventually(t, 10*time.Second, "subscribe", func() bool {
				sub, err = c.Subscribe(ctx, "default", "resets")
				return err == nil
			})
			start := time.Now()
			if fault == "reset" {
				p.resetAll()
			} else {
				p.stall()
			}
			nextCtx, nextCancel := context.WithTimeout(ctx, 20*time.Second)
			defer nextCancel()
			if _, err := sub.Next(nextCtx); !errors.Is(err, felix.ErrSubscriptionLost) {
				t.Fatalf("Next after a TCP %s: %v after %v, want ErrSubscriptionLost", fault, err, time.Since(start))
			}
			t.Logf("subscription reported lost %v after the %s", time.Since(start), fault)
		})
	}
}

// TestClusterClientOverTCPFindsATCPListenerOnItsOwnPort: a broker whose
// TLS-over-TCP listener is on another port than its QUIC one
// (FELIX_TCP_LISTEN) names it in client.json and in the topology, and a
// ClusterClient over TCP seeded with it reaches the owner there: the
// owner's connection is made to the topology's TCP address, not to the
// QUIC address's port.
func TestClusterClientOverTCPFindsATCPListenerOnItsOwnPort(t *testing.T) {
	n := startServe(t, "FELIX_TCP_LISTEN=127.0.0.1:0")
	tcpAddr := n.client.BrokerTCPAddr
	if tcpAddr == "" || tcpAddr == n.client.BrokerAddr {
		t.Fatalf("client.json broker_tcp_addr %q beside broker_addr %q: want a port of its own", tcpAddr, n.client.BrokerAddr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "owntcp")
	cfg := n.sdkConfig(n.adminToken())
	cfg.Transport, cfg.ServerName = felix.TransportTCP, "127.0.0.1"
	cc, err := felix.ConnectCluster(ctx, []string{tcpAddr}, cfg)
	if err != nil {
		t.Fatalf("connect over TCP to %s: %v", tcpAddr, err)
	}
	defer cc.Close()
	eventually(t, 20*time.Second, "a publish routed to the owner over TCP", func() bool {
		_, err = cc.PublishAcked(ctx, "default", "owntcp", []byte("x"), felix.AckPerMessage)
		return err == nil
	})
	if got := cc.Brokers(); got["broker-1"] != n.client.BrokerAddr {
		t.Fatalf("topology %v, want broker-1 at %s", got, n.client.BrokerAddr)
	}
	// The owner's own connection (named by its node id, made for its
	// topology address) lives: it was dialled at the TCP address.
	if got := cc.ConnectionsPerNode(); got["broker-1"] != 1 {
		t.Fatalf("connections per node %v: want one to broker-1 over TCP", got)
	}
}
