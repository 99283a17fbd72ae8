package mux

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/transport"
)

// Defaults for a zero transport.Config field.
const (
	DefaultMaxIdleTimeout             = 30 * time.Second
	DefaultInitialStreamReceiveWindow = 512 << 10
	DefaultMaxStreamReceiveWindow     = 6 << 20
	DefaultInitialConnReceiveWindow   = 768 << 10
	DefaultMaxConnReceiveWindow       = 15 << 20
	DefaultMaxIncomingStreams         = 100
	DefaultMaxIncomingUniStreams      = 100
)

// maxStreamLimit bounds a configured stream limit (QUIC's 2^60).
const maxStreamLimit = 1 << 60

const (
	bidi = 0 // index of bidirectional streams in the per-kind arrays
	uni  = 1 // index of unidirectional streams
)

// WithDefaults returns cfg with every zero field set to its default and
// each maximum raised to at least its initial value.
func WithDefaults(cfg transport.Config) transport.Config {
	if cfg.MaxIdleTimeout <= 0 {
		cfg.MaxIdleTimeout = DefaultMaxIdleTimeout
	}
	if cfg.InitialStreamReceiveWindow == 0 {
		cfg.InitialStreamReceiveWindow = DefaultInitialStreamReceiveWindow
	}
	if cfg.MaxStreamReceiveWindow == 0 {
		cfg.MaxStreamReceiveWindow = DefaultMaxStreamReceiveWindow
	}
	if cfg.InitialConnReceiveWindow == 0 {
		cfg.InitialConnReceiveWindow = DefaultInitialConnReceiveWindow
	}
	if cfg.MaxConnReceiveWindow == 0 {
		cfg.MaxConnReceiveWindow = DefaultMaxConnReceiveWindow
	}
	cfg.MaxStreamReceiveWindow = max(cfg.MaxStreamReceiveWindow, cfg.InitialStreamReceiveWindow)
	cfg.MaxConnReceiveWindow = max(cfg.MaxConnReceiveWindow, cfg.InitialConnReceiveWindow)
	if cfg.MaxIncomingStreams == 0 {
		cfg.MaxIncomingStreams = DefaultMaxIncomingStreams
	}
	if cfg.MaxIncomingUniStreams == 0 {
		cfg.MaxIncomingUniStreams = DefaultMaxIncomingUniStreams
	}
	return cfg
}

// streamLimit is a configured incoming stream limit as a count.
func streamLimit(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return min(uint64(v), maxStreamLimit)
}

// localKind is what we know about the streams of one kind that we open.
type localKind struct {
	next    uint64 // number of the next stream we open
	peerMax uint64 // we may open numbers below this (the peer's MAX_STREAMS)
	none    bool   // the peer's SETTINGS allowed none, and it never will
}

// remoteKind is what we know about the streams of one kind the peer opens.
type remoteKind struct {
	next   uint64    // number of the next stream the peer opens
	max    uint64    // the peer may open numbers below this (our MAX_STREAMS)
	limit  uint64    // how many may be open at once (configured)
	accept []*stream // opened, not yet accepted
}

// Session is a multiplexed connection over one reliable, ordered byte
// stream. It implements transport.Conn.
type Session struct {
	conn     io.ReadWriteCloser
	isClient bool
	cfg      transport.Config
	start    time.Time

	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the session ends
	wg     sync.WaitGroup

	wlock       chan struct{} // the write lock: holding its one slot allows writing to conn
	q           writeQueue
	flushC      chan struct{} // kicks the writer goroutine (one slot)
	writeFailed atomic.Bool   // no more writes to conn
	bytesSent   atomic.Uint64 // bytes handed to conn

	lastRecv atomic.Int64 // nanoseconds since start when a frame last arrived
	lastPing atomic.Int64 // nanoseconds since start when we last sent a ping
	rtt      atomic.Int64 // latest ping round trip, nanoseconds (0: unknown)

	mu       sync.Mutex
	closeErr error // why the session ended; set once; guarded by mu

	// Guarded by mu.
	peerSettings bool          // the peer's SETTINGS arrived
	peerWindow   uint64        // the peer's initial stream receive window
	connSent     uint64        // DATA payload bytes we sent
	connSendMax  uint64        // the peer allows connSent up to this; Invariant: connSent <= connSendMax
	connRecv     recvWindow    // the connection-level receive window
	creditC      chan struct{} // closed and replaced when connection credit or settings arrive
	openC        chan struct{} // closed and replaced when a stream limit rises
	acceptC      chan struct{} // closed and replaced when a peer's stream is opened
	streams      map[uint64]*stream
	local        [2]localKind
	remote       [2]remoteKind
}

var _ transport.Conn = (*Session)(nil)

