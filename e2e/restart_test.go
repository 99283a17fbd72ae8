package e2e

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRestartKeepsTheCatalogAndBootstrapsOnce stops a node and starts it
// again on the same data directory: the catalog, the admin token and the
// development CA survive, bootstrap does not run again, and clients work.
func TestRestartKeepsTheCatalogAndBootstrapsOnce(t *testing.T) {
	dir := t.TempDir()
	n := startServeIn(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "kept")
	n.mustFelix(ctx, "admin", "cache", "create", "kept-cache")
	token := n.adminToken()
	ca, err := os.ReadFile(n.dataFile("tls/ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("first node exited with %v", err)
	}

	m := startServeIn(t, dir)
	if got := m.adminToken(); got != token {
		t.Error("the admin token was minted again on restart")
	}
	if ca2, _ := os.ReadFile(m.dataFile("tls/ca.pem")); string(ca2) != string(ca) {
		t.Error("the development CA was replaced on restart")
	}
	if strings.Contains(m.stderr.String(), "bootstrapped the catalog") {
		t.Error("bootstrap ran again on restart")
	}
	out := m.mustFelix(ctx, "admin", "stream", "list")
	if !strings.Contains(out, "kept") {
		t.Fatalf("stream list after restart = %q, want the stream created before", out)
	}
	m.mustFelix(ctx, "cache", "put", "kept-cache", "k", "v")
	if got := strings.TrimSpace(m.mustFelix(ctx, "cache", "get", "kept-cache", "k")); got != "v" {
		t.Fatalf("cache get after restart = %q", got)
	}
}
