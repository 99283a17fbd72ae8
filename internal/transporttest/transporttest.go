// Package transporttest runs a package's tests once per transport, so
// that suites are parametrized over QUIC and TLS over TCP rather than
// copied. It is imported by tests only.
package transporttest

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/felixmq/felix/transport"
)

// Env restricts Main to one transport: FELIX_TEST_TRANSPORT=quic or tcp.
const Env = "FELIX_TEST_TRANSPORT"

// Kinds are the transports Main runs the tests over, in order.
func Kinds() ([]transport.Kind, error) {
	switch v := os.Getenv(Env); v {
	case "":
		return []transport.Kind{transport.QUIC, transport.TCP}, nil
	case string(transport.QUIC), string(transport.TCP):
		return []transport.Kind{transport.Kind(v)}, nil
	default:
		return nil, fmt.Errorf("%s=%q: want quic or tcp", Env, v)
	}
}

// Main runs m's tests once per transport of Kinds (benchmarks, with
// -test.bench, once: over the first), calling set with it before each run, and returns the first failing run's exit code (0 when every run
// passed). Each run is announced on stderr, so a failure's transport is
// plain in the output. Use it from TestMain:
//
//	func TestMain(m *testing.M) {
//		os.Exit(transporttest.Main(m, func(k transport.Kind) { testTransport = k }))
//	}
func Main(m *testing.M, set func(transport.Kind)) int {
	kinds, err := Kinds()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		// Benchmarks name their transport themselves: one run of the
		// package measures each of them once.
		kinds = kinds[:1]
	}
	code := 0
	for _, k := range kinds {
		set(k)
		fmt.Fprintf(os.Stderr, "=== transport %s\n", k)
		if c := m.Run(); c != 0 && code == 0 {
			fmt.Fprintf(os.Stderr, "--- FAIL: the run over %s\n", k)
			code = c
		}
	}
	return code
}
