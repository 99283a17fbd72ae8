package tcptr

import (
	"crypto/tls"
	"errors"
	"net"
	"reflect"
)

// alertConn is a TLS connection whose read errors name a TLS alert the
// peer sent as a tls.AlertError, as quic-go names a peer's CRYPTO_ERROR.
// crypto/tls reports a received alert as a *net.OpError ("remote error")
// around an unexported type; callers that must tell "the peer refused my
// certificate" from other failures look for tls.AlertError on either
// transport.
type alertConn struct{ *tls.Conn }

func (c alertConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		err = nameAlert(err)
	}
	return n, err
}

// remoteAlertError is a received alert: it matches the original error and
// tls.AlertError with the alert's code.
type remoteAlertError struct {
	err   error
	alert tls.AlertError
}

func (e *remoteAlertError) Error() string   { return e.err.Error() }
func (e *remoteAlertError) Unwrap() []error { return []error{e.err, e.alert} }

// nameAlert wraps err as a remoteAlertError when it is an alert the peer
// sent, and returns it unchanged otherwise.
func nameAlert(err error) error {
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "remote error" || oe.Err == nil {
		return err
	}
	v := reflect.ValueOf(oe.Err)
	if v.Kind() != reflect.Uint8 {
		return err
	}
	return &remoteAlertError{err: err, alert: tls.AlertError(v.Uint())}
}
