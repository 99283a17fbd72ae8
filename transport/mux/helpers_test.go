package mux

import (
	"context"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
)

// tcpPair returns a client and a server session over a loopback TCP
// connection, closed when the test ends.
func tcpPair(t testing.TB, ccfg, scfg transport.Config) (*Session, *Session) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accC := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accC <- nil
			return
		}
		accC <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc := <-accC
	if sc == nil {
		t.Fatal("accept failed")
	}
	cli, srv := Client(c, ccfg), Server(sc, scfg)
	t.Cleanup(func() {
		cli.CloseWithError(0, "")
		srv.CloseWithError(0, "")
	})
	return cli, srv
}

// ctxT is a context that ends with the test (or after a minute).
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitGoroutines waits until at most n goroutines run (polling with
// one deadline) and fails the test with a dump otherwise.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rawPeer is the far end of a net.Pipe speaking frames by hand.
type rawPeer struct {
	t    testing.TB
	conn net.Conn
}

func (r rawPeer) send(b []byte) {
	r.t.Helper()
	if _, err := r.conn.Write(b); err != nil {
		r.t.Fatalf("raw write: %v", err)
	}
}

// rawSession starts a server session over a pipe whose other end the
// test drives by hand; what the session writes is read and dropped.
func rawSession(t *testing.T, cfg transport.Config) (*Session, rawPeer, chan []byte) {
	a, b := net.Pipe()
	s := Server(a, cfg)
	got := make(chan []byte, 1024)
	go func() {
		defer close(got)
		buf := make([]byte, 64<<10)
		for {
			n, err := b.Read(buf)
			if n > 0 {
				select {
				case got <- append([]byte(nil), buf[:n]...):
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		s.CloseWithError(0, "")
		b.Close()
	})
	return s, rawPeer{t, b}, got
}

// readAll reads r to its end.
func readAll(t testing.TB, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return b
}

func runtimeGoroutines() int { return runtime.NumGoroutine() }
