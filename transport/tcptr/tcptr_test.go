package tcptr

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/felixmq/felix/internal/testcert"
	"github.com/felixmq/felix/transport"
)

// testTLS returns a server and a client config sharing a self-signed
// certificate for 127.0.0.1, with ALPN felix/1.
func testTLS(t testing.TB) (server, client *tls.Config) { return testcert.Pair(t, "felix/1") }

func listen(t testing.TB, stls *tls.Config, cfg transport.Config) transport.Listener {
	t.Helper()
	ln, err := Listen("127.0.0.1:0", stls, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestHandshakeALPNAndEcho(t *testing.T) {
	stls, ctls := testTLS(t)
	ln := listen(t, stls, transport.Config{})
	ctx := ctxT(t)
	cc, err := Dial(ctx, ln.Addr().String(), ctls, transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.CloseWithError(0, "")
	sc, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.CloseWithError(0, "")
	for _, c := range []transport.Conn{cc, sc} {
		st := c.TLS()
		if st.Version != tls.VersionTLS13 || st.NegotiatedProtocol != "felix/1" || c.Kind() != transport.TCP {
			t.Fatalf("TLS version %x, ALPN %q, kind %s", st.Version, st.NegotiatedProtocol, c.Kind())
		}
	}
	if sc.RemoteAddr().String() != cc.LocalAddr().String() {
		t.Fatalf("addresses: server sees %v, client is %v", sc.RemoteAddr(), cc.LocalAddr())
	}
	go func() {
		st, err := sc.AcceptStream(ctx)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(st)
		st.Write(b)
		st.Close()
	}()
	st, err := cc.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Write([]byte("ping"))
	st.Close()
	if b, err := io.ReadAll(st); err != nil || string(b) != "ping" {
		t.Fatalf("echo: %q, %v", b, err)
	}
}

func TestALPNMismatchRefused(t *testing.T) {
	stls, ctls := testTLS(t)
	ln := listen(t, stls, transport.Config{})
	ctx := ctxT(t)
	other := ctls.Clone()
	other.NextProtos = []string{"other/1"}
	if c, err := Dial(ctx, ln.Addr().String(), other, transport.Config{}); err == nil {
		c.CloseWithError(0, "")
		t.Fatal("dial with a foreign ALPN succeeded")
	}

	// The server prefers felix/2 but the client only speaks felix/1: TLS
	// agrees on felix/1, which is not the server's first, so the server
	// refuses the connection after the handshake.
	stls2 := stls.Clone()
	stls2.NextProtos = []string{"felix/2", "felix/1"}
	ln2 := listen(t, stls2, transport.Config{})
	cc, err := Dial(ctx, ln2.Addr().String(), ctls, transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.CloseWithError(0, "")
	<-cc.Context().Done()
	if err := context.Cause(cc.Context()); !errors.Is(err, transport.ErrConnectionLost) {
		t.Fatalf("client of a refusing server ended with %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if c, err := ln2.Accept(short); err == nil {
		c.CloseWithError(0, "")
		t.Fatal("the server accepted a connection with the wrong ALPN")
	}
	// A client with no ALPN at all is refused by a server that has one.
	noALPN := ctls.Clone()
	noALPN.NextProtos = nil
	if c, err := Dial(ctx, ln.Addr().String(), noALPN, transport.Config{}); err == nil {
		<-c.Context().Done()
		if !errors.Is(context.Cause(c.Context()), transport.ErrConnectionLost) {
			t.Fatalf("client without ALPN: %v", context.Cause(c.Context()))
		}
	}
}

func TestSilentClientDoesNotBlockOthers(t *testing.T) {
	stls, ctls := testTLS(t)
	ln := listen(t, stls, transport.Config{HandshakeTimeout: time.Minute})
	ctx := ctxT(t)
	silent, err := net.Dial("tcp", ln.Addr().String()) // connects, never says hello
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	cc, err := Dial(ctx, ln.Addr().String(), ctls, transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.CloseWithError(0, "")
	sc, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc.CloseWithError(0, "")
}

func TestDialHandshakeTimeout(t *testing.T) {
	_, ctls := testTLS(t)
	raw, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	go func() {
		for {
			c, err := raw.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, err = Dial(ctxT(t), raw.Addr().String(), ctls, transport.Config{HandshakeTimeout: 100 * time.Millisecond})
	if !errors.Is(err, transport.ErrHandshakeTimeout) {
		t.Fatalf("dial to a silent server: %v, want ErrHandshakeTimeout", err)
	}
}

func TestListenerCloseLeavesAcceptedConns(t *testing.T) {
	stls, ctls := testTLS(t)
	ln := listen(t, stls, transport.Config{})
	ctx := ctxT(t)
	cc, err := Dial(ctx, ln.Addr().String(), ctls, transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.CloseWithError(0, "")
	sc, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.CloseWithError(0, "")
	ln.Close()
	if _, err := ln.Accept(ctx); !errors.Is(err, ErrListenerClosed) {
		t.Fatalf("accept after close: %v", err)
	}
	go func() {
		st, err := sc.AcceptUniStream(ctx)
		if err == nil {
			io.Copy(io.Discard, st)
		}
	}()
	st, err := cc.OpenUniStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("still here")); err != nil {
		t.Fatalf("write on an accepted connection after the listener closed: %v", err)
	}
}
