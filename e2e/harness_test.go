package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
)

var felixBin string

// e2eTransport is the transport the tests' clients use (SDK and CLI):
// FELIX_E2E_TRANSPORT, "quic" by default. scripts/test runs the suite
// over QUIC and again, in part, over TLS on TCP; the brokers always
// listen on both.
var e2eTransport = felix.TransportQUIC

func TestMain(m *testing.M) {
	if v := os.Getenv("FELIX_E2E_TRANSPORT"); v != "" {
		if v != felix.TransportQUIC && v != felix.TransportTCP && v != felix.TransportAuto {
			fmt.Fprintf(os.Stderr, "FELIX_E2E_TRANSPORT=%q: want quic, tcp or auto\n", v)
			os.Exit(2)
		}
		e2eTransport = v
		// Every felix client command the tests run inherits it.
		os.Setenv("FELIX_TRANSPORT", v)
	}
	code := func() int {
		if bin := os.Getenv("FELIX_BIN"); bin != "" {
			felixBin = bin
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "felix-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		felixBin = filepath.Join(dir, "felix")
		cmd := exec.Command("go", "build", "-o", felixBin, "..")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building felix:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// node is one `felix serve` process in its own temporary directory.
type node struct {
	*proc
	t        *testing.T
	dir      string // working directory; state is in dir/felix-data
	metrics  string // http://host:port
	client   clientJSON
	stopOnce sync.Once
}

// proc is a felix process a test started: its output and its exit.
type proc struct {
	cmd     *exec.Cmd
	stdout  *syncBuffer
	stderr  *syncBuffer
	exited  chan struct{} // closed once it has exited, with exitErr set
	exitErr error
}

// startProc starts cmd (what names it in failures) with its output
// captured, and watches for its exit.
func startProc(t testing.TB, what string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	return p
}

// waitOutput waits up to within until found accepts what the process
// (what names it) has printed on stdout. It fails the test, showing the
// output, if the process exits first or the time runs out (awaited says
// what it did not report).
func (p *proc) waitOutput(t testing.TB, what, awaited string, within time.Duration, found func(stdout string) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !found(p.stdout.String()) {
		select {
		case <-p.exited:
			t.Fatalf("%s exited early (%v)\nstdout:\n%s\nstderr:\n%s", what, p.exitErr, p.stdout, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not report %s\nstdout:\n%s\nstderr:\n%s", what, awaited, p.stdout, p.stderr)
		}
	}
}

type clientJSON struct {
	BrokerAddr      string `json:"broker_addr"`
	BrokerTCPAddr   string `json:"broker_tcp_addr"`
	ControlPlaneURL string `json:"controlplane_url"`
	CAFile          string `json:"ca_file"`
	TokenFile       string `json:"token_file"`
	Tenant          string `json:"tenant"`
	Namespace       string `json:"namespace"`
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var metricsLine = regexp.MustCompile(`metrics\s+(http://\S+)/metrics`)

// startServe runs `felix serve` on loopback with every port chosen by the
// kernel, and waits until it is ready.
func startServe(t *testing.T, env ...string) *node {
	t.Helper()
	dir := t.TempDir()
	return startServeIn(t, dir, env...)
}

func startServeIn(t *testing.T, dir string, env ...string) *node {
	t.Helper()
	return startServeOn(t, dir, "127.0.0.1:0", env...)
}

// startServeOn is startServeIn with the broker on brokerAddr, so that a
// restarted node can come back where its clients expect it.
func startServeOn(t *testing.T, dir, brokerAddr string, env ...string) *node {
	t.Helper()
	cmd := exec.Command(felixBin, "serve",
		"--broker-addr", brokerAddr, "--controlplane-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	n := &node{t: t, dir: dir, proc: startProc(t, "felix serve", cmd)}
	t.Cleanup(func() {
		n.stop(syscall.SIGTERM, 20*time.Second)
		if t.Failed() {
			t.Logf("felix serve stdout:\n%s\nstderr:\n%s", n.stdout, n.stderr)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	n.waitOutput(t, "felix serve", "its addresses", 30*time.Second, func(stdout string) bool {
		m := metricsLine.FindStringSubmatch(stdout)
		if m != nil {
			n.metrics = m[1]
		}
		return m != nil
	})
	b, err := os.ReadFile(filepath.Join(dir, "felix-data", "client.json"))
	if err != nil {
		t.Fatalf("client.json: %v", err)
	}
	if err := json.Unmarshal(b, &n.client); err != nil {
		t.Fatalf("client.json: %v", err)
	}
	n.waitReady(deadline)
	return n
}

func (n *node) waitReady(deadline time.Time) {
	n.t.Helper()
	for {
		resp, err := http.Get(n.metrics + "/ready")
		if err == nil {
			var h struct{ Status, Reason string }
			derr := json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && derr == nil && h.Status == "ready" {
				return
			}
			if derr != nil {
				err = fmt.Errorf("/ready %d: not a JSON health body: %w", resp.StatusCode, derr)
			} else {
				err = fmt.Errorf("/ready %d: %s %s", resp.StatusCode, h.Status, h.Reason)
			}
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("felix serve never became ready (last: %v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop signals the process and waits up to grace for it to exit, then
// kills it. It returns the exit error.
func (n *node) stop(sig syscall.Signal, grace time.Duration) error {
	n.stopOnce.Do(func() {
		select {
		case <-n.exited:
			return
		default:
		}
		stopProcess(n.t, "felix serve", n.cmd.Process, n.exited, sig, grace)
	})
	<-n.exited
	return n.exitErr
}

// stopProcess sends sig to p, which closes exited when it has exited, and
// waits up to grace for it; then it kills p, calling that a test error
// about what, and waits for it to exit.
func stopProcess(t testing.TB, what string, p *os.Process, exited <-chan struct{}, sig os.Signal, grace time.Duration) {
	t.Helper()
	p.Signal(sig)
	select {
	case <-exited:
	case <-time.After(grace):
		t.Errorf("%s did not exit within %v of %v; killing it", what, grace, sig)
		p.Kill()
		<-exited
	}
}

// felix runs a client command in the node's directory and returns its
// stdout, stderr and exit code.
func (n *node) felix(ctx context.Context, args ...string) (string, string, int) {
	n.t.Helper()
	return runFelix(n.t, ctx, n.dir, args...)
}

// mustFelix is felix that fails the test on a non-zero exit.
func (n *node) mustFelix(ctx context.Context, args ...string) string {
	n.t.Helper()
	return mustRunFelix(n.t, ctx, n.dir, args...)
}

// runFelix runs the felix binary under test with args in dir (empty:
// the test's directory) and returns its stdout, stderr and exit code. A
// failure to run it fails the test.
func runFelix(t testing.TB, ctx context.Context, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, felixBin, args...)
	cmd.Dir = dir
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

// mustRunFelix is runFelix that fails the test on a non-zero exit.
func mustRunFelix(t testing.TB, ctx context.Context, dir string, args ...string) string {
	t.Helper()
	out, errOut, code := runFelix(t, ctx, dir, args...)
	if code != 0 {
		t.Fatalf("felix %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// startFelix starts a client command in the background and returns a
// function that waits for it and returns its stdout.
func (n *node) startFelix(ctx context.Context, args ...string) (wait func() (string, error)) {
	n.t.Helper()
	cmd := exec.CommandContext(ctx, felixBin, args...)
	cmd.Dir = n.dir
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("felix %v: %v", args, err)
	}
	return func() (string, error) {
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%w; stderr: %s", err, errb.String())
		}
		return out.String(), err
	}
}

func (n *node) dataFile(name string) string { return filepath.Join(n.dir, "felix-data", name) }

func (n *node) adminToken() string {
	n.t.Helper()
	return n.client.token(n.t, n.dataFile(""))
}

// sdkConfig is an SDK configuration for this node with the given token.
func (n *node) sdkConfig(token string) felix.Config {
	return n.client.config(n.dataFile(""), n.client.BrokerAddr, token)
}

// connect opens an SDK client to the node, closed at test end.
func (n *node) connect(ctx context.Context, token string) *felix.Client {
	n.t.Helper()
	return connectSDK(n.t, ctx, n.sdkConfig(token), "felix serve")
}

// token returns the token in client.json's token file; dataDir is the
// directory client.json is in.
func (c clientJSON) token(t testing.TB, dataDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, c.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// config is an SDK configuration from client.json (in dataDir) aimed at
// the broker at addr, with token.
func (c clientJSON) config(dataDir, addr, token string) felix.Config {
	return felix.Config{Addr: addr, CAFile: filepath.Join(dataDir, c.CAFile), Tenant: c.Tenant, Token: token, Transport: e2eTransport}
}

// connectSDK opens an SDK client with cfg (to what, in a failure),
// closed at test end.
func connectSDK(t testing.TB, ctx context.Context, cfg felix.Config, what string) *felix.Client {
	t.Helper()
	c, err := felix.Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("connect to %s: %v", what, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// metric returns the value of the first Prometheus sample named prefix
// (with or without labels), or -1 when there is none.
func (n *node) metric(prefix string) float64 {
	n.t.Helper()
	resp, err := http.Get(n.metrics + "/metrics")
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, prefix+" ") || strings.HasPrefix(line, prefix+"{") {
			var v float64
			fields := strings.Fields(line)
			fmt.Sscan(fields[len(fields)-1], &v)
			return v
		}
	}
	return -1
}

// eventually polls cond until it holds or the shared deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
