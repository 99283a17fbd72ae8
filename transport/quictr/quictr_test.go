package quictr

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/felixmq/felix/internal/testcert"
	"github.com/felixmq/felix/transport"
)

const alpn = "quictr-test"

// testTLS returns a server and a client configuration sharing one
// self-signed certificate for 127.0.0.1.
func testTLS(t *testing.T) (*tls.Config, *tls.Config) { return testcert.Pair(t, alpn) }

// pair returns two connected ends: the dialer's and the listener's.
func pair(t *testing.T, srvCfg, cliCfg transport.Config) (client, server transport.Conn) {
	t.Helper()
	st, ct := testTLS(t)
	ln, err := Listen("127.0.0.1:0", st, srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err = Dial(ctx, ln.Addr().String(), ct, cliCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.CloseWithError(0, "") })
	server, err = ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.CloseWithError(0, "") })
	return client, server
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// openPair opens a bidirectional stream from client and accepts it on
// server (the first byte makes the stream known to the server).
func openPair(t *testing.T, client, server transport.Conn) (transport.Stream, transport.Stream) {
	t.Helper()
	ctx := testCtx(t)
	cs, err := client.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	ss, err := server.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(ss, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	return cs, ss
}

func wantStreamError(t *testing.T, what string, err error, code transport.StreamErrorCode, remote bool) {
	t.Helper()
	var se *transport.StreamError
	if !errors.As(err, &se) || se.Code != code || se.Remote != remote {
		t.Fatalf("%s: err = %v (%T), want *transport.StreamError{Code: %d, Remote: %v}", what, err, err, code, remote)
	}
}

func wantAppError(t *testing.T, what string, err error, code transport.ApplicationErrorCode, msg string, remote bool) {
	t.Helper()
	var ae *transport.ApplicationError
	if !errors.As(err, &ae) || ae.Code != code || ae.Message != msg || ae.Remote != remote {
		t.Fatalf("%s: err = %v (%T), want *transport.ApplicationError{Code: %d, Message: %q, Remote: %v}", what, err, err, code, msg, remote)
	}
}

func waitDone(t *testing.T, what string, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: context not done", what)
	}
}

func TestConnKindAndTLS(t *testing.T) {
	client, server := pair(t, transport.Config{}, transport.Config{})
	for _, c := range []transport.Conn{client, server} {
		if c.Kind() != transport.QUIC {
			t.Errorf("Kind = %q, want quic", c.Kind())
		}
		if got := c.TLS().NegotiatedProtocol; got != alpn {
			t.Errorf("ALPN = %q, want %q", got, alpn)
		}
	}
	if len(client.TLS().PeerCertificates) != 1 {
		t.Errorf("the client sees %d peer certificates, want 1", len(client.TLS().PeerCertificates))
	}
	if client.LocalAddr().(*net.UDPAddr).Port != server.RemoteAddr().(*net.UDPAddr).Port {
		t.Errorf("client local %v, server sees remote %v", client.LocalAddr(), server.RemoteAddr())
	}
}

func TestStreamDataAndEOF(t *testing.T) {
	client, server := pair(t, transport.Config{}, transport.Config{})
	cs, ss := openPair(t, client, server)
	if _, err := ss.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if err := ss.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(cs)
	if err != nil || string(got) != "pong" {
		t.Fatalf("ReadAll = %q, %v; want pong, nil", got, err)
	}
}

// TestResetByPeer: the writer's CancelWrite reaches the reader as a
// remote StreamError, and the writer's own later writes and its send
// context's cause as a local one.
func TestResetByPeer(t *testing.T) {
	client, server := pair(t, transport.Config{}, transport.Config{})
	cs, ss := openPair(t, client, server)
	cs.CancelWrite(7)
	_, err := io.ReadAll(ss)
	wantStreamError(t, "server read after the client's reset", err, 7, true)
	_, err = cs.Write([]byte("x"))
	wantStreamError(t, "client write after its own reset", err, 7, false)
	waitDone(t, "client send context", cs.Context())
	wantStreamError(t, "cause of the client's send context", context.Cause(cs.Context()), 7, false)
}