// Client starts a session as the client side (it opens even stream
// numbers' ids: the low id bit 0) over conn, which it owns from now on.
func Client(conn io.ReadWriteCloser, cfg transport.Config) *Session {
	return newSession(conn, true, cfg)
}

// Server starts a session as the server side over conn.
func Server(conn io.ReadWriteCloser, cfg transport.Config) *Session {
	return newSession(conn, false, cfg)
}

func newSession(conn io.ReadWriteCloser, isClient bool, cfg transport.Config) *Session {
	cfg = WithDefaults(cfg)
	s := &Session{
		conn:     conn,
		isClient: isClient,
		cfg:      cfg,
		start:    time.Now(),
		done:     make(chan struct{}),
		wlock:    make(chan struct{}, 1),
		flushC:   make(chan struct{}, 1),
		connRecv: newRecvWindow(cfg.InitialConnReceiveWindow, cfg.MaxConnReceiveWindow),
		creditC:  make(chan struct{}),
		openC:    make(chan struct{}),
		acceptC:  make(chan struct{}),
		streams:  make(map[uint64]*stream),
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	for k, v := range [2]int64{cfg.MaxIncomingStreams, cfg.MaxIncomingUniStreams} {
		s.remote[k].limit = streamLimit(v)
		s.remote[k].max = s.remote[k].limit
	}
	s.q.add(func(b []byte) []byte {
		b = appendSettings(b, []setting{
			{settingStreamWindow, cfg.InitialStreamReceiveWindow},
			{settingConnWindow, cfg.InitialConnReceiveWindow},
			{settingMaxBidi, s.remote[bidi].max},
			{settingMaxUni, s.remote[uni].max},
		})
		return appendU64Frame(b, framePing, 0, 0, uint64(s.now())) // a first RTT sample
	})
	s.lastPing.Store(s.now())
	s.wg.Add(3)
	go func() { defer s.wg.Done(); s.readLoop() }()
	go func() { defer s.wg.Done(); s.writeLoop() }()
	go func() { defer s.wg.Done(); s.timerLoop() }()
	s.kick() // the writer sends SETTINGS: a constructor never blocks on the peer
	return s
}

// now is the time since the session started, in nanoseconds (monotonic).
func (s *Session) now() int64 { return int64(time.Since(s.start)) }

// lost wraps transport.ErrConnectionLost with a reason.
func lost(format string, args ...any) error {
	return fmt.Errorf("%w: %s", transport.ErrConnectionLost, fmt.Sprintf(format, args...))
}

// lostBy wraps transport.ErrConnectionLost and the underlying connection's
// error err, so that callers can still match err (a TLS alert, a reset).
func lostBy(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", transport.ErrConnectionLost, op, err)
}

// Context is done when the session ends; context.Cause says why.
func (s *Session) Context() context.Context { return s.ctx }

// Kind is transport.TCP: the session's only production use is the TCP
// transport.
func (s *Session) Kind() transport.Kind { return transport.TCP }

// LocalAddr is the underlying connection's, when it is a net.Conn.
func (s *Session) LocalAddr() net.Addr {
	if c, ok := s.conn.(net.Conn); ok {
		return c.LocalAddr()
	}
	return nil
}

// RemoteAddr is the underlying connection's, when it is a net.Conn.
func (s *Session) RemoteAddr() net.Addr {
	if c, ok := s.conn.(net.Conn); ok {
		return c.RemoteAddr()
	}
	return nil
}

// TLS is the underlying connection's TLS state when it has one (a
// *tls.Conn), otherwise the zero value.
func (s *Session) TLS() tls.ConnectionState {
	if c, ok := s.conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
		return c.ConnectionState()
	}
	return tls.ConnectionState{}
}

// CloseWithError sends a CLOSE frame with code and msg, closes the
// underlying connection and every stream, and waits for the session's
// goroutines. The peer's operations fail with
// *transport.ApplicationError{Remote: true}, ours with Remote: false.
func (s *Session) CloseWithError(code transport.ApplicationErrorCode, msg string) error {
	s.closeWith(&transport.ApplicationError{Code: code, Message: msg}, true)
	s.wg.Wait()
	return nil
}

// SendStats is the bytes written to the underlying connection so far
// (handed to it: over TCP, not necessarily delivered) and the latest
// ping round trip (0 until one was measured). The broker's linger reads
// it, as it reads quictr's.
func (s *Session) SendStats() (bytesSent uint64, rtt time.Duration) {
	return s.bytesSent.Load(), time.Duration(s.rtt.Load())
}

// Err is why the session ended, or nil while it runs.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeErr
}

