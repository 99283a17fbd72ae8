package quictr

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/transport"
)

// Config maps cfg onto quic-go's configuration (doc.go, point 1).
func Config(cfg transport.Config) *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:           cfg.HandshakeTimeout,
		KeepAlivePeriod:                cfg.KeepAlive,
		MaxIdleTimeout:                 cfg.MaxIdleTimeout,
		InitialStreamReceiveWindow:     cfg.InitialStreamReceiveWindow,
		MaxStreamReceiveWindow:         cfg.MaxStreamReceiveWindow,
		InitialConnectionReceiveWindow: cfg.InitialConnReceiveWindow,
		MaxConnectionReceiveWindow:     cfg.MaxConnReceiveWindow,
		MaxIncomingStreams:             cfg.MaxIncomingStreams,
		MaxIncomingUniStreams:          cfg.MaxIncomingUniStreams,
	}
}

// Listen listens for QUIC connections on the UDP address addr (port 0
// picks a free one).
func Listen(addr string, tlsConf *tls.Config, cfg transport.Config) (transport.Listener, error) {
	ln, err := quic.ListenAddr(addr, tlsConf, Config(cfg))
	if err != nil {
		return nil, translate(err)
	}
	return &listener{ln: ln}, nil
}

// Dial opens a QUIC connection to addr; ctx bounds the handshake.
func Dial(ctx context.Context, addr string, tlsConf *tls.Config, cfg transport.Config) (transport.Conn, error) {
	qc, err := quic.DialAddr(ctx, addr, tlsConf, Config(cfg))
	if err != nil {
		return nil, translate(err)
	}
	return &conn{qc: qc}, nil
}

type listener struct{ ln *quic.Listener }

func (l *listener) Accept(ctx context.Context) (transport.Conn, error) {
	qc, err := l.ln.Accept(ctx)
	if err != nil {
		return nil, translate(err)
	}
	return &conn{qc: qc}, nil
}

func (l *listener) Addr() net.Addr { return l.ln.Addr() }
func (l *listener) Close() error   { return translate(l.ln.Close()) }

// conn is a transport.Conn over a quic-go connection.
type conn struct {
	qc *quic.Conn
	// ctx is qc's context with its cause translated, made by the first
	// call of Context.
	ctxOnce sync.Once
	ctx     context.Context
}

func (c *conn) OpenStreamSync(ctx context.Context) (transport.Stream, error) {
	s, err := c.qc.OpenStreamSync(ctx)
	if err != nil {
		return nil, translate(err)
	}
	return &stream{s: s}, nil
}

func (c *conn) OpenUniStreamSync(ctx context.Context) (transport.SendStream, error) {
	s, err := c.qc.OpenUniStreamSync(ctx)
	if err != nil {
		return nil, translate(err)
	}
	return &sendStream{s: s}, nil
}

func (c *conn) AcceptStream(ctx context.Context) (transport.Stream, error) {
	s, err := c.qc.AcceptStream(ctx)
	if err != nil {
		return nil, translate(err)
	}
	return &stream{s: s}, nil
}

func (c *conn) AcceptUniStream(ctx context.Context) (transport.ReceiveStream, error) {
	s, err := c.qc.AcceptUniStream(ctx)
	if err != nil {
		return nil, translate(err)
	}
	return &receiveStream{s: s}, nil
}

func (c *conn) CloseWithError(code transport.ApplicationErrorCode, msg string) error {
	return translate(c.qc.CloseWithError(quic.ApplicationErrorCode(code), msg))
}

func (c *conn) Context() context.Context {
	c.ctxOnce.Do(func() { c.ctx = translatedContext(c.qc.Context()) })
	return c.ctx
}

func (c *conn) LocalAddr() net.Addr      { return c.qc.LocalAddr() }
func (c *conn) RemoteAddr() net.Addr     { return c.qc.RemoteAddr() }
func (c *conn) TLS() tls.ConnectionState { return c.qc.ConnectionState().TLS }

// SendStats is the bytes the connection has sent so far and its
// smoothed round-trip time: how the broker tells, before it closes a
// connection, that what it wrote has gone out.
func (c *conn) SendStats() (bytesSent uint64, smoothedRTT time.Duration) {
	s := c.qc.ConnectionStats()
	return s.BytesSent, s.SmoothedRTT
}

func (c *conn) Kind() transport.Kind { return transport.QUIC }

// translatedContext returns a context done with parent whose cause is
// parent's, translated. It keeps parent's values. Once parent is done
// the returned context follows as soon as the callback has run; when
// parent is done already, it is done on return.
func translatedContext(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	if parent.Err() != nil {
		cancel(translate(context.Cause(parent)))
		return ctx
	}
	context.AfterFunc(parent, func() { cancel(translate(context.Cause(parent))) })
	return ctx
}
