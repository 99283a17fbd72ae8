package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCatalogRebuiltAfterAMachineCrash: the catalog file is not fsynced
// per write. After kill -9 in the same boot it is kept as it is; when its
// marker says the machine went down with it open, it is discarded (here
// it is also garbage, as torn pages would be) and rebuilt from the Raft
// log, with every stream and the signing keys (so the old admin token
// still works).
func TestCatalogRebuiltAfterAMachineCrash(t *testing.T) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skip("no boot id on this system:", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n := startServeIn(t, dir)
	n.mustFelix(ctx, "admin", "stream", "create", "before-a")
	n.mustFelix(ctx, "admin", "stream", "create", "before-b")
	catalog := n.dataFile(filepath.Join("raft", "catalog.db"))
	marker := catalog + ".open"
	if got, err := os.ReadFile(marker); err != nil || string(got) != strings.TrimSpace(string(boot)) {
		t.Fatalf("marker while running = %q, %v; want this boot's id", got, err)
	}
	_ = n.stop(syscall.SIGKILL, 10*time.Second)

	// Killed in this boot: the file is trusted as it is.
	n = startServeIn(t, dir)
	if strings.Contains(n.stderr.String(), "discarding the catalog file") {
		t.Fatalf("discarded the catalog after a process kill:\n%s", n.stderr)
	}
	n.mustFelix(ctx, "admin", "stream", "create", "after-restart")
	_ = n.stop(syscall.SIGKILL, 10*time.Second)

	// The machine "went down": another boot's marker, and pages that did
	// not reach the disk.
	if err := os.WriteFile(marker, []byte("a-previous-boot"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(catalog, []byte(strings.Repeat("torn page ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	token := n.adminToken()
	n = startServeIn(t, dir)
	if !strings.Contains(n.stderr.String(), "discarding the catalog file") {
		t.Fatalf("no warning about the discarded catalog:\n%s", n.stderr)
	}
	if n.adminToken() != token {
		t.Fatal("the admin token changed")
	}
	out := n.mustFelix(ctx, "admin", "stream", "list")
	for _, s := range []string{"before-a", "before-b", "after-restart"} {
		if !strings.Contains(out, s) {
			t.Fatalf("stream %s missing after the rebuild: %q", s, out)
		}
	}
	if strings.Contains(n.stderr.String(), "bootstrapped the catalog") {
		t.Fatal("bootstrap ran again over the rebuilt catalog")
	}
	if err := n.stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("marker after a clean stop: %v", err)
	}
}
