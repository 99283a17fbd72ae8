package peer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/felixmq/felix/internal/gogroup"
	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// Peer is the other end of a link, as its handshake and certificate
// named it.
type Peer struct {
	NodeID    string
	StorageID string
	Version   int
	Addr      string // its network address
	Dialed    bool   // this end dialed the link
}

// Link is one handshaken peer link: a transport connection (QUIC) with one
// bidirectional stream of frames. Both ends may Ping; each answers the
// other's pings. A link is owned by its Endpoint, which closes it at
// Close; the caller of Dial may close it earlier.
type Link struct {
	ep   *Endpoint
	qc   transport.Conn
	st   transport.Stream
	fr   *wire.FrameReader // reads st; used by run's read loop only
	peer Peer              // set by the handshake; never changes

	// ctx ends when the link does; its cause is why.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// sendC holds frames for the writer, at most cfg.SendQueue; a send
	// to a full queue fails with ErrBusy (never blocks the sender).
	sendC chan []byte
	// done is closed when run has ended: both loops stopped, the link
	// forgotten by its endpoint.
	done chan struct{}
	// calls holds a token per call this end has in flight, at most
	// cfg.MaxCallsInFlight.
	calls chan struct{}
	// handling counts the other end's calls being handled here, at most
	// cfg.MaxCallsInFlight.
	handling atomic.Int64

	// cmu guards the call streams (callstream.go).
	cmu sync.Mutex
	// out are the call streams this end opened, at most maxCallStreams.
	out []*callStream // guarded by cmu
	// opened is non-nil while a call stream is being opened, and closed
	// when that ends.
	opened chan struct{} // guarded by cmu
	// streams are the call streams' goroutines: readers of either end and
	// the cancels callers send. run closes it once the link has ended.
	streams gogroup.Group

	mu sync.Mutex
	// pending maps the seq of each ping awaiting its pong to the channel
	// (one slot) its pong closes. Invariant: len(pending) <=
	// cfg.MaxPendingPings.
	pending map[uint64]chan struct{} // guarded by mu
	nextSeq uint64                   // guarded by mu
}

func newLink(ep *Endpoint, qc transport.Conn, st transport.Stream, fr *wire.FrameReader, p Peer) *Link {
	l := &Link{
		ep: ep, qc: qc, st: st, fr: fr, peer: p,
		sendC:   make(chan []byte, ep.cfg.SendQueue),
		done:    make(chan struct{}),
		calls:   make(chan struct{}, ep.cfg.MaxCallsInFlight),
		pending: map[uint64]chan struct{}{},
	}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	return l
}

// Peer is the other end of the link.
func (l *Link) Peer() Peer { return l.peer }

// Done is closed once the link has ended; Err then says why.
func (l *Link) Done() <-chan struct{} { return l.done }

// Err is why the link ended (nil while it runs).
func (l *Link) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Close closes the link (CloseNormal) and waits for its goroutines.
func (l *Link) Close() error {
	l.closeWith(CloseNormal, "closed", ErrClosed)
	<-l.done
	return nil
}

// closeWith ends the link with a close code sent to the other end; the
// first cause is kept.
func (l *Link) closeWith(code CloseCode, reason string, cause error) {
	l.cancel(cause)
	l.qc.CloseWithError(code, reason)
}

// Ping sends a ping and waits for its pong, ctx or the end of the link.
func (l *Link) Ping(ctx context.Context) error {
	seq, pongC, err := l.expectPong()
	if err != nil {
		return err
	}
	defer l.forgetPing(seq)
	if err := l.send(&Ping{Seq: seq}); err != nil {
		return err
	}
	select {
	case <-pongC:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-l.ctx.Done():
		return fmt.Errorf("%w: %w", ErrClosed, context.Cause(l.ctx))
	}
}

// expectPong registers a ping awaiting its pong.
func (l *Link) expectPong() (uint64, chan struct{}, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) >= l.ep.cfg.MaxPendingPings {
		return 0, nil, fmt.Errorf("%w: %d pings await their pong", ErrBusy, len(l.pending))
	}
	l.nextSeq++
	c := make(chan struct{})
	l.pending[l.nextSeq] = c
	return l.nextSeq, c, nil
}

func (l *Link) forgetPing(seq uint64) {
	l.mu.Lock()
	delete(l.pending, seq)
	l.mu.Unlock()
}

// gotPong closes the channel of the ping seq answers, if it still waits.
func (l *Link) gotPong(seq uint64) {
	l.mu.Lock()
	c, ok := l.pending[seq]
	delete(l.pending, seq)
	l.mu.Unlock()
	if ok {
		close(c)
	}
}

// send queues m for the writer: ErrBusy when the queue is full,
// ErrClosed once the link has ended.
func (l *Link) send(m wire.Message) error {
	b, err := appendFrame(nil, m)
	if err != nil {
		return err
	}
	if l.ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrClosed, context.Cause(l.ctx))
	}
	select {
	case l.sendC <- b:
		return nil
	default:
		return fmt.Errorf("%w: %d frames wait to be written to %s", ErrBusy, cap(l.sendC), l.peer.NodeID)
	}
}

// run reads frames until the link ends, with the writer, the call
// acceptor and every call being served as its children; then it closes
// the connection, waits for them and leaves the endpoint.
func (l *Link) run() {
	defer close(l.done)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		l.writeLoop()
	}()
	go func() {
		defer wg.Done()
		l.acceptCalls()
	}()
	err := l.readLoop()
	l.cancel(remoteError(err))
	l.qc.CloseWithError(CloseNormal, "closed")
	wg.Wait()
	l.streams.Close()
	l.ep.forget(l)
	if cause := context.Cause(l.ctx); !errors.Is(cause, ErrClosed) {
		l.ep.log.Info("peer link ended", "node_id", l.peer.NodeID, "addr", l.peer.Addr, "err", cause)
	}
}

func (l *Link) writeLoop() {
	for {
		select {
		case <-l.ctx.Done():
			return
		case b := <-l.sendC:
			if _, err := l.st.Write(b); err != nil {
				l.cancel(remoteError(err))
				l.qc.CloseWithError(CloseNormal, "closed")
				return
			}
		}
	}
}

// readLoop handles frames until one fails to read or decode.
func (l *Link) readLoop() error {
	for {
		f, err := l.fr.Next()
		if err != nil {
			return err
		}
		m, err := ParseMessage(f.Payload)
		if err != nil {
			l.closeWith(CloseProtocolError, err.Error(), err)
			return err
		}
		switch m := m.(type) {
		case *Ping:
			if err := l.send(&Pong{Seq: m.Seq}); err != nil {
				// The queue is full: this pong is dropped and that ping
				// times out at its sender, as a lost one would.
				l.ep.log.Debug("dropped a pong", "node_id", l.peer.NodeID, "err", err)
			}
		case *Pong:
			l.gotPong(m.Seq)
		case *Unknown:
			// A later release's message: ignored, so releases can mix.
		default:
			err := fmt.Errorf("peer: unexpected %s after the handshake", m.MessageType())
			l.closeWith(CloseProtocolError, err.Error(), err)
			return err
		}
	}
}
