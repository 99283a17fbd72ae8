package peer

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"sync"

	"github.com/felixmq/felix/roles/broker/tlsconf"
)

// ALPN is the application protocol of peer links, distinct from the
// client protocol's "felix/1" so a client can never reach the peer
// protocol, nor a peer the client one.
const ALPN = "felix-peer/1"

// serverTLS is the listener's TLS configuration: TLS 1.3, ALPN
// felix-peer/1, this node's certificate, and a client certificate
// required and checked by tlsconf.VerifyNode against the cluster CA.
// The check is made here rather than by crypto/tls so that every refusal
// (no certificate, an unknown CA, no node name) is logged with the
// address it came from.
func (e *Endpoint) serverTLS() *tls.Config {
	base := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{ALPN},
		Certificates: []tls.Certificate{e.cfg.Creds.Cert},
		ClientAuth:   tls.RequestClientCert,
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{ALPN},
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			var remote net.Addr
			if hello.Conn != nil {
				remote = hello.Conn.RemoteAddr()
			}
			c := base.Clone()
			c.VerifyConnection = func(cs tls.ConnectionState) error {
				_, err := tlsconf.VerifyNode(cs.PeerCertificates, e.cfg.Creds.CAs, x509.ExtKeyUsageClientAuth, "")
				if err != nil {
					e.refuse(remote, "bad client certificate", err)
				}
				return err
			}
			return c, nil
		},
	}
}

// clientTLS is the dialer's TLS configuration for reaching nodeID: this
// node's certificate, and the listener's certificate checked by
// tlsconf.VerifyNode to chain to the cluster CA and name nodeID. The
// refusal is kept in *refusal, so Dial can name it.
func (e *Endpoint) clientTLS(nodeID string, refusal *lockedErr) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{ALPN},
		Certificates: []tls.Certificate{e.cfg.Creds.Cert},
		// The standard check knows DNS names and IP addresses only; the
		// node id is in a URI SAN, so VerifyConnection makes the whole
		// check (chain and name) instead.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := tlsconf.VerifyNode(cs.PeerCertificates, e.cfg.Creds.CAs, x509.ExtKeyUsageServerAuth, nodeID)
			refusal.set(err)
			return err
		},
	}
}

// lockedErr is an error set from a TLS callback and read by the dialer.
type lockedErr struct {
	mu  sync.Mutex
	err error // guarded by mu
}

func (l *lockedErr) set(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

func (l *lockedErr) get() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
