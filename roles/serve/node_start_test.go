package serve

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// startedNode is what a test start left behind: the error and the
// addresses the node had bound by then.
type startedNode struct {
	err                    error
	stillRunning           int
	cpAddr, metricsAddr    string
	brokerAddr             string
	shutdownErr            error
	shutdownStillRunning   int
	wroteClientFile, ranOK bool
}

// runTestNode starts a `felix serve` node on free loopback ports under a
// temporary data dir, with fault as its seam, and stops it when the start
// succeeds. extra are flags after the defaults (a later flag wins).
func runTestNode(t *testing.T, fault func(string) error, extra ...string) startedNode {
	t.Helper()
	t.Setenv("FELIX_RAFT_TICK_MS", "10")
	args := append([]string{"t", "--data-dir", t.TempDir(), "--broker-addr", "127.0.0.1:0",
		"--controlplane-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--shutdown-timeout", "5s"}, extra...)
	var out startedNode
	app := &cli.App{Name: "t", Writer: io.Discard, Flags: append(serverFlags(), raftFlags()...), Action: func(c *cli.Context) error {
		o, err := loadOptions(c)
		if err != nil {
			return err
		}
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		n, err := newNode(c, o, log, true, true)
		if err != nil {
			return err
		}
		defer n.locks.release()
		n.fault = fault
		out.err = n.start(c.Context)
		out.stillRunning = n.running.len()
		if n.cpHTTP != nil {
			out.cpAddr = n.cpHTTP.addr.String()
		}
		if n.metrics != nil {
			out.metricsAddr = n.metrics.addr.String()
		}
		if n.srv != nil && n.srv.Addr() != nil {
			out.brokerAddr = n.srv.Addr().String()
		}
		if out.err == nil {
			out.ranOK = true
			out.shutdownErr = n.shutdown()
			out.shutdownStillRunning = n.running.len()
		}
		return nil
	}}
	if err := app.Run(args); err != nil {
		t.Fatal(err)
	}
	return out
}

// nodeGoroutines lists the goroutines running code of what a node starts:
// ours, Raft's, bbolt's, QUIC's and the HTTP servers'.
func nodeGoroutines() map[string]string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "_test.go") || strings.Contains(g, "testing.tRunner") {
			continue
		}
		for _, mark := range []string{"felixmq/felix/", "go.etcd.io/", "quic-go/", "net/http.(*Server)", "net/http.(*conn)"} {
			if strings.Contains(g, mark) {
				id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
				out[id] = g
				break
			}
		}
	}
	return out
}

// checkStopped checks that nothing a node started is left: no goroutine
// that was not there before (a goroutine that signalled its owner may
// still be returning, so the list is retaken for a while), and every
// address it bound is free again.
func checkStopped(t *testing.T, before map[string]string, s startedNode) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left = left[:0]
		for id, g := range nodeGoroutines() {
			if _, ok := before[id]; !ok {
				left = append(left, g)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Fatalf("%d goroutines outlived the node:\n%s", len(left), strings.Join(left, "\n\n"))
	}
	for _, a := range []string{s.cpAddr, s.metricsAddr} {
		if a == "" {
			continue
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("%s is still bound: %v", a, err)
		}
		ln.Close()
	}
	if s.brokerAddr != "" {
		pc, err := net.ListenPacket("udp", s.brokerAddr)
		if err != nil {
			t.Fatalf("the broker's %s is still bound: %v", s.brokerAddr, err)
		}
		pc.Close()
	}
}

// TestNodeStartFailureStopsWhatStarted makes each step of a node's start
// fail in turn and checks that the start returns the failure and that
// everything the steps before it started was stopped.
func TestNodeStartFailureStopsWhatStarted(t *testing.T) {
	steps := []string{stepControlPlane, stepControlPlaneHTTP, stepBroker, stepMetrics, stepClientFile}
	for i, failing := range steps {
		t.Run(failing, func(t *testing.T) {
			before := nodeGoroutines()
			boom := errors.New("injected failure")
			var ran []string
			s := runTestNode(t, func(step string) error {
				ran = append(ran, step)
				if step == failing {
					return boom
				}
				return nil
			})
			if !errors.Is(s.err, boom) {
				t.Fatalf("start: %v, want the injected failure", s.err)
			}
			if len(ran) != i+1 {
				t.Fatalf("steps run %v, want them to stop at %s", ran, failing)
			}
			if s.stillRunning != 0 {
				t.Fatalf("%d parts still running after the failed start", s.stillRunning)
			}
			// The steps before the failing one did start what they start.
			if i > 1 && s.cpAddr == "" || i > 2 && s.brokerAddr == "" || i > 3 && s.metricsAddr == "" {
				t.Fatalf("the steps before %s did not start: %+v", failing, s)
			}
			checkStopped(t, before, s)
		})
	}
}

// TestNodeStartsAndStops runs a whole start and shutdown.
func TestNodeStartsAndStops(t *testing.T) {
	before := nodeGoroutines()
	s := runTestNode(t, nil)
	if s.err != nil || !s.ranOK || s.shutdownErr != nil || s.shutdownStillRunning != 0 {
		t.Fatalf("start %v, shutdown %v, still running %d", s.err, s.shutdownErr, s.shutdownStillRunning)
	}
	checkStopped(t, before, s)
}

// TestNodeBoundAddressesStopTheStart makes the real binds fail: a broker
// address (UDP) and a metrics address (TCP, bound after the broker
// started) that are taken.
func TestNodeBoundAddressesStopTheStart(t *testing.T) {
	t.Run("broker", func(t *testing.T) {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		before := nodeGoroutines()
		s := runTestNode(t, nil, "--broker-addr", pc.LocalAddr().String())
		if s.err == nil || !strings.Contains(s.err.Error(), "--broker-addr") || s.stillRunning != 0 {
			t.Fatalf("start: %v, still running %d", s.err, s.stillRunning)
		}
		checkStopped(t, before, s)
	})
	t.Run("metrics", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		before := nodeGoroutines()
		s := runTestNode(t, nil, "--metrics-addr", ln.Addr().String())
		if s.err == nil || !strings.Contains(s.err.Error(), "--metrics-addr") || s.stillRunning != 0 {
			t.Fatalf("start: %v, still running %d", s.err, s.stillRunning)
		}
		if s.brokerAddr == "" {
			t.Fatal("the broker never started before the metrics bind failed")
		}
		s.metricsAddr = "" // the test's own listener holds it
		checkStopped(t, before, s)
	})
}
