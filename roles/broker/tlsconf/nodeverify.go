package tlsconf

import (
	"crypto/x509"
	"errors"
	"fmt"
)

// Why a peer's certificate was refused. VerifyNode's errors match one of
// these with errors.Is.
var (
	// ErrNoPeerCert: the peer sent no certificate.
	ErrNoPeerCert = errors.New("tlsconf: the peer sent no certificate")
	// ErrUntrustedPeer: the peer's certificate does not chain to the
	// cluster CA (an unknown CA, an expired certificate, a wrong usage).
	ErrUntrustedPeer = errors.New("tlsconf: the peer's certificate is not signed by the cluster CA")
	// ErrWrongNode: the certificate names another node than expected.
	ErrWrongNode = errors.New("tlsconf: the peer's certificate names another node")
)

// VerifyNode checks a peer's certificate chain (leaf first, as TLS
// delivers it) against the cluster CAs for usage (server or client
// authentication), and returns the node id it names. With a non-empty
// want, a certificate naming another node is refused with ErrWrongNode.
// A certificate that names no node is refused with ErrNoNodeID.
func VerifyNode(chain []*x509.Certificate, cas *x509.CertPool, usage x509.ExtKeyUsage, want string) (string, error) {
	if len(chain) == 0 {
		return "", ErrNoPeerCert
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: cas, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUntrustedPeer, err)
	}
	id, err := NodeIDOf(chain[0])
	if err != nil {
		return "", err
	}
	if want != "" && id != want {
		return id, fmt.Errorf("%w: it names %q, want %q", ErrWrongNode, id, want)
	}
	return id, nil
}
