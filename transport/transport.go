// Package transport is the connection and stream interface everything
// above the wire uses. Felix speaks one protocol over two transports:
// QUIC (package transport/quictr, the default and the protocol of record)
// and TLS 1.3 over TCP with a stream multiplexer (packages transport/mux
// and transport/tcptr). Code above this package never learns which one
// it runs on: frames, handshake, flags, features and error codes are the
// same on both.
//
// The shapes follow QUIC's: a connection carries bidirectional and
// unidirectional streams opened by either end; either direction of a
// stream ends cleanly (Close sends a FIN) or abruptly with a code
// (CancelWrite resets the send side, CancelRead asks the peer to stop
// sending); a connection closes with an application code and a message.
// Errors that carry a peer's or our own code are *StreamError and
// *ApplicationError on every transport, so callers test them with
// errors.As and never import a transport's own error types.
package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// StreamErrorCode is the code a stream direction is reset or stopped with.
type StreamErrorCode uint64

// ApplicationErrorCode is the code a connection is closed with.
type ApplicationErrorCode uint64

// Kind names a transport.
type Kind string

// The transports.
const (
	QUIC Kind = "quic"
	TCP  Kind = "tcp"
)

// SendStream is the sending direction of a stream. One goroutine writes
// to it at a time; CancelWrite and Close may be called from any goroutine.
type SendStream interface {
	io.Writer
	// TryWriteAll writes all of p, or nothing when that would wait for
	// the peer's flow control: then it returns ErrWouldBlock.
	TryWriteAll(p []byte) error
	// Close ends the direction cleanly after what was written (a FIN).
	Close() error
	// CancelWrite abandons what was not yet delivered and resets the
	// direction with code. Later writes fail with a *StreamError.
	CancelWrite(code StreamErrorCode)
	SetWriteDeadline(t time.Time) error
	// Context is done once the direction is over: closed and delivered,
	// reset by us, or stopped by the peer. context.Cause gives why, as
	// a *StreamError or *ApplicationError where a code ended it.
	Context() context.Context
}

// ReceiveStream is the receiving direction of a stream.
type ReceiveStream interface {
	// Read reads in order; it returns io.EOF after the peer's FIN and a
	// *StreamError{Remote: true} after the peer's reset.
	io.Reader
	// CancelRead asks the peer to stop sending, with code, and discards
	// what arrives later.
	CancelRead(code StreamErrorCode)
	SetReadDeadline(t time.Time) error
}

// Stream is a bidirectional stream.
type Stream interface {
	SendStream
	ReceiveStream
	SetDeadline(t time.Time) error
}

// Conn is a connection. Its methods are safe for concurrent use.
type Conn interface {
	// OpenStreamSync opens a bidirectional stream, waiting while the
	// peer's limit on open streams is reached.
	OpenStreamSync(ctx context.Context) (Stream, error)
	// OpenUniStreamSync opens a unidirectional stream, waiting likewise.
	OpenUniStreamSync(ctx context.Context) (SendStream, error)
	AcceptStream(ctx context.Context) (Stream, error)
	AcceptUniStream(ctx context.Context) (ReceiveStream, error)
	// CloseWithError closes the connection and every stream on it; the
	// peer sees an *ApplicationError{Remote: true} with code and msg.
	CloseWithError(code ApplicationErrorCode, msg string) error
	// Context is done when the connection is closed; context.Cause
	// gives why (an *ApplicationError, ErrIdleTimeout, ...).
	Context() context.Context
	LocalAddr() net.Addr
	RemoteAddr() net.Addr
	// TLS is the connection's TLS state: the peer's certificates and
	// the negotiated ALPN.
	TLS() tls.ConnectionState
	// Kind names the transport the connection runs on.
	Kind() Kind
}

// Listener accepts connections.
type Listener interface {
	Accept(ctx context.Context) (Conn, error)
	Addr() net.Addr
	Close() error
}

// Config holds what both transports are tuned with. Zero values take
// each transport's defaults.
type Config struct {
	// HandshakeTimeout bounds a dial's handshake.
	HandshakeTimeout time.Duration
	// KeepAlive is how often an idle connection is pinged (0: never).
	KeepAlive time.Duration
	// MaxIdleTimeout closes a connection that heard nothing for this
	// long, with ErrIdleTimeout.
	MaxIdleTimeout time.Duration
	// InitialStreamReceiveWindow and MaxStreamReceiveWindow bound what
	// one stream may have unread; the window grows from the first to the
	// second as the reader keeps up.
	InitialStreamReceiveWindow uint64
	MaxStreamReceiveWindow     uint64
	// InitialConnReceiveWindow and MaxConnReceiveWindow bound the same
	// for all streams of a connection together.
	InitialConnReceiveWindow uint64
	MaxConnReceiveWindow     uint64
	// MaxIncomingStreams and MaxIncomingUniStreams bound how many streams
	// the peer may have open toward us at once; a negative value allows
	// none.
	MaxIncomingStreams    int64
	MaxIncomingUniStreams int64
}

// StreamError is a stream direction ended with a code: by the peer
// (Remote) or by us.
type StreamError struct {
	Code   StreamErrorCode
	Remote bool
}

func (e *StreamError) Error() string {
	who := "local"
	if e.Remote {
		who = "remote"
	}
	return fmt.Sprintf("stream reset (%s) with code %d", who, e.Code)
}

// ApplicationError is a connection closed with a code: by the peer
// (Remote) or by us.
type ApplicationError struct {
	Code    ApplicationErrorCode
	Message string
	Remote  bool
}

func (e *ApplicationError) Error() string {
	who := "local"
	if e.Remote {
		who = "remote"
	}
	if e.Message == "" {
		return fmt.Sprintf("connection closed (%s) with code %d", who, e.Code)
	}
	return fmt.Sprintf("connection closed (%s) with code %d: %s", who, e.Code, e.Message)
}

// Errors that carry no code.
var (
	// ErrWouldBlock is TryWriteAll's answer when flow control would
	// make it wait.
	ErrWouldBlock = errors.New("transport: write would block")
	// ErrIdleTimeout ends a connection that heard nothing for
	// MaxIdleTimeout.
	ErrIdleTimeout = errors.New("transport: idle timeout")
	// ErrHandshakeTimeout ends a dial whose handshake took longer than
	// HandshakeTimeout.
	ErrHandshakeTimeout = errors.New("transport: handshake timeout")
	// ErrConnectionLost ends a connection whose underlying network
	// connection broke without a close (a reset, a stateless reset, a
	// protocol violation); errors.Is matches it and the error's text
	// says which.
	ErrConnectionLost = errors.New("transport: connection lost")
)
