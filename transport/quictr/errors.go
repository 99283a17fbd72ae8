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
// deadline, a context) come back as they are.
func translate(err error) error {
	switch e := err.(type) {
	case nil:
		return nil
	case *quic.StreamError:
		return &transport.StreamError{Code: transport.StreamErrorCode(e.ErrorCode), Remote: e.Remote}
	case *quic.ApplicationError:
		return &transport.ApplicationError{Code: transport.ApplicationErrorCode(e.ErrorCode), Message: e.ErrorMessage, Remote: e.Remote}
	case *quic.IdleTimeoutError:
		return transport.ErrIdleTimeout
	case *quic.HandshakeTimeoutError:
		return transport.ErrHandshakeTimeout
	case *quic.TransportError:
		return lost(e)
	case *quic.StatelessResetError:
		return &lostError{text: e.Error()}
	}
	if err == io.EOF {
		return err
	}
	if errors.Is(err, quic.ErrWouldBlock) {
		return transport.ErrWouldBlock
	}
	return translateWrapped(err)
}

// translateWrapped finds a quic-go error deeper in err's chain (quic-go
// returns them bare, so this is rare) and translates it, dropping the
// wrapping.
func translateWrapped(err error) error {
	var (
		se *quic.StreamError
		ae *quic.ApplicationError
		ie *quic.IdleTimeoutError
		he *quic.HandshakeTimeoutError
		te *quic.TransportError
		re *quic.StatelessResetError
	)
	switch {
	case errors.As(err, &se):
		return translate(se)
	case errors.As(err, &ae):
		return translate(ae)
	case errors.As(err, &ie):
		return translate(ie)
	case errors.As(err, &he):
		return translate(he)
	case errors.As(err, &te):
		return translate(te)
	case errors.As(err, &re):
		return translate(re)
	}
	return err
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
