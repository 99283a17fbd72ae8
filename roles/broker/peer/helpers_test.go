package peer

import (
	"bytes"
	"context"
	"crypto/x509"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/roles/broker/tlsconf"
)

// testCA is a development CA in a temporary directory.
type testCA struct {
	certPEM, keyPEM []byte
	pool            *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	certPath, keyPath, _, err := tlsconf.EnsureDevCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{pool: x509.NewCertPool()}
	ca.certPEM, _ = os.ReadFile(certPath)
	ca.keyPEM, _ = os.ReadFile(keyPath)
	if !ca.pool.AppendCertsFromPEM(ca.certPEM) {
		t.Fatal("CA does not parse")
	}
	return ca
}

// creds are node credentials for id, signed by ca and trusting ca.
func (ca *testCA) creds(t testing.TB, id string) tlsconf.NodeCredentials {
	t.Helper()
	c, err := tlsconf.IssueNodeCert(ca.certPEM, ca.keyPEM, id, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tlsconf.NodeCredentials{Cert: c, NodeID: id, CAs: ca.pool}
}

// logBuf collects log lines of one endpoint.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// mustContain fails unless the log holds every part on one line.
//
// It waits up to 5 s for the line: a goroutine may log just after the
// state the test saw (a link is adopted, then its acceptance logged).
func (b *logBuf) mustContain(t *testing.T, parts ...string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for _, line := range strings.Split(b.String(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line holds %q; log:\n%s", parts, b.String())
		}
	}
}

// node is one endpoint under test.
type node struct {
	*Endpoint
	log *logBuf
}

// startNode listens on a free loopback port; the endpoint is closed at
// cleanup.
func startNode(t testing.TB, id string, creds tlsconf.NodeCredentials, tweak func(*Config)) *node {
	t.Helper()
	lb := &logBuf{}
	cfg := Config{
		NodeID: id, StorageID: "storage-of-" + id, Creds: creds,
		Logger:       slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})),
		DialAttempts: 1, Transport: testTransport,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	e, err := Listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return &node{Endpoint: e, log: lb}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
