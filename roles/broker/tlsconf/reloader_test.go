package tlsconf

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// writePair issues a certificate for hosts and writes it (chain PEM) and
// its key to certFile and keyFile, stamping both with mtime.
func writePair(t *testing.T, caPEM, caKeyPEM []byte, certFile, keyFile string, mtime time.Time, hosts ...string) *x509.Certificate {
	t.Helper()
	cert, err := IssueServerCert(caPEM, caKeyPEM, hosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var chain bytes.Buffer
	for _, der := range cert.Certificate {
		pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	keyPEM, err := marshalKeyPEM(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	writeStamped(t, certFile, chain.Bytes(), mtime)
	writeStamped(t, keyFile, keyPEM, mtime)
	return cert.Leaf
}

func writeStamped(t *testing.T, path string, b []byte, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// fakeClock is a settable clock for the reloader's check interval.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type reloaderFixture struct {
	caPEM, caKeyPEM   []byte
	certFile, keyFile string
	clock             *fakeClock
	r                 *Reloader
	first             *x509.Certificate
}

func newReloaderFixture(t *testing.T) *reloaderFixture {
	t.Helper()
	dir, caPEM, caKeyPEM := devCA(t)
	f := &reloaderFixture{caPEM: caPEM, caKeyPEM: caKeyPEM,
		certFile: filepath.Join(dir, "server.pem"), keyFile: filepath.Join(dir, "server-key.pem"),
		clock: &fakeClock{t: time.Unix(1_000_000, 0)}}
	f.first = writePair(t, caPEM, caKeyPEM, f.certFile, f.keyFile, time.Unix(100, 0), "first.test")
	r, err := NewReloader(f.certFile, f.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	r.now = f.clock.now
	r.lastCheck = f.clock.now()
	f.r = r
	return f
}

func serving(t *testing.T, r *Reloader) *x509.Certificate {
	t.Helper()
	c, err := r.GetCertificate(nil)
	if err != nil || c == nil || c.Leaf == nil {
		t.Fatalf("GetCertificate = %v, %v", c, err)
	}
	return c.Leaf
}

func TestReloaderPicksUpRewrittenFiles(t *testing.T) {
	f := newReloaderFixture(t)
	if got := serving(t, f.r); !got.Equal(f.first) {
		t.Fatal("not serving the initial certificate")
	}
	second := writePair(t, f.caPEM, f.caKeyPEM, f.certFile, f.keyFile, time.Unix(200, 0), "second.test")

	// Within the check interval the files are not looked at.
	f.clock.advance(500 * time.Millisecond)
	if got := serving(t, f.r); !got.Equal(f.first) {
		t.Fatal("reloaded before the check interval passed")
	}
	f.clock.advance(600 * time.Millisecond)
	if got := serving(t, f.r); !got.Equal(second) {
		t.Fatalf("serving %v after rotation, want second.test", got.DNSNames)
	}
	if err := f.r.LastError(); err != nil {
		t.Fatalf("LastError = %v", err)
	}
}

func TestReloaderKeepsOldCertOnBadRewrite(t *testing.T) {
	f := newReloaderFixture(t)
	f.r.interval = 0
	writeStamped(t, f.certFile, []byte("not a certificate"), time.Unix(300, 0))
	if got := serving(t, f.r); !got.Equal(f.first) {
		t.Fatal("stopped serving the old certificate after a bad rewrite")
	}
	if f.r.LastError() == nil {
		t.Fatal("LastError = nil after a bad rewrite")
	}
	// Fixing the files clears the error and serves the new pair.
	third := writePair(t, f.caPEM, f.caKeyPEM, f.certFile, f.keyFile, time.Unix(400, 0), "third.test")
	if got := serving(t, f.r); !got.Equal(third) {
		t.Fatal("fixed pair not picked up")
	}
	if err := f.r.LastError(); err != nil {
		t.Fatalf("LastError after fix = %v", err)
	}
	// A removed file also keeps the old certificate.
	if err := os.Remove(f.keyFile); err != nil {
		t.Fatal(err)
	}
	if got := serving(t, f.r); !got.Equal(third) || f.r.LastError() == nil {
		t.Fatal("removed key file: want old certificate and an error")
	}
}

func TestNewReloaderRejectsBadFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewReloader(filepath.Join(dir, "missing.pem"), filepath.Join(dir, "missing-key.pem")); err == nil {
		t.Error("missing files accepted")
	}
	bad := filepath.Join(dir, "bad.pem")
	writeStamped(t, bad, []byte("junk"), time.Unix(1, 0))
	if _, err := NewReloader(bad, bad); err == nil {
		t.Error("junk files accepted")
	}
}

func TestReloaderConcurrentHandshakeLookups(t *testing.T) {
	f := newReloaderFixture(t)
	f.r.interval = 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if c, err := f.r.GetCertificate(&tls.ClientHelloInfo{}); err != nil || c == nil {
					t.Error("GetCertificate failed")
					return
				}
			}
		})
	}
	writePair(t, f.caPEM, f.caKeyPEM, f.certFile, f.keyFile, time.Unix(500, 0), "fourth.test")
	wg.Wait()
}
