package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/felixmq/felix/roles/broker/tlsconf"
	"github.com/felixmq/felix/transport"
)

// Config is what an Endpoint needs. Zero durations and counts take the
// defaults named on each field.
type Config struct {
	// NodeID is this node's id; Creds' certificate must name it.
	NodeID string
	// StorageID is this node's storage identity, sent in the handshake.
	StorageID string
	// Creds are the node certificate and the cluster CA.
	Creds tlsconf.NodeCredentials
	// Logger defaults to slog.Default().
	Logger *slog.Logger

	// HandshakeTimeout bounds a link's handshake, from the QUIC dial or
	// accept to the welcome (default 5s).
	HandshakeTimeout time.Duration
	// DialAttempts is how many times Dial tries before giving up
	// (default 5). Refusals (wrong node, version, certificate) are not
	// tried again.
	DialAttempts int
	// DialBackoff is the wait after the first failed attempt; it doubles
	// after each, up to MaxDialBackoff (defaults 100ms and 2s).
	DialBackoff    time.Duration
	MaxDialBackoff time.Duration
	// MaxLinks bounds the links the endpoint holds, accepted and dialed
	// (default 256); past it a new one is refused with ErrBusy
	// (CloseTooManyLinks).
	MaxLinks int
	// SendQueue bounds the frames waiting to be written on one link
	// (default 64); past it a send fails with ErrBusy.
	SendQueue int
	// MaxPendingPings bounds the pings of one link waiting for their
	// pong (default 64); past it Ping fails with ErrBusy.
	MaxPendingPings int
	// MaxFrameBytes refuses longer frames (default 1 MiB).
	MaxFrameBytes uint32
	// Handle answers the calls other nodes make on this node's links
	// (call.go), each on a goroutine of its own, with the caller as the
	// link's handshake named it. It must return once ctx ends (the link
	// ended or the caller gave up). Nil answers every call unsupported.
	Handle func(ctx context.Context, from Peer, req Request) Reply
	// MaxCallsInFlight bounds the calls this end has in flight on one
	// link (default 1024); past it Call fails with ErrBusy. It also bounds
	// the other end's calls this end handles at once on one link; past it
	// a request is refused overloaded.
	MaxCallsInFlight int
	// MaxCallBytes refuses call frames (requests and replies) longer than
	// this (default 17 MiB: a client's largest frame and room for the
	// call's header).
	MaxCallBytes uint32
	// CallIOTimeout bounds how long the answering end waits for a call's
	// request to arrive whole, and for its reply to be written (default
	// 30s).
	CallIOTimeout time.Duration
	// KeepAlive and MaxIdleTimeout are the QUIC keep-alive period and
	// idle timeout of a link (defaults 2s and 6s, as client connections).
	KeepAlive      time.Duration
	MaxIdleTimeout time.Duration
	// Transport is what this end dials links over (FELIX_PEER_TRANSPORT):
	// transport.TCP (the default: a link carries request/response calls
	// and bulk bytes, where TLS over TCP costs less CPU per byte and per
	// round trip than quic-go) or transport.QUIC. An endpoint accepts
	// both, whatever it dials.
	Transport transport.Kind

	// version is the protocol version this end claims; 0 is
	// ProtocolVersion. Tests set it to check the refusal.
	version int
}

// withDefaults returns c with every zero field defaulted.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	def(&c.HandshakeTimeout, 5*time.Second)
	def(&c.DialBackoff, 100*time.Millisecond)
	def(&c.MaxDialBackoff, 2*time.Second)
	def(&c.CallIOTimeout, 30*time.Second)
	def(&c.KeepAlive, 2*time.Second)
	def(&c.MaxIdleTimeout, 6*time.Second)
	defInt(&c.DialAttempts, 5)
	defInt(&c.MaxLinks, 256)
	defInt(&c.SendQueue, 64)
	defInt(&c.MaxPendingPings, 64)
	defInt(&c.MaxCallsInFlight, 1024)
	if c.MaxCallBytes == 0 {
		c.MaxCallBytes = 17 << 20
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = 1 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.version == 0 {
		c.version = ProtocolVersion
	}
	if c.Transport == "" {
		c.Transport = transport.TCP
	}
	return c
}

// validate checks the identity: a node id its certificate names, a CA.
func (c Config) validate() error {
	var errs []error
	if err := tlsconf.CheckNodeID(c.NodeID); err != nil {
		errs = append(errs, fmt.Errorf("peer: NodeID: %w", err))
	}
	if c.Creds.Cert.Leaf == nil || c.Creds.CAs == nil {
		errs = append(errs, errors.New("peer: Creds needs a node certificate (with Leaf) and the cluster CA"))
	} else if id, err := tlsconf.NodeIDOf(c.Creds.Cert.Leaf); err != nil {
		errs = append(errs, fmt.Errorf("peer: node certificate: %w", err))
	} else if id != c.NodeID {
		errs = append(errs, fmt.Errorf("peer: the node certificate names %q, but this node is %q", id, c.NodeID))
	}
	return errors.Join(errs...)
}