// TestStopSendingByPeer: the reader's CancelRead reaches the writer as a
// remote StreamError on Write and as its send context's cause.
func TestStopSendingByPeer(t *testing.T) {
	client, server := pair(t, transport.Config{}, transport.Config{})
	cs, ss := openPair(t, client, server)
	sendCtx := cs.Context() // asked for before the stop: the callback path
	ss.CancelRead(9)
	waitDone(t, "client send context", sendCtx)
	wantStreamError(t, "cause of the client's send context", context.Cause(sendCtx), 9, true)
	_, err := cs.Write([]byte("x"))
	wantStreamError(t, "client write after the server's stop", err, 9, true)
	if err := cs.TryWriteAll([]byte("x")); err == nil {
		t.Fatal("TryWriteAll after the server's stop succeeded")
	} else {
		wantStreamError(t, "client TryWriteAll after the server's stop", err, 9, true)
	}
}

func TestCloseWithCode(t *testing.T) {
	client, server := pair(t, transport.Config{}, transport.Config{})
	cs, ss := openPair(t, client, server)
	remoteCtx := client.Context() // asked for before the close
	if err := server.CloseWithError(42, "going away"); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)

	_, err := client.AcceptStream(ctx)
	wantAppError(t, "client accept after the server's close", err, 42, "going away", true)
	_, err = io.ReadAll(cs)
	wantAppError(t, "client read after the server's close", err, 42, "going away", true)
	waitDone(t, "client conn context", remoteCtx)
	wantAppError(t, "cause of the client's conn context", context.Cause(remoteCtx), 42, "going away", true)
	wantAppError(t, "cause of a context asked for after the close", context.Cause(client.Context()), 42, "going away", true)

	_, err = server.OpenStreamSync(ctx)
	wantAppError(t, "server open after its own close", err, 42, "going away", false)
	_, err = ss.Write([]byte("x"))
	wantAppError(t, "server write after its own close", err, 42, "going away", false)
	waitDone(t, "server conn context", server.Context())
	wantAppError(t, "cause of the server's conn context", context.Cause(server.Context()), 42, "going away", false)
}

func TestIdleTimeout(t *testing.T) {
	cfg := transport.Config{MaxIdleTimeout: 300 * time.Millisecond}
	client, server := pair(t, cfg, cfg)
	waitDone(t, "client conn context", client.Context())
	if cause := context.Cause(client.Context()); !errors.Is(cause, transport.ErrIdleTimeout) {
		t.Fatalf("cause = %v (%T), want ErrIdleTimeout", cause, cause)
	}
	_, err := client.OpenStreamSync(testCtx(t))
	if !errors.Is(err, transport.ErrIdleTimeout) {
		t.Fatalf("open after the idle timeout: %v, want ErrIdleTimeout", err)
	}
	waitDone(t, "server conn context", server.Context())
	if cause := context.Cause(server.Context()); !errors.Is(cause, transport.ErrIdleTimeout) {
		t.Fatalf("server cause = %v, want ErrIdleTimeout", cause)
	}
}

// TestTryWriteAllWouldBlock: more than the peer's stream window at once
// is refused whole with ErrWouldBlock; what fits goes.
func TestTryWriteAllWouldBlock(t *testing.T) {
	cfg := transport.Config{InitialStreamReceiveWindow: 64 << 10, MaxStreamReceiveWindow: 64 << 10}
	client, server := pair(t, cfg, transport.Config{})
	cs, ss := openPair(t, client, server)
	if err := cs.TryWriteAll(make([]byte, 1<<20)); !errors.Is(err, transport.ErrWouldBlock) {
		t.Fatalf("TryWriteAll of 1 MiB into a 64 KiB window: %v, want ErrWouldBlock", err)
	}
	if err := cs.TryWriteAll([]byte("fits")); err != nil {
		t.Fatalf("TryWriteAll of 4 bytes: %v", err)
	}
	cs.Close()
	got, err := io.ReadAll(ss)
	if err != nil || string(got) != "fits" {
		t.Fatalf("server read %q, %v; want fits", got, err)
	}
}

func TestUniStreams(t *testing.T) {
	client, server := pair(t, transport.Config{}, transport.Config{MaxIncomingUniStreams: 10})
	ctx := testCtx(t)
	us, err := server.OpenUniStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := us.Write([]byte("event")); err != nil {
		t.Fatal(err)
	}
	rs, err := client.AcceptUniStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(rs, b); err != nil || string(b) != "event" {
		t.Fatalf("read %q, %v", b, err)
	}
	rs.CancelRead(3)
	waitDone(t, "uni send context", us.Context())
	wantStreamError(t, "cause of the uni send context", context.Cause(us.Context()), 3, true)

	us2, err := server.OpenUniStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	us2.Write([]byte("x"))
	us2.CancelWrite(5)
	rs2, err := client.AcceptUniStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(rs2)
	wantStreamError(t, "read of a reset uni stream", err, 5, true)
}

