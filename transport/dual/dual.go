// Package dual puts Felix's two transports side by side: a listener pair
// that serves QUIC and TLS over TCP on the same port number (UDP and TCP
// ports are separate, so one host:port names both), and dialers that pick
// one by name or try QUIC first and fall back to TCP ("auto").
package dual

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/transport/quictr"
	"github.com/felixmq/felix/transport/tcptr"
)

// Off is the TCP address that turns the TCP listener off.
const Off = "off"

// pairAttempts bounds the retries of a listener pair whose QUIC port was
// chosen by the kernel and then found taken on TCP.
const pairAttempts = 8

// Listen binds QUIC on quicAddr and TCP on tcpAddr: "" binds TCP on the
// QUIC listener's host and port number, Off binds no TCP listener. The
// first listener returned is the QUIC one. When quicAddr asks the kernel
// for a port (port 0) and that port number is taken on TCP, both are
// bound again on another, a few times.
func Listen(quicAddr, tcpAddr string, tlsConf *tls.Config, cfg transport.Config) ([]transport.Listener, error) {
	for attempt := 1; ; attempt++ {
		q, err := quictr.Listen(quicAddr, tlsConf, cfg)
		if err != nil {
			return nil, fmt.Errorf("listen quic %s: %w", quicAddr, err)
		}
		if tcpAddr == Off {
			return []transport.Listener{q}, nil
		}
		addr := tcpAddr
		if addr == "" {
			addr = SamePort(quicAddr, q.Addr())
		}
		t, err := tcptr.Listen(addr, tlsConf, cfg)
		if err == nil {
			return []transport.Listener{q, t}, nil
		}
		q.Close()
		if tcpAddr == "" && kernelPort(quicAddr) && errors.Is(err, syscall.EADDRINUSE) && attempt < pairAttempts {
			continue
		}
		if tcpAddr == "" {
			return nil, fmt.Errorf("listen tcp %s (the QUIC listener's port; name another TCP address or %q): %w", addr, Off, err)
		}
		return nil, fmt.Errorf("listen tcp %s: %w", addr, err)
	}
}

// SamePort is the TCP address that shares a QUIC listener's port: the
// host configured in quicAddr and the port the listener at bound got.
func SamePort(quicAddr string, bound net.Addr) string {
	host, _, err := net.SplitHostPort(quicAddr)
	if err != nil {
		host = ""
	}
	return net.JoinHostPort(host, strconv.Itoa(port(bound)))
}

// kernelPort reports whether addr leaves the port to the kernel.
func kernelPort(addr string) bool {
	_, p, err := net.SplitHostPort(addr)
	return err == nil && (p == "0" || p == "")
}

func port(a net.Addr) int {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.Port
	case *net.TCPAddr:
		return a.Port
	}
	_, p, err := net.SplitHostPort(a.String())
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}

// Dial dials addr over the transport kind names.
func Dial(ctx context.Context, kind transport.Kind, addr string, tlsConf *tls.Config, cfg transport.Config) (transport.Conn, error) {
	switch kind {
	case transport.QUIC, "":
		return quictr.Dial(ctx, addr, tlsConf, cfg)
	case transport.TCP:
		return tcptr.Dial(ctx, addr, tlsConf, cfg)
	}
	return nil, fmt.Errorf("unknown transport %q (have %q and %q)", kind, transport.QUIC, transport.TCP)
}

// DialAuto dials quicAddr over QUIC. When QUIC has not connected within
// fallback, or failed sooner, it dials tcpAddr over TCP as well, and the
// first connection made wins; the other dial is cancelled and waited for,
// and a connection it made anyway is closed. It fails only when both
// fail, with both errors.
func DialAuto(ctx context.Context, quicAddr, tcpAddr string, fallback time.Duration, tlsConf *tls.Config, cfg transport.Config) (transport.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan dialResult, 2) // never blocks a dialer: one slot each
	dial := func(kind transport.Kind, addr string) {
		c, err := Dial(ctx, kind, addr, tlsConf, cfg)
		results <- dialResult{c, err, kind}
	}
	go dial(transport.QUIC, quicAddr)
	timer := time.NewTimer(fallback)
	defer timer.Stop()
	started, pending := false, 1
	startTCP := func() {
		if !started {
			started = true
			pending++
			go dial(transport.TCP, tcpAddr)
		}
	}
	var errs []error
	for pending > 0 {
		select {
		case <-timer.C:
			startTCP()
		case r := <-results:
			pending--
			if r.err == nil {
				cancel()                    // the other dial gives up at once...
				closeLate(results, pending) // ...and is waited for here
				return r.c, nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", r.kind, r.err))
			startTCP()
		}
	}
	return nil, errors.Join(errs...)
}

// closeLate waits for the n dials still running once another one won
// (their context is cancelled, so they end promptly) and closes a
// connection one of them made all the same: no dial outlives DialAuto.
func closeLate(results <-chan dialResult, n int) {
	for ; n > 0; n-- {
		if r := <-results; r.err == nil {
			r.c.CloseWithError(0, "another transport connected first")
		}
	}
}

// dialResult is what one of DialAuto's dials made.
type dialResult struct {
	c    transport.Conn
	err  error
	kind transport.Kind
}
