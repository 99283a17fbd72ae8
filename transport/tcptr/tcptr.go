// Package tcptr is Felix's second transport: TLS 1.3 over TCP, with the
// streams of transport/mux inside. It speaks the same Felix protocol as
// QUIC (docs/protocol.md, "TCP transport") for networks that block UDP
// and for bulk paths where quic-go's per-packet cost dominates.
//
// Contract:
//
//  1. TLS 1.3 only (MinVersion is raised to it), TCP_NODELAY on.
//  2. When tls.Config.NextProtos is set, the negotiated ALPN must be its
//     first entry, on both sides; otherwise the connection is refused
//     (ErrALPN) before any stream exists.
//  3. Dial's handshake is bounded by Config.HandshakeTimeout (default
//     10 s) and fails with transport.ErrHandshakeTimeout when it passes.
//  4. A listener handshakes off its accept loop, at most
//     maxHandshakes at once, each bounded by HandshakeTimeout: a client
//     that connects and never finishes its handshake does not hold up
//     the others (only a full set of them would, for that long).
//  5. Closing a listener stops accepting and closes connections
//     handshaken but not yet accepted; connections Accept returned live
//     on, as quic-go's do.
package tcptr

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/transport/mux"
)

// DefaultHandshakeTimeout bounds a handshake when Config.HandshakeTimeout is 0.
const DefaultHandshakeTimeout = 10 * time.Second

// ErrALPN is a handshake whose negotiated ALPN is not the configured one.
var ErrALPN = errors.New("tcptr: ALPN protocol mismatch")

// tlsConfig clones c and requires TLS 1.3.
func tlsConfig(c *tls.Config) *tls.Config {
	c = c.Clone()
	c.MinVersion = tls.VersionTLS13
	if c.MaxVersion != 0 && c.MaxVersion < tls.VersionTLS13 {
		c.MaxVersion = tls.VersionTLS13
	}
	return c
}

func handshakeTimeout(cfg transport.Config) time.Duration {
	if cfg.HandshakeTimeout > 0 {
		return cfg.HandshakeTimeout
	}
	return DefaultHandshakeTimeout
}

// checkALPN refuses a connection that did not negotiate the first of
// protos (when there are any).
func checkALPN(tc *tls.Conn, protos []string) error {
	if len(protos) == 0 {
		return nil
	}
	if got := tc.ConnectionState().NegotiatedProtocol; got != protos[0] {
		return fmt.Errorf("%w: negotiated %q, want %q", ErrALPN, got, protos[0])
	}
	return nil
}

// Dial connects to addr over TCP, handshakes TLS 1.3 within
// cfg.HandshakeTimeout and starts a client session.
func Dial(ctx context.Context, addr string, tlsConf *tls.Config, cfg transport.Config) (transport.Conn, error) {
	tlsConf = tlsConfig(tlsConf)
	if tlsConf.ServerName == "" && !tlsConf.InsecureSkipVerify {
		// As tls.Dial does: verify the certificate against the host dialled.
		if host, _, err := net.SplitHostPort(addr); err == nil {
			tlsConf.ServerName = host
		}
	}
	hctx, cancel := context.WithTimeoutCause(ctx, handshakeTimeout(cfg), transport.ErrHandshakeTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(hctx, "tcp", addr)
	if err != nil {
		return nil, dialErr(hctx, err)
	}
	setNoDelay(nc)
	tc := tls.Client(nc, tlsConf)
	if err := tc.HandshakeContext(hctx); err != nil {
		nc.Close()
		return nil, dialErr(hctx, err)
	}
	if err := checkALPN(tc, tlsConf.NextProtos); err != nil {
		tc.Close()
		return nil, err
	}
	return mux.Client(alertConn{tc}, cfg), nil
}

// dialErr is transport.ErrHandshakeTimeout when our own bound passed.
func dialErr(hctx context.Context, err error) error {
	if errors.Is(context.Cause(hctx), transport.ErrHandshakeTimeout) {
		return fmt.Errorf("%w (%v)", transport.ErrHandshakeTimeout, err)
	}
	return err
}

func setNoDelay(nc net.Conn) {
	if tcp, ok := nc.(*net.TCPConn); ok {
		tcp.SetNoDelay(true)
	}
}
