package tlsconf

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// testCA returns a fresh development CA in a temporary directory, as PEM.
func testCA(t *testing.T) (certPEM, keyPEM []byte, pool *x509.CertPool) {
	t.Helper()
	certPath, keyPath, _, err := EnsureDevCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _ = os.ReadFile(certPath)
	keyPEM, _ = os.ReadFile(keyPath)
	pool = x509.NewCertPool()
	if !pool.AppendCertsFromPEM(certPEM) {
		t.Fatal("CA does not parse")
	}
	return certPEM, keyPEM, pool
}

func issueChain(t *testing.T, caPEM, caKeyPEM []byte, id string) []*x509.Certificate {
	t.Helper()
	c, err := IssueNodeCert(caPEM, caKeyPEM, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var chain []*x509.Certificate
	for _, der := range c.Certificate {
		x, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, x)
	}
	return chain
}

func TestNodeCertNamesItsNode(t *testing.T) {
	caPEM, caKeyPEM, _ := testCA(t)
	c, err := IssueNodeCert(caPEM, caKeyPEM, "broker-2", 0)
	if err != nil {
		t.Fatal(err)
	}
	id, err := NodeIDOf(c.Leaf)
	if err != nil || id != "broker-2" {
		t.Fatalf("NodeIDOf = %q, %v; want broker-2", id, err)
	}
	if got := c.Leaf.URIs[0].String(); got != "felix-node://broker-2" {
		t.Errorf("URI SAN = %q", got)
	}
	if len(c.Leaf.DNSNames) != 1 || c.Leaf.DNSNames[0] != "broker-2.node.felix" {
		t.Errorf("DNS SANs = %v", c.Leaf.DNSNames)
	}
	usages := map[x509.ExtKeyUsage]bool{}
	for _, u := range c.Leaf.ExtKeyUsage {
		usages[u] = true
	}
	if !usages[x509.ExtKeyUsageServerAuth] || !usages[x509.ExtKeyUsageClientAuth] {
		t.Errorf("usages = %v, want server and client", c.Leaf.ExtKeyUsage)
	}
}

func TestNodeIDWithCapitalsHasNoDNSName(t *testing.T) {
	caPEM, caKeyPEM, _ := testCA(t)
	c, err := IssueNodeCert(caPEM, caKeyPEM, "Node_A", 0)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := NodeIDOf(c.Leaf); err != nil || id != "Node_A" {
		t.Fatalf("NodeIDOf = %q, %v", id, err)
	}
	if len(c.Leaf.DNSNames) != 0 {
		t.Errorf("DNS SANs = %v, want none", c.Leaf.DNSNames)
	}
}

func TestBadNodeIDsAreRefused(t *testing.T) {
	caPEM, caKeyPEM, _ := testCA(t)
	for _, id := range []string{"", "a b", "a/b", "ä", string(make([]byte, 129))} {
		if _, err := IssueNodeCert(caPEM, caKeyPEM, id, 0); !errors.Is(err, ErrBadNodeID) {
			t.Errorf("IssueNodeCert(%q) = %v, want ErrBadNodeID", id, err)
		}
	}
}

func TestVerifyNode(t *testing.T) {
	caPEM, caKeyPEM, pool := testCA(t)
	otherPEM, otherKeyPEM, _ := testCA(t)
	right := issueChain(t, caPEM, caKeyPEM, "broker-1")
	server, err := IssueServerCert(caPEM, caKeyPEM, []string{"localhost"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		chain []*x509.Certificate
		usage x509.ExtKeyUsage
		want  string
		err   error
	}{
		{"right node as client", right, x509.ExtKeyUsageClientAuth, "broker-1", nil},
		{"right node as server", right, x509.ExtKeyUsageServerAuth, "broker-1", nil},
		{"any node", right, x509.ExtKeyUsageClientAuth, "", nil},
		{"wrong node id", right, x509.ExtKeyUsageServerAuth, "broker-9", ErrWrongNode},
		{"unknown CA", issueChain(t, otherPEM, otherKeyPEM, "broker-1"), x509.ExtKeyUsageClientAuth, "broker-1", ErrUntrustedPeer},
		{"no certificate", nil, x509.ExtKeyUsageClientAuth, "broker-1", ErrNoPeerCert},
		{"no node name", []*x509.Certificate{server.Leaf}, x509.ExtKeyUsageServerAuth, "broker-1", ErrNoNodeID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := VerifyNode(tc.chain, pool, tc.usage, tc.want)
			if !errors.Is(err, tc.err) {
				t.Fatalf("VerifyNode = %q, %v; want %v", id, err, tc.err)
			}
			if tc.err == nil && id != "broker-1" {
				t.Fatalf("node id = %q", id)
			}
		})
	}
}

func TestWriteNodeCertLoadsBack(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath, caPath, err := WriteNodeCert(dir, "broker-3")
	if err != nil {
		t.Fatal(err)
	}
	if certPath != filepath.Join(dir, NodeCertFile) || keyPath != filepath.Join(dir, NodeKeyFile) || caPath != filepath.Join(dir, CACertFile) {
		t.Fatalf("paths %s %s %s", certPath, keyPath, caPath)
	}
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	cr, err := LoadNodeCredentials(certPath, keyPath, caPath)
	if err != nil {
		t.Fatal(err)
	}
	if cr.NodeID != "broker-3" {
		t.Fatalf("node id %q", cr.NodeID)
	}
	if _, err := VerifyNode([]*x509.Certificate{cr.Cert.Leaf}, cr.CAs, x509.ExtKeyUsageClientAuth, "broker-3"); err != nil {
		t.Fatal(err)
	}
	// A second start reuses the CA and issues again.
	_, _, _, err = WriteNodeCert(dir, "broker-3")
	if err != nil {
		t.Fatal(err)
	}
	cr2, err := LoadNodeCredentials(certPath, keyPath, caPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyNode([]*x509.Certificate{cr2.Cert.Leaf}, cr.CAs, x509.ExtKeyUsageServerAuth, "broker-3"); err != nil {
		t.Fatalf("the CA changed between starts: %v", err)
	}
}

func TestLoadNodeCredentialsRefusesACertWithoutNode(t *testing.T) {
	dir := t.TempDir()
	caPEM, caKeyPEM, _ := testCA(t)
	c, err := IssueServerCert(caPEM, caKeyPEM, []string{"localhost"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := marshalKeyPEM(c.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certPath := write("server.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}))
	keyPath := write("server-key.pem", keyPEM)
	caPath := write("ca.pem", caPEM)
	if _, err := LoadNodeCredentials(certPath, keyPath, caPath); !errors.Is(err, ErrNoNodeID) {
		t.Fatalf("LoadNodeCredentials = %v, want ErrNoNodeID", err)
	}
}
