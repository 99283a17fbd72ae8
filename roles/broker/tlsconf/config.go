package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ALPN is the application protocol Felix negotiates on every connection.
const ALPN = "felix/1"

// ServerTLSConfig returns a TLS 1.3-only server configuration offering
// ALPN "felix/1" and serving certificates from get. With a non-empty
// clientCAFile (PEM), client certificates are requested and, when a
// client sends one, verified against those CAs; clients without a
// certificate are still accepted.
func ServerTLSConfig(get func(*tls.ClientHelloInfo) (*tls.Certificate, error), clientCAFile string) (*tls.Config, error) {
	if get == nil {
		return nil, errors.New("tlsconf: ServerTLSConfig needs a certificate source")
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS13,
		NextProtos:     []string{ALPN},
		GetCertificate: get,
	}
	if clientCAFile != "" {
		pool, err := loadPool(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: client CA: %w", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// ClientTLSConfig returns a TLS 1.3-only client configuration offering
// ALPN "felix/1" that trusts the CAs in caFile (PEM) and expects the
// server to be serverName. It is meant for tests and tools; the SDK
// builds its own.
func ClientTLSConfig(caFile string, serverName string) (*tls.Config, error) {
	pool, err := loadPool(caFile)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: %w", err)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{ALPN},
		RootCAs:    pool,
		ServerName: serverName,
	}, nil
}

// loadPool reads a PEM file of certificates into a pool.
func loadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("no certificates in %s", file)
	}
	return pool, nil
}
