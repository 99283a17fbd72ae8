package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tourMarker introduces the README's tour block; the first ```sh block
// after it is the tour.
const tourMarker = "<!-- tour: e2e/tour_test.go runs this block as written -->"

// readmeBlock extracts the first ```sh block after marker in README.md
// exactly as written.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), marker)
	if !ok {
		t.Fatalf("README.md has no %q", marker)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatalf("README.md: no ```sh block after %q", marker)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("README.md: the block after %q does not end", marker)
	}
	return block
}

// runScript runs script with bash in dir, with env added to the test's
// environment, until it exits or ctx ends, and returns what it printed.
// The script's process group is killed at the end (and when ctx ends),
// so a background command that never exits cannot outlive the test.
func runScript(t *testing.T, ctx context.Context, dir, script string, env ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	outF, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer outF.Close()
	errF, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errF.Close()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	// Files, not pipes: Wait must not wait for a background job that
	// holds them open.
	cmd.Stdout, cmd.Stderr = outF, errF
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	runErr := cmd.Wait()
	stdout, _ = os.ReadFile(outF.Name())
	stderr, _ = os.ReadFile(errF.Name())
	return stdout, stderr, runErr
}

// TestReadmeTour pastes the README's tour, as written, into bash in a
// fresh directory where `felix serve` runs, with ./felix (and felix on
// PATH) the binary under test, and checks what it prints. The script's
// process group is killed at the end, so a background command that never
// exits cannot outlive the test.
func TestReadmeTour(t *testing.T) {
	script := readmeBlock(t, tourMarker)
	dir := t.TempDir()
	if err := os.Symlink(felixBin, filepath.Join(dir, "felix")); err != nil {
		t.Fatal(err)
	}
	startServeIn(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	stdout, stderr, runErr := runScript(t, ctx, dir, script, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	if runErr != nil || ctx.Err() != nil {
		t.Fatalf("the tour failed (%v, %v)\nscript:\n%s\nstdout:\n%s\nstderr:\n%s", runErr, ctx.Err(), script, stdout, stderr)
	}
	if strings.Contains(string(stderr), "error:") {
		t.Fatalf("the tour printed an error\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	// What the tour's comments promise, in order.
	want := []func(string) bool{
		equals("one"), equals("two"), equals("three"),
		equals("hello"),
		hasSuffix(" retained user-1 hello"), hasSuffix(" state-complete 1"), hasSuffix(" put user-2 hi"),
	}
	lines := strings.Split(string(stdout), "\n")
	next := 0
	for _, l := range lines {
		if next < len(want) && want[next](strings.TrimSpace(l)) {
			next++
		}
	}
	if next < len(want) {
		t.Fatalf("the tour's output lacks line %d of what its comments promise\nstdout:\n%s\nstderr:\n%s", next+1, stdout, stderr)
	}
}

func equals(s string) func(string) bool { return func(l string) bool { return l == s } }
func hasSuffix(s string) func(string) bool {
	return func(l string) bool { return strings.HasSuffix(l, s) }
}

// TestFlagsAfterPositionals checks that flags may follow positional
// arguments as well as precede them.
func TestFlagsAfterPositionals(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "--shards", "2", "orders")
	out := n.mustFelix(ctx, "admin", "stream", "get", "orders", "-o", "json")
	if !strings.Contains(out, `"shards": 2`) && !strings.Contains(out, `"shards":2`) {
		t.Fatalf("stream get -o json = %s, want shards 2", out)
	}
	wait := n.startFelix(ctx, "sub", "--count", "1", "orders")
	eventually(t, 10*time.Second, "the subscription to register", func() bool {
		return n.metric("felix_broker_subscriptions") >= 1
	})
	n.mustFelix(ctx, "pub", "orders", "x")
	if out, err := wait(); err != nil || strings.TrimSpace(out) != "x" {
		t.Fatalf("sub --count 1 orders: %q, %v", out, err)
	}
}
