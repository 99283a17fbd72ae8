package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

// writeCA creates a CA and a server certificate for 127.0.0.1 signed by it,
// and returns the paths of the CA, the certificate and the key.
func writeCA(t *testing.T, dir, name string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	write := func(file, typ string, der []byte) string {
		p := filepath.Join(dir, file)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write(name+"-ca.pem", "CERTIFICATE", caDER), write(name+".pem", "CERTIFICATE", leafDER), write(name+"-key.pem", "PRIVATE KEY", keyDER)
}

// TestOperatorCertificateIsServedAndVerified starts the broker with an
// operator certificate: a client trusting that CA connects, a client
// trusting another CA is refused, and no development CA is created.
func TestOperatorCertificateIsServedAndVerified(t *testing.T) {
	certDir := t.TempDir()
	caFile, certFile, keyFile := writeCA(t, certDir, "operator")
	otherCA, _, _ := writeCA(t, certDir, "other")
	n := startServe(t, "FELIX_TLS_CERT="+certFile, "FELIX_TLS_KEY="+keyFile)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := os.Stat(n.dataFile("tls/ca.pem")); err == nil {
		t.Error("a development CA was created although an operator certificate was given")
	}
	cfg := n.sdkConfig(n.adminToken())
	cfg.CAFile = caFile
	c, err := felix.Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("connect trusting the operator CA: %v", err)
	}
	c.Close()
	cfg.CAFile = otherCA
	if c, err := felix.Connect(ctx, cfg); err == nil {
		// A lazy client must fail on its first request instead.
		err = c.CachePut(ctx, "default", "x", "k", []byte("v"), 0)
		c.Close()
		if err == nil {
			t.Fatal("a client trusting another CA talked to the broker")
		}
	}
	cfg.CAFile = ""
	if _, err := felix.Connect(ctx, cfg); err == nil {
		t.Fatal("a client with no CA at all connected; verification cannot be skipped")
	}
}

// TestRequireCertRefusesToStartWithoutOne checks FELIX_TLS_REQUIRE_CERT.
func TestRequireCertRefusesToStartWithoutOne(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, felixBin, "serve", "--broker-addr", "127.0.0.1:0",
		"--controlplane-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "FELIX_TLS_REQUIRE_CERT=true")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("felix serve started without a certificate under FELIX_TLS_REQUIRE_CERT=true:\n%s", out)
	}
	if !strings.Contains(string(out), "FELIX_TLS_REQUIRE_CERT") {
		t.Fatalf("the refusal does not name the setting:\n%s", out)
	}
}