func TestDeadlineStaysDeadline(t *testing.T) {
	client, server := pair(t, transport.Config{}, transport.Config{})
	cs, _ := openPair(t, client, server)
	cs.SetReadDeadline(time.Now().Add(-time.Second))
	_, err := cs.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v is not a net.Error timeout", err)
	}
}

func TestDialRefusedCertificate(t *testing.T) {
	st, ct := testTLS(t)
	ln, err := Listen("127.0.0.1:0", st, transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ct.RootCAs = x509.NewCertPool() // trusts nothing
	_, err = Dial(testCtx(t), ln.Addr().String(), ct, transport.Config{})
	if !errors.Is(err, transport.ErrConnectionLost) {
		t.Fatalf("dial with an untrusted certificate: %v, want ErrConnectionLost", err)
	}
	var ua x509.UnknownAuthorityError
	if !errors.As(err, &ua) {
		t.Fatalf("dial with an untrusted certificate: %v does not keep the x509 error", err)
	}
}

// TestPeerRefusesOurCertificate: the listener's TLS alert reaches the
// dialer as ErrConnectionLost matching tls.AlertError.
func TestPeerRefusesOurCertificate(t *testing.T) {
	st, ct := testTLS(t)
	st.ClientAuth = tls.RequireAnyClientCert
	ln, err := Listen("127.0.0.1:0", st, transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx := testCtx(t)
	c, err := Dial(ctx, ln.Addr().String(), ct, transport.Config{})
	if err == nil {
		// TLS 1.3: the client may finish before the server refuses.
		_, err = c.AcceptStream(ctx)
	}
	if !errors.Is(err, transport.ErrConnectionLost) {
		t.Fatalf("err = %v, want ErrConnectionLost", err)
	}
	var alert tls.AlertError
	if !errors.As(err, &alert) {
		t.Fatalf("err = %v does not carry the peer's TLS alert", err)
	}
}

func TestTranslateLeavesOthers(t *testing.T) {
	for _, err := range []error{nil, io.EOF, context.Canceled, os.ErrDeadlineExceeded} {
		if got := translate(err); got != err {
			t.Errorf("translate(%v) = %v", err, got)
		}
	}
}

// TestTranslateNilAllocs: the success path's translation is free (the
// wrappers call translate only when quic-go returned an error, and the
// methods that always call it pass nil through).
func TestTranslateNilAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = translate(nil) }); n != 0 {
		t.Fatalf("translate(nil) allocates %v times", n)
	}
}

// TestTranslateUntranslatedAllocs: errors passed through untouched (a
// deadline, a closed stream) cost no allocation either.
func TestTranslateUntranslatedAllocs(t *testing.T) {
	deadline := func() error {
		client, server := pair(t, transport.Config{}, transport.Config{})
		cs, _ := openPair(t, client, server)
		cs.SetReadDeadline(time.Now().Add(-time.Second))
		_, err := cs.Read(make([]byte, 1))
		return err
	}()
	for _, err := range []error{io.EOF, deadline, context.Canceled} {
		if n := testing.AllocsPerRun(100, func() { _ = translate(err) }); n != 0 {
			t.Errorf("translate(%v) allocates %v times", err, n)
		}
	}
}

// TestTranslateWrapped: a quic-go error under a wrapping is found.
func TestTranslateWrapped(t *testing.T) {
	_, client := pair(t, transport.Config{}, transport.Config{})
	client.CloseWithError(5, "bye")
	c := client.(*conn)
	<-c.qc.Context().Done()
	wrapped := fmt.Errorf("while reading: %w", context.Cause(c.qc.Context()))
	wantAppError(t, "wrapped close", translate(wrapped), 5, "bye", false)
}

func TestSendStats(t *testing.T) {
	client, server := pair(t, transport.Config{}, transport.Config{})
	cs, _ := openPair(t, client, server)
	cs.Write(make([]byte, 1000))
	s, ok := client.(interface {
		SendStats() (uint64, time.Duration)
	})
	if !ok {
		t.Fatal("a quictr connection has no SendStats")
	}
	if sent, _ := s.SendStats(); sent == 0 {
		t.Fatal("SendStats says nothing was sent")
	}
}
