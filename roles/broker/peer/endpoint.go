package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/felixmq/felix/transport"
)

// Endpoint is one node's end of its peer links: the listener that
// accepts links from other nodes and the dialer that opens links to
// them. Create it with Listen; Close ends every link and waits for every
// goroutine it started.
type Endpoint struct {
	cfg Config // with defaults; never changes
	log *slog.Logger
	// lns are the listeners, QUIC first then TCP on the same port
	// number; set by Listen, never changed.
	lns []transport.Listener

	// ctx ends when Close starts: it cancels handshakes and dials.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts the accept loop, every accepted handshake and every
	// link's run goroutine.
	wg sync.WaitGroup
	// refused counts links refused by this end (certificate or handshake).
	refused atomic.Int64

	mu sync.Mutex
	// slots counts links held plus handshakes under way, both ways.
	// Invariant: slots <= cfg.MaxLinks, and slots >= len(links).
	slots int                // guarded by mu
	links map[*Link]struct{} // guarded by mu; handshaken links
	// dialed are the links Call uses, by node id: one per node, dialed on
	// first use (call.go). Guarded by mu.
	dialed map[string]*dialSlot
	closed bool // guarded by mu; set by Close
}

// Listen starts an endpoint that accepts links over QUIC on the UDP
// address addr (port 0 picks a free one) and over TLS on TCP at the same
// host and port number, so either transport reaches it at one address.
func Listen(addr string, cfg Config) (*Endpoint, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	e := &Endpoint{cfg: cfg, log: cfg.Logger.With("peer_node_id", cfg.NodeID), links: map[*Link]struct{}{}, dialed: map[string]*dialSlot{}}
	lns, err := listen(addr, e.serverTLS(), e.transportConfig())
	if err != nil {
		return nil, fmt.Errorf("peer: %w", err)
	}
	e.lns = lns
	e.ctx, e.cancel = context.WithCancel(context.Background())
	for _, ln := range lns {
		e.wg.Add(1)
		go e.acceptLoop(ln)
	}
	return e, nil
}

func (e *Endpoint) transportConfig() transport.Config {
	return transport.Config{
		HandshakeTimeout: e.cfg.HandshakeTimeout,
		KeepAlive:        e.cfg.KeepAlive,
		MaxIdleTimeout:   e.cfg.MaxIdleTimeout,
		// The handshake stream and the other end's call streams
		// (callstream.go), with room for those that replace broken ones.
		MaxIncomingStreams:    1 + 4*maxCallStreams,
		MaxIncomingUniStreams: -1,
	}
}

// Addr is the QUIC listener's address; the TCP one has the same port.
func (e *Endpoint) Addr() net.Addr { return e.lns[0].Addr() }

// Transport is what the endpoint dials links over.
func (e *Endpoint) Transport() transport.Kind { return e.cfg.Transport }

// NodeID is this node's id.
func (e *Endpoint) NodeID() string { return e.cfg.NodeID }

// Refused is how many links this end has refused so far.
func (e *Endpoint) Refused() int64 { return e.refused.Load() }

// Links returns the peers of the links held now, both ways.
func (e *Endpoint) Links() []Peer {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Peer, 0, len(e.links))
	for l := range e.links {
		out = append(out, l.peer)
	}
	return out
}

// Close stops accepting, closes every link with CloseShutdown and waits
// for every goroutine the endpoint started. Dials under way fail with
// ErrClosed. Calling it again does nothing.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		e.wg.Wait()
		return nil
	}
	e.closed = true
	links := make([]*Link, 0, len(e.links))
	for l := range e.links {
		links = append(links, l)
	}
	e.mu.Unlock()
	e.cancel()
	// Links first, so their peers hear CloseShutdown before the
	// listener's socket goes.
	for _, l := range links {
		l.closeWith(CloseShutdown, "shutdown", ErrClosed)
	}
	e.wg.Wait()
	var errs []error
	for _, ln := range e.lns {
		errs = append(errs, ln.Close())
	}
	return errors.Join(errs...)
}

func (e *Endpoint) acceptLoop(ln transport.Listener) {
	defer e.wg.Done()
	for {
		qc, err := ln.Accept(e.ctx)
		if err != nil {
			return
		}
		if err := e.reserve(); err != nil {
			e.refuse(qc.RemoteAddr(), "too many links", err)
			qc.CloseWithError(CloseTooManyLinks, "too many peer links")
			continue
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.accept(qc)
		}()
	}
}

// reserve takes a link slot for a handshake (ErrBusy when none is
// free, ErrClosed after Close).
func (e *Endpoint) reserve() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return ErrClosed
	case e.slots >= e.cfg.MaxLinks:
		return fmt.Errorf("%w: %d peer links, the most allowed", ErrBusy, e.cfg.MaxLinks)
	}
	e.slots++
	return nil
}

// release gives back a slot whose handshake failed.
func (e *Endpoint) release() {
	e.mu.Lock()
	e.slots--
	e.mu.Unlock()
}

// adopt records a handshaken link in its reserved slot and starts it;
// after Close it closes the link instead and returns ErrClosed.
func (e *Endpoint) adopt(l *Link) error {
	e.mu.Lock()
	if e.closed {
		e.slots--
		e.mu.Unlock()
		l.qc.CloseWithError(CloseShutdown, "shutdown")
		return ErrClosed
	}
	e.links[l] = struct{}{}
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		l.run()
	}()
	return nil
}

// forget drops an ended link and frees its slot.
func (e *Endpoint) forget(l *Link) {
	e.mu.Lock()
	if _, ok := e.links[l]; ok {
		delete(e.links, l)
		e.slots--
	}
	e.mu.Unlock()
}

// refuse logs and counts a link this end refused.
func (e *Endpoint) refuse(remote net.Addr, why string, err error) {
	e.refused.Add(1)
	e.log.Warn("refused a peer connection: "+why, "remote", fmt.Sprint(remote), "err", err)
}

// isClosed reports whether err is the end of the endpoint.
func (e *Endpoint) isClosed(err error) bool {
	return errors.Is(err, ErrClosed) || e.ctx.Err() != nil
}
