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

// TestFreshControlPlaneNeverDeletesDurableData: a node whose control
// plane comes back empty (its raft directory lost) keeps every durable
// record of the streams it had, serves none of them and says so in its
// log and a metric; a stream created under the same name in the new
// catalog starts empty and the old files are set aside; when the old
// control plane's state returns, the stream is served again with every
// record.
func TestFreshControlPlaneNeverDeletesDurableData(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n := startServeIn(t, dir)
	createDurable(ctx, t, n, "orders", "one", "two", "three")
	if err := n.stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}

	// The control plane loses its state: the raft directory, and with it
	// the signing key, so the admin token goes too.
	data := filepath.Join(dir, "felix-data")
	saved := t.TempDir()
	for _, name := range []string{"raft", "admin.token"} {
		if err := os.Rename(filepath.Join(data, name), filepath.Join(saved, name)); err != nil {
			t.Fatal(err)
		}
	}
	m := startServeIn(t, dir)
	eventually(t, 15*time.Second, "the kept stream to be reported", func() bool {
		return m.metric("felix_durable_streams_held") == 1
	})
	if !strings.Contains(m.stderr.String(), "catalog does not hold; keeping them") {
		t.Fatalf("no log line about the kept stream:\n%s", m.stderr)
	}
	if _, _, code := m.felix(ctx, "read", "orders"); code == 0 {
		t.Fatal("a stream the catalog does not hold was served")
	}
	// The same name in the new catalog is another stream: it starts empty.
	createDurable(ctx, t, m, "orders", "new")
	if out := strings.Fields(m.mustFelix(ctx, "read", "orders")); strings.Join(out, " ") != "new" {
		t.Fatalf("the new stream holds %q", out)
	}
	if got := m.metric("felix_durable_streams_held"); got != 1 {
		t.Fatalf("felix_durable_streams_held = %v with the old files set aside", got)
	}
	if err := m.stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}

	// The old control plane's state comes back.
	for _, name := range []string{"raft", "admin.token"} {
		if err := os.RemoveAll(filepath.Join(data, name)); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(saved, name), filepath.Join(data, name)); err != nil {
			t.Fatal(err)
		}
	}
	r := startServeIn(t, dir)
	var out []string
	eventually(t, 15*time.Second, "the first stream to be served again", func() bool {
		stdout, _, code := r.felix(ctx, "read", "orders")
		out = strings.Fields(stdout)
		return code == 0 && len(out) == 3
	})
	if strings.Join(out, " ") != "one two three" {
		t.Fatalf("the stream came back with %q", out)
	}
	// Deleting it now deletes its files; the other cluster's stay.
	r.mustFelix(ctx, "admin", "stream", "delete", "orders", "--yes")
	eventually(t, 15*time.Second, "the deleted stream's files to go", func() bool {
		_, err := os.Stat(filepath.Join(data, "log", "streams", "default", "default", "orders"))
		return os.IsNotExist(err)
	})
	eventually(t, 15*time.Second, "the other cluster's stream to be counted", func() bool {
		return r.metric("felix_durable_streams_held") == 1
	})
}