// closeWith ends the session once, with err as the cause. When
// sendClose, a CLOSE frame (an application close for an
// *ApplicationError, a protocol close otherwise) is written first, within
// closeFlushTimeout. It does not wait for the session's goroutines, so
// they may call it.
func (s *Session) closeWith(err error, sendClose bool) {
	s.mu.Lock()
	if s.closeErr != nil {
		s.mu.Unlock()
		return
	}
	s.closeErr = err
	s.mu.Unlock()
	close(s.done)
	s.cancel(err)
	if sendClose && !s.writeFailed.Load() {
		s.sendClose(err)
	}
	s.writeFailed.Store(true)
	s.q.mu.Lock()
	s.q.closed = true
	s.q.mu.Unlock()
	s.conn.Close()
	s.flush() // releases writers waiting on large payloads
}

// sendClose queues a CLOSE frame for err and writes the queue, waiting
// at most closeFlushTimeout for the write lock and the write.
func (s *Session) sendClose(err error) {
	var ae *transport.ApplicationError
	s.q.add(func(b []byte) []byte {
		if errors.As(err, &ae) {
			return appendClose(b, 0, uint64(ae.Code), ae.Message)
		}
		return appendClose(b, flagProtocol, 0, err.Error())
	})
	if c, ok := s.conn.(interface{ SetWriteDeadline(time.Time) error }); ok {
		c.SetWriteDeadline(time.Now().Add(closeFlushTimeout))
	}
	t := time.NewTimer(closeFlushTimeout)
	defer t.Stop()
	select {
	case s.wlock <- struct{}{}:
		s.flushLocked()
		<-s.wlock
	case <-t.C:
	}
}

// OpenStreamSync opens a bidirectional stream, waiting (within ctx) while
// the peer's stream limit is reached. It fails at once when the peer
// allows no bidirectional streams at all.
func (s *Session) OpenStreamSync(ctx context.Context) (transport.Stream, error) {
	return as[transport.Stream](s.open(ctx, bidi))
}

// OpenUniStreamSync opens a unidirectional stream, waiting likewise.
func (s *Session) OpenUniStreamSync(ctx context.Context) (transport.SendStream, error) {
	return as[transport.SendStream](s.open(ctx, uni))
}

// AcceptStream returns the next bidirectional stream the peer opened.
func (s *Session) AcceptStream(ctx context.Context) (transport.Stream, error) {
	return as[transport.Stream](s.accept(ctx, bidi))
}

// AcceptUniStream returns the next unidirectional stream the peer opened.
func (s *Session) AcceptUniStream(ctx context.Context) (transport.ReceiveStream, error) {
	return as[transport.ReceiveStream](s.accept(ctx, uni))
}

// as returns st as the interface T, or T's nil with err: a nil *stream
// must not become a non-nil interface value.
func as[T any](st *stream, err error) (T, error) {
	var none T
	if err != nil {
		return none, err
	}
	return any(st).(T), nil
}

// errNoStreams is OpenStreamSync's answer when the peer allows none of a kind.
var errNoStreams = errors.New("mux: the peer accepts no streams of this kind (its limit is 0)")

func (s *Session) open(ctx context.Context, k int) (*stream, error) {
	s.mu.Lock()
	for {
		if s.closeErr != nil {
			err := s.closeErr
			s.mu.Unlock()
			return nil, err
		}
		if s.peerSettings {
			lk := &s.local[k]
			if lk.none {
				s.mu.Unlock()
				return nil, errNoStreams
			}
			if lk.next < lk.peerMax {
				st := s.newStreamLocked(s.streamID(lk.next, k, s.isClient), true)
				lk.next++
				s.mu.Unlock()
				return st, nil
			}
		}
		c := s.openC
		s.mu.Unlock()
		select {
		case <-c:
		case <-s.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
}

func (s *Session) accept(ctx context.Context, k int) (*stream, error) {
	s.mu.Lock()
	for {
		rk := &s.remote[k]
		if len(rk.accept) > 0 {
			st := rk.accept[0]
			rk.accept[0] = nil
			rk.accept = rk.accept[1:]
			s.mu.Unlock()
			return st, nil
		}
		if s.closeErr != nil {
			err := s.closeErr
			s.mu.Unlock()
			return nil, err
		}
		c := s.acceptC
		s.mu.Unlock()
		select {
		case <-c:
		case <-s.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
}

// streamID builds a stream id: number, then the unidirectional bit, then
// the initiator bit (0 client, 1 server).
func (s *Session) streamID(num uint64, k int, byClient bool) uint64 {
	id := num<<2 | uint64(k)<<1
	if !byClient {
		id |= 1
	}
	return id
}

// broadcast closes *c and replaces it, waking every waiter on it.
func broadcast(c *chan struct{}) {
	close(*c)
	*c = make(chan struct{})
}

// NumStreams is how many streams the session still tracks (for tests
// and metrics): a stream is forgotten once both directions are over.
func (s *Session) NumStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams)
}

// errIdle is transport.ErrIdleTimeout itself, so errors.Is matches.
var errIdle = transport.ErrIdleTimeout
