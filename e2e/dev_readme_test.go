// The README's "Three nodes" block subscribes to a six-shard stream
// through felix dev's client.json: the CLI's ClusterClient must take each
// shard's subscription to its owner (the SDK's owner routing, branch
// cl-sdk). Until then the block hangs at `felix sub`; the integrator
// removes the tag with cluster_routing_test.go's.
package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// threeNodesMarker introduces the README's "Three nodes" block.
const threeNodesMarker = "<!-- three nodes: e2e/dev_readme_test.go runs this block as written -->"

// TestReadmeThreeNodes pastes the README's "Three nodes" block, as
// written, into bash in a directory where `felix dev` runs, with ./felix
// the binary under test, and checks what its comments promise.
func TestReadmeThreeNodes(t *testing.T) {
	script := readmeBlock(t, threeNodesMarker)
	dir := t.TempDir()
	if err := os.Symlink(felixBin, filepath.Join(dir, "felix")); err != nil {
		t.Fatal(err)
	}
	d := startDevIn(t, dir, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	stdout, stderr, err := runScript(t, ctx, dir, script)
	if err != nil || strings.Contains(string(stderr), "error:") {
		t.Fatalf("the block failed (%v)\nscript:\n%s\nstdout:\n%s\nstderr:\n%s", err, script, stdout, stderr)
	}
	out := string(stdout)
	for _, want := range []string{"broker-1", "broker-2", "broker-3", "live"} {
		if !strings.Contains(out, want) {
			t.Errorf("brokers list lacks %q\n%s", want, out)
		}
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); lines[len(lines)-1] != "hello" {
		t.Errorf("the sub did not print hello last:\n%s", out)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel2()
	eventually(t, 30*time.Second, "the six shards over three brokers", func() bool {
		o := owners(d.placement(ctx2, "orders"))
		return o[""] == 0 && len(o) == 3
	})
}
