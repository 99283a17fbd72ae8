package tcptr

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/transport/mux"
)

const (
	// maxHandshakes bounds the handshakes a listener runs at once; the
	// accept loop waits for a slot.
	maxHandshakes = 64
	// acceptQueue bounds connections handshaken but not yet accepted; a
	// finished handshake waits for room.
	acceptQueue = 64
)

// ErrListenerClosed is Accept's answer once the listener is closed.
var ErrListenerClosed = errors.New("tcptr: listener closed")

// listener accepts TCP connections and handshakes them off its loop.
type listener struct {
	ln      net.Listener
	tlsConf *tls.Config
	cfg     transport.Config

	slots   chan struct{} // one per handshake in progress
	readyC  chan transport.Conn
	closedC chan struct{}
	once    sync.Once
	wg      sync.WaitGroup // the accept loop and the handshakes

	mu      sync.Mutex
	pending map[net.Conn]struct{} // connections handshaking; guarded by mu
	closed  bool                  // Close was called; guarded by mu
}

// Listen listens on addr (TCP) and returns connections whose TLS 1.3
// handshake completed with the ALPN of tlsConf.NextProtos[0].
func Listen(addr string, tlsConf *tls.Config, cfg transport.Config) (transport.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &listener{
		ln:      ln,
		tlsConf: tlsConfig(tlsConf),
		cfg:     cfg,
		slots:   make(chan struct{}, maxHandshakes),
		readyC:  make(chan transport.Conn, acceptQueue),
		closedC: make(chan struct{}),
		pending: make(map[net.Conn]struct{}),
	}
	l.wg.Add(1)
	go func() { defer l.wg.Done(); l.acceptLoop() }()
	return l, nil
}

func (l *listener) acceptLoop() {
	var backoff time.Duration
	for {
		select {
		case l.slots <- struct{}{}:
		case <-l.closedC:
			return
		}
		nc, err := l.ln.Accept()
		if err != nil {
			<-l.slots
			if errors.Is(err, net.ErrClosed) {
				return // Close: Accept callers see ErrListenerClosed
			}
			// Out of descriptors, a connection aborted before it was
			// accepted...: the listener lives on; wait a little so a
			// lasting shortage does not spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-l.closedC:
				return
			}
			continue
		}
		backoff = 0
		setNoDelay(nc)
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			nc.Close()
			<-l.slots
			return
		}
		l.pending[nc] = struct{}{}
		l.mu.Unlock()
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer func() { <-l.slots }()
			l.handshake(nc)
		}()
	}
}

// handshake runs one server handshake within the handshake timeout and
// queues the session for Accept.
func (l *listener) handshake(nc net.Conn) {
	defer func() {
		l.mu.Lock()
		delete(l.pending, nc)
		l.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout(l.cfg))
	defer cancel()
	tc := tls.Server(nc, l.tlsConf)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return
	}
	if err := checkALPN(tc, l.tlsConf.NextProtos); err != nil {
		tc.Close()
		return
	}
	c := mux.Server(alertConn{tc}, l.cfg)
	select {
	case l.readyC <- c:
	case <-l.closedC:
		c.CloseWithError(0, "listener closed")
	}
}

// Accept returns the next handshaken connection.
func (l *listener) Accept(ctx context.Context) (transport.Conn, error) {
	select {
	case c := <-l.readyC:
		return c, nil
	case <-l.closedC:
		return nil, ErrListenerClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops accepting, ends handshakes in progress and connections not
// yet accepted, and waits for the listener's goroutines. Accepted
// connections are not closed.
func (l *listener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.closedC)
		err = l.ln.Close()
		l.mu.Lock()
		l.closed = true
		for nc := range l.pending {
			nc.Close()
		}
		l.mu.Unlock()
		l.wg.Wait()
		for {
			select {
			case c := <-l.readyC:
				c.CloseWithError(0, "listener closed")
			default:
				return
			}
		}
	})
	return err
}
