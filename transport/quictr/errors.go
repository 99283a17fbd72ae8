package quictr

import (
	"crypto/tls"
	"errors"
	"io"
	"net"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/transport"
)

// translate maps an error quic-go returned onto the transport's errors
// (doc.go, point 2). nil, io.EOF and errors quic-go does not own (a
// deadline, a context) come back as they are. It allocates only to build
// a translated error that carries data.
func translate(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	// quic-go returns its errors bare; a wrapped one is translated too,
	// dropping the wrapping.
	for e := err; e != nil; e = errors.Unwrap(e) {
		if t, ok := translateBare(e); ok {
			return t
		}
	}
	return err
}

// translateBare translates err itself, reporting whether it is one of
// quic-go's.
func translateBare(err error) (error, bool) {
	switch e := err.(type) {
	case *quic.StreamError:
		return &transport.StreamError{Code: transport.StreamErrorCode(e.ErrorCode), Remote: e.Remote}, true
	case *quic.ApplicationError:
		return &transport.ApplicationError{Code: transport.ApplicationErrorCode(e.ErrorCode), Message: e.ErrorMessage, Remote: e.Remote}, true
	case *quic.IdleTimeoutError:
		return transport.ErrIdleTimeout, true
	case *quic.HandshakeTimeoutError:
		return transport.ErrHandshakeTimeout, true
	case *quic.TransportError:
		return lost(e), true
	case *quic.StatelessResetError:
		return &lostError{text: e.Error()}, true
	}
	if err == quic.ErrWouldBlock {
		return transport.ErrWouldBlock, true
	}
	return nil, false
}

// lostError is a connection that broke without an application close: a
// QUIC transport error or a stateless reset. It matches
// transport.ErrConnectionLost; its text is quic-go's.
type lostError struct {
	text string
	// alert is the TLS alert of a CRYPTO_ERROR the peer sent, when
	// hasAlert is set.
	alert    tls.AlertError
	hasAlert bool
	// cause is what our own end failed with (a certificate our TLS
	// configuration refused), when quic-go kept it.
	cause error
}

func lost(e *quic.TransportError) *lostError {
	l := &lostError{text: e.Error()}
	if e.Remote && e.ErrorCode.IsCryptoError() {
		l.alert, l.hasAlert = tls.AlertError(e.ErrorCode-0x100), true
	}
	if !e.Remote {
		// quic-go's TransportError unwraps to net.ErrClosed and to the
		// error it was made from; keep the latter.
		for _, u := range e.Unwrap() {
			if u != nil && u != net.ErrClosed {
				l.cause = u
			}
		}
	}
	return l
}

func (e *lostError) Error() string { return transport.ErrConnectionLost.Error() + ": " + e.text }

func (e *lostError) Unwrap() []error {
	out := []error{transport.ErrConnectionLost}
	if e.hasAlert {
		out = append(out, e.alert)
	}
	if e.cause != nil {
		out = append(out, e.cause)
	}
	return out
}
