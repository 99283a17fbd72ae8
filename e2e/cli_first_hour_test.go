package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// felixIn runs the binary in dir with extra environment variables and
// returns its stdout, stderr and exit code.
func felixIn(t *testing.T, ctx context.Context, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, felixBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("felix %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// TestCLIConventions checks, against the real binary and without a server,
// that usage errors look and exit the same everywhere, that --version and
// version say what the binary was built from, that each role lists only its
// flags, and that completion scripts come out.
func TestCLIConventions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	// No client.json anywhere: XDG_CONFIG_HOME is empty too.
	env := []string{"XDG_CONFIG_HOME=" + t.TempDir()}
	felix := func(args ...string) (string, string, int) { return felixIn(t, ctx, dir, env, args...) }

	for _, args := range [][]string{
		{"bogus"}, {"--bogus"}, {"serve", "--bogus"}, {"controlplane", "--broker-addr", "x"},
		{"sub", "events", "--count", "x"}, {"pub", "--bogus", "s", "m"}, {"cache", "nope"},
		{"bench", "nope"}, {"admin", "stream", "nope"}, {"completion", "tcsh"},
		{"help", "nope"}, {"admin", "help", "nope"},
	} {
		out, errOut, code := felix(args...)
		lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
		if code != 2 || out != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], "error: ") ||
			!regexp.MustCompile(`^run 'felix( [a-z-]+)* --help' for usage$`).MatchString(lines[1]) {
			t.Errorf("felix %v: exit %d, stdout %q, stderr %q; want exit 2 and two lines on stderr", args, code, out, errOut)
		}
		if regexp.MustCompile(`(^|\s)-[a-z][a-z-]+`).MatchString(lines[0]) {
			t.Errorf("felix %v names a flag with one dash: %q", args, lines[0])
		}
	}

	out, errOut, code := felix("--version")
	if code != 0 || !regexp.MustCompile(`^felix version \S+ \(commit \S+, \S+\)\n$`).MatchString(out) {
		t.Errorf("--version: exit %d, %q %q", code, out, errOut)
	}
	out, _, code = felix("version", "-o", "json")
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 || v["version"] == "" || v["commit"] == "" || v["date"] == "" {
		t.Errorf("version -o json: exit %d, %q (%v)", code, out, err)
	}

	help, _, _ := felix("controlplane", "--help")
	for _, flag := range []string{"--broker-addr", "--metrics-addr", "--host "} {
		if strings.Contains(help, flag) {
			t.Errorf("felix controlplane --help lists %s", flag)
		}
	}
	if help, _, _ = felix("broker", "--help"); strings.Contains(help, "--controlplane-addr") || !strings.Contains(help, "--broker-addr HOST:PORT") {
		t.Errorf("felix broker --help:\n%s", help)
	}

	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out, errOut, code := felix("completion", shell); code != 0 || !strings.Contains(out, "felix") {
			t.Errorf("completion %s: exit %d %s", shell, code, errOut)
		}
	}
	// bash and zsh ask the binary; it must offer the commands.
	words, _, _ := felix("--generate-bash-completion")
	for _, cmd := range []string{"serve", "pub", "sub", "cache", "admin", "bench", "completion", "version"} {
		if !strings.Contains("\n"+words, "\n"+cmd+"\n") {
			t.Errorf("the completion hook does not offer %s:\n%s", cmd, words)
		}
	}
}

// TestCLIOutputs checks what pub and cache print, and their exit codes,
// against a real server.
func TestCLIOutputs(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "audit", "--durable")
	n.mustFelix(ctx, "admin", "cache", "create", "sessions")

	if out := n.mustFelix(ctx, "pub", "audit", "a", "b", "--ack"); out != "offset 0\noffset 1\n" {
		t.Errorf("pub --ack: %q", out)
	}
	var pub struct {
		Stream    string   `json:"stream"`
		Published int      `json:"published"`
		Acked     bool     `json:"acked"`
		Offsets   []uint64 `json:"offsets"`
	}
	out := n.mustFelix(ctx, "pub", "audit", "c", "--ack", "-o", "json")
	if err := json.Unmarshal([]byte(out), &pub); err != nil || pub.Stream != "audit" || pub.Published != 1 || !pub.Acked ||
		len(pub.Offsets) != 1 || pub.Offsets[0] != 2 {
		t.Errorf("pub --ack -o json: %q (%v)", out, err)
	}
	out = n.mustFelix(ctx, "pub", "audit", "d", "-o", "json")
	if err := json.Unmarshal([]byte(out), &pub); err != nil || pub.Published != 1 || pub.Acked {
		t.Errorf("pub -o json: %q (%v)", out, err)
	}

	out = n.mustFelix(ctx, "cache", "put", "sessions", "k", "v", "-o", "json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc["stored"] != true || doc["key"] != "k" {
		t.Errorf("cache put -o json: %q (%v)", out, err)
	}
	for _, verb := range []string{"get", "delete"} {
		out, errOut, code := n.felix(ctx, "cache", verb, "sessions", "absent")
		if code != 1 || out != "" || !strings.Contains(errOut, "not found") {
			t.Errorf("cache %s of a missing key: exit %d, stdout %q, stderr %q", verb, code, out, errOut)
		}
		out, _, code = n.felix(ctx, "cache", verb, "sessions", "absent", "-o", "json")
		if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 1 || doc["found"] != false {
			t.Errorf("cache %s -o json of a missing key: exit %d, %q (%v)", verb, code, out, err)
		}
	}
}

