package tlsconf

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// devCA creates a development CA in a temp dir and returns its PEM.
func devCA(t *testing.T) (dir string, certPEM, keyPEM []byte) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "tls")
	certPath, keyPath, created, err := EnsureDevCA(dir)
	if err != nil || !created {
		t.Fatalf("EnsureDevCA = created %v, %v", created, err)
	}
	certPEM = mustRead(t, certPath)
	keyPEM = mustRead(t, keyPath)
	return dir, certPEM, keyPEM
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEnsureDevCACreatesOnceThenReuses(t *testing.T) {
	dir, certPEM, keyPEM := devCA(t)

	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700}, {filepath.Join(dir, CAKeyFile), 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != c.mode {
			t.Errorf("%s mode = %o, want %o", c.path, got, c.mode)
		}
	}
	ca, err := parseCertPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA flags: IsCA=%v usage=%v", ca.IsCA, ca.KeyUsage)
	}
	if life := ca.NotAfter.Sub(ca.NotBefore); life < 9*365*24*time.Hour {
		t.Errorf("CA lifetime %v, want about ten years", life)
	}

	certPath, keyPath, created, err := EnsureDevCA(dir)
	if err != nil || created {
		t.Fatalf("second EnsureDevCA = created %v, %v", created, err)
	}
	if !bytes.Equal(mustRead(t, certPath), certPEM) || !bytes.Equal(mustRead(t, keyPath), keyPEM) {
		t.Fatal("second EnsureDevCA rewrote the CA")
	}
}

func TestEnsureDevCAReplacesBrokenPair(t *testing.T) {
	dir, certPEM, _ := devCA(t)
	if err := os.WriteFile(filepath.Join(dir, CAKeyFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	certPath, _, created, err := EnsureDevCA(dir)
	if err != nil || !created {
		t.Fatalf("EnsureDevCA over a broken key = created %v, %v", created, err)
	}
	if bytes.Equal(mustRead(t, certPath), certPEM) {
		t.Fatal("CA certificate not replaced")
	}
	if _, _, created, err := EnsureDevCA(dir); err != nil || created {
		t.Fatalf("third EnsureDevCA = created %v, %v", created, err)
	}
}

func TestIssueServerCertVerifiesForHosts(t *testing.T) {
	_, caPEM, caKeyPEM := devCA(t)
	cert, err := IssueServerCert(caPEM, caKeyPEM, []string{"localhost", "127.0.0.1", "::1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(cert.Certificate) != 2 || cert.Leaf == nil {
		t.Fatalf("chain length %d, leaf %v", len(cert.Certificate), cert.Leaf != nil)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		_, err := cert.Leaf.Verify(x509.VerifyOptions{
			DNSName:   host,
			Roots:     pool,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			t.Errorf("verify for %s: %v", host, err)
		}
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: pool}); err == nil {
		t.Error("certificate verified for a host it does not name")
	}
	if len(cert.Leaf.IPAddresses) != 2 || len(cert.Leaf.DNSNames) != 1 {
		t.Errorf("SANs: ips %v dns %v", cert.Leaf.IPAddresses, cert.Leaf.DNSNames)
	}
}

func TestIssueServerCertRejectsBadInput(t *testing.T) {
	_, caPEM, caKeyPEM := devCA(t)
	_, _, otherKey := devCA(t)
	cases := map[string]struct {
		cert, key []byte
		hosts     []string
	}{
		"no hosts":     {caPEM, caKeyPEM, nil},
		"empty host":   {caPEM, caKeyPEM, []string{""}},
		"garbage cert": {[]byte("x"), caKeyPEM, []string{"localhost"}},
		"garbage key":  {caPEM, []byte("x"), []string{"localhost"}},
		"wrong key":    {caPEM, otherKey, []string{"localhost"}},
	}
	for name, c := range cases {
		if _, err := IssueServerCert(c.cert, c.key, c.hosts, time.Hour); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
