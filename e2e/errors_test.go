package e2e

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPubWithNoBrokerSaysNothingAnswered runs felix pub against a port
// nobody listens on: QUIC gets no "connection refused", so the error must
// say that nothing answered; TCP is refused at once and says so. Both
// point at felix serve and the address, and exit non-zero.
func TestPubWithNoBrokerSaysNothingAnswered(t *testing.T) {
	n := startServe(t) // for a CA file and a token the client accepts
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	pc.Close() // nothing listens there now

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct{ transport, says string }{
		{"quic", "error: felix: nothing answered at " + dead + " over QUIC (UDP)"},
		// TCP hears the refusal at once.
		{"tcp", "error: felix: nothing listens at " + dead + " over TLS over TCP (connection refused)"},
	} {
		out, errOut, code := n.felix(ctx, "pub", "--broker", dead, "--transport", tc.transport, "events", "hello")
		if code == 0 {
			t.Fatalf("felix pub over %s exited 0 with nothing at %s; stdout %q", tc.transport, dead, out)
		}
		for _, want := range []string{tc.says, "\nhint: is felix serve (or felix broker) running, and is the address right?"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("over %s, stderr lacks %q:\n%s", tc.transport, want, errOut)
			}
		}
		if strings.Contains(errOut, "deadline exceeded") || strings.Contains(errOut, "no recent network activity") {
			t.Errorf("stderr still speaks quic-go's words:\n%s", errOut)
		}
	}
}

// TestSecondServeOnHeldDirFailsFast starts felix serve on a directory a
// running felix serve holds: it must exit non-zero on its own, saying
// which process holds the directory, while the first keeps running.
func TestSecondServeOnHeldDirFailsFast(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, felixBin, "serve",
		"--broker-addr", "127.0.0.1:0", "--controlplane-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	cmd.Dir = n.dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() == 0 {
		t.Fatalf("second felix serve: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errb)
	}
	want := "is in use by another felix process (PID " + strconv.Itoa(n.cmd.Process.Pid) + ") running a control plane"
	if !strings.Contains(errb.String(), want) {
		t.Fatalf("stderr lacks %q:\n%s", want, &errb)
	}
	if strings.Contains(errb.String(), "timeout") {
		t.Fatalf("stderr still speaks of bbolt's timeout:\n%s", &errb)
	}
	select {
	case <-n.exited:
		t.Fatalf("the first felix serve exited: %v", n.exitErr)
	default:
	}
	n.mustFelix(ctx, "admin", "stream", "list")
}

// TestRestartRightAfterStop stops felix serve and starts it again on the
// same directory at once: the lock and bbolt's files are free as soon as
// the first process has exited.
func TestRestartRightAfterStop(t *testing.T) {
	dir := t.TempDir()
	first := startServeIn(t, dir)
	if err := first.stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("first felix serve: %v\nstderr:\n%s", err, first.stderr)
	}
	for _, f := range []string{"controlplane.lock", "broker.lock"} {
		if b, err := os.ReadFile(filepath.Join(dir, "felix-data", f)); err != nil || len(b) != 0 {
			t.Fatalf("%s after a clean stop: %q, %v", f, b, err)
		}
	}
	second := startServeIn(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	second.mustFelix(ctx, "admin", "stream", "list")
}

// TestIgnoredSettingsAreRefused: settings the cluster cannot honour (out of
// range, unknown) are refused by the control plane with a message naming
// the setting, and the CLI shows it with a non-zero exit, instead of
// storing and ignoring them. A replication factor of 2 to 7 and quorum
// consistency are accepted since durable streams get followers.
func TestIgnoredSettingsAreRefused(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"admin", "stream", "create", "a", "--replication-factor", "8"},
			[]string{"replication_factor: 8 is out of range 1..7"}},
		{[]string{"admin", "stream", "create", "b", "--shards", "0"}, []string{"shards: 0 is out of range 1..1024"}},
		{[]string{"admin", "token", "create", "--sub", "x", "--perms", "stream.pub:stream:default/*"}, []string{`unknown action "stream.pub"`}},
	}
	for _, tc := range cases {
		out, errOut, code := n.felix(ctx, tc.args...)
		if code == 0 {
			t.Errorf("felix %s: exit 0, stdout %q", strings.Join(tc.args, " "), out)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("felix %s: stderr lacks %q:\n%s", strings.Join(tc.args, " "), w, errOut)
			}
		}
	}
	// Leaving a setting out still takes its default.
	n.mustFelix(ctx, "admin", "stream", "create", "c")
	if out := n.mustFelix(ctx, "admin", "stream", "get", "c", "-o", "json"); !strings.Contains(out, `"shards":1`) {
		t.Fatalf("stream c: %s", out)
	}
}