// TestClientSettingsFromTheUserConfig runs client commands from a
// directory without ./felix-data: the user's $XDG_CONFIG_HOME/felix/
// client.json supplies the settings, and --data-dir still wins.
func TestClientSettingsFromTheUserConfig(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "events")

	xdg := t.TempDir()
	cfg, _ := json.Marshal(clientJSON{
		BrokerAddr: n.client.BrokerAddr, ControlPlaneURL: n.client.ControlPlaneURL,
		CAFile: n.dataFile(n.client.CAFile), TokenFile: n.dataFile(n.client.TokenFile),
		Tenant: n.client.Tenant, Namespace: n.client.Namespace,
	})
	if err := os.MkdirAll(filepath.Join(xdg, "felix"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(xdg, "felix", "client.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	env := []string{"XDG_CONFIG_HOME=" + xdg}
	if out, errOut, code := felixIn(t, ctx, elsewhere, env, "admin", "stream", "list"); code != 0 || !strings.Contains(out, "events") {
		t.Fatalf("admin stream list from elsewhere: exit %d %q %q", code, out, errOut)
	}
	if out, errOut, code := felixIn(t, ctx, elsewhere, env, "pub", "events", "x", "--ack"); code != 0 {
		t.Fatalf("pub from elsewhere: exit %d %q %q", code, out, errOut)
	}
	// --data-dir takes precedence: an empty one has no broker to offer.
	_, errOut, code := felixIn(t, ctx, elsewhere, env, "pub", "events", "x", "--data-dir", t.TempDir())
	if code != 2 || !strings.Contains(errOut, "no broker address") {
		t.Fatalf("--data-dir over the user config: exit %d %q", code, errOut)
	}
}

// TestConnectTimeoutApplies points pub at a UDP socket that never answers:
// with --connect-timeout 300ms the command gives up and exits 1 well before
// the 5 s default would have let it.
func TestConnectTimeoutApplies(t *testing.T) {
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	env := []string{"XDG_CONFIG_HOME=" + t.TempDir(), "FELIX_TOKEN=t"}
	_, errOut, code := felixIn(t, ctx, t.TempDir(), env, "pub", "events", "x", "--ack",
		"--broker", silent.LocalAddr().String(), "--connect-timeout", "300ms")
	if ctx.Err() != nil {
		t.Fatalf("pub outlived its --connect-timeout (killed at the test's deadline); stderr %q", errOut)
	}
	if code != 1 || !strings.Contains(errOut, "error:") {
		t.Fatalf("exit %d, stderr %q; want exit 1 with an error", code, errOut)
	}
}

// TestReleaseBuildStampsVersion builds felix the way a release does, with
// -ldflags -X on internal/buildinfo, and checks both version commands
// report the stamps.
func TestReleaseBuildStampsVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary again")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "felix")
	const pkg = "github.com/felixmq/felix/internal/buildinfo"
	ldflags := "-X " + pkg + ".Version=v9.8.7 -X " + pkg + ".Commit=0123456789abcdef0123456789abcdef01234567 -X " + pkg + ".Date=2026-12-01T12:00:00Z"
	build := exec.CommandContext(ctx, "go", "build", "-ldflags", ldflags, "-o", bin, "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if want := "felix version v9.8.7 (commit 0123456789ab, 2026-12-01T12:00:00Z)\n"; err != nil || string(out) != want {
		t.Fatalf("--version: %q (%v), want %q", out, err, want)
	}
	out, err = exec.CommandContext(ctx, bin, "version", "-o", "json").Output()
	var v map[string]any
	if err != nil || json.Unmarshal(out, &v) != nil || v["version"] != "v9.8.7" ||
		v["commit"] != "0123456789abcdef0123456789abcdef01234567" || v["date"] != "2026-12-01T12:00:00Z" || v["modified"] != false {
		t.Fatalf("version -o json: %q (%v)", out, err)
	}
}
