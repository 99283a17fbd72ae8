package dev

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/felixmq/felix/internal/atomicfile"
	"github.com/felixmq/felix/roles/broker/tlsconf"
)

// shareCA makes sure <data-dir>/tls holds the cluster's development CA
// and that every node's <node dir>/tls holds a copy of it. felix serve
// reuses a CA it finds there (tlsconf.EnsureDevCA), and issues its
// serving certificate and its node certificate from it at every start,
// so all brokers chain to one CA: peers verify each other, and a client
// trusting <data-dir>/tls/ca.pem reaches every broker. It reports
// whether it created the CA.
func shareCA(dataDir string, nodes []nodeInfo) (created bool, err error) {
	certPath, keyPath, created, err := tlsconf.EnsureDevCA(filepath.Join(dataDir, caDir))
	if err != nil {
		return false, fmt.Errorf("development CA: %w", err)
	}
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return false, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return false, err
	}
	for _, n := range nodes {
		dir := filepath.Join(n.DataDir, caDir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return false, fmt.Errorf("%s: %w", n.Name, err)
		}
		// Key first, as EnsureDevCA writes: a crash between the two
		// leaves a pair that does not match, replaced on the next start.
		if err := copyIfDifferent(filepath.Join(dir, tlsconf.CAKeyFile), keyPEM, 0o600); err != nil {
			return false, fmt.Errorf("%s: %w", n.Name, err)
		}
		if err := copyIfDifferent(filepath.Join(dir, tlsconf.CACertFile), certPEM, 0o644); err != nil {
			return false, fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	return created, nil
}

func copyIfDifferent(path string, b []byte, perm os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil
	}
	return atomicfile.Write(path, b, perm)
}
