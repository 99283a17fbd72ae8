package tcptr

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"

	"github.com/felixmq/felix/transport"
)

// TestRemoteAlertIsNamed: a server that requires a client certificate
// refuses a client without one after the client's TLS 1.3 handshake has
// finished; the client learns it from the alert on its first read, which
// must match both transport.ErrConnectionLost and tls.AlertError, as
// quic-go's CRYPTO_ERROR does on QUIC.
func TestRemoteAlertIsNamed(t *testing.T) {
	stls, ctls := testTLS(t)
	stls.ClientAuth = tls.RequireAnyClientCert
	ln := listen(t, stls, transport.Config{})
	c, err := Dial(ctxT(t), ln.Addr().String(), ctls, transport.Config{})
	if err != nil {
		t.Fatalf("dial: %v", err) // TLS 1.3: the client finishes first
	}
	defer c.CloseWithError(0, "")
	st, err := c.OpenStreamSync(ctxT(t))
	if err == nil {
		st.Write([]byte("hello"))
		_, err = st.Read(make([]byte, 1))
	}
	<-c.Context().Done()
	cause := context.Cause(c.Context())
	var alert tls.AlertError
	if !errors.Is(cause, transport.ErrConnectionLost) || !errors.As(cause, &alert) {
		t.Fatalf("session ended with %v (read: %v), want ErrConnectionLost and a tls.AlertError", cause, err)
	}
	if nameAlert(errors.New("plain")) == nil {
		t.Fatal("nameAlert dropped an error")
	}
}
