package mux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
)

func TestBidiEchoAndFIN(t *testing.T) {
	cli, srv := tcpPair(t, transport.Config{}, transport.Config{})
	ctx := ctxT(t)
	go func() {
		st, err := srv.AcceptStream(ctx)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(st)
		st.Write(b)
		st.Close()
	}()
	st, err := cli.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Sizes across the copy limit and the frame size, and more than a window.
	want := bytes.Repeat([]byte("0123456789abcdef"), (2<<20)/16+7)
	go func() {
		st.Write(want[:10])
		st.Write(want[10 : 100<<10])
		st.Write(want[100<<10:])
		st.Close()
	}()
	got := readAll(t, st)
	if !bytes.Equal(got, want) {
		t.Fatalf("echo: got %d bytes, want %d (equal prefix %v)", len(got), len(want), bytes.HasPrefix(want, got))
	}
	if n, err := st.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("read after EOF: %d, %v", n, err)
	}
	if _, err := st.Write([]byte("x")); err == nil {
		t.Fatal("write after Close succeeded")
	}
	<-st.Context().Done()
	if c := context.Cause(st.Context()); c != context.Canceled {
		t.Fatalf("send context cause after FIN: %v", c)
	}
}

func TestUniStreamsBothWays(t *testing.T) {
	cli, srv := tcpPair(t, transport.Config{}, transport.Config{})
	ctx := ctxT(t)
	for _, dir := range []struct {
		name     string
		from, to *Session
	}{{"client to server", cli, srv}, {"server to client", srv, cli}} {
		t.Run(dir.name, func(t *testing.T) {
			for i := range 3 {
				ws, err := dir.from.OpenUniStreamSync(ctx)
				if err != nil {
					t.Fatal(err)
				}
				msg := fmt.Sprintf("%s #%d", dir.name, i)
				ws.Write([]byte(msg))
				ws.Close()
				rs, err := dir.to.AcceptUniStream(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if got := string(readAll(t, rs)); got != msg {
					t.Fatalf("got %q, want %q", got, msg)
				}
				if _, err := rs.(transport.SendStream).Write([]byte("x")); err == nil {
					t.Fatal("wrote on the receive-only side of a unidirectional stream")
				}
			}
		})
	}
}

func TestCancelWriteReachesReader(t *testing.T) {
	cli, srv := tcpPair(t, transport.Config{}, transport.Config{})
	ctx := ctxT(t)
	st, _ := cli.OpenStreamSync(ctx)
	st.Write([]byte("hello"))
	st.CancelWrite(42)
	var se *transport.StreamError
	if _, err := st.Write([]byte("x")); !errors.As(err, &se) || se.Code != 42 || se.Remote {
		t.Fatalf("local write after CancelWrite: %v", err)
	}
	if c := context.Cause(st.Context()); !errors.As(c, &se) || se.Code != 42 || se.Remote {
		t.Fatalf("send context cause: %v", c)
	}
	rs, err := srv.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(rs)
	if !errors.As(err, &se) || se.Code != 42 || !se.Remote {
		t.Fatalf("reader got %v, want a remote stream error with code 42", err)
	}
}

func TestCancelReadReachesWriter(t *testing.T) {
	cli, srv := tcpPair(t, transport.Config{}, transport.Config{})
	ctx := ctxT(t)
	st, _ := cli.OpenStreamSync(ctx)
	st.Write([]byte("hello"))
	rs, err := srv.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs.CancelRead(7)
	var se *transport.StreamError
	if _, err := rs.Read(make([]byte, 8)); !errors.As(err, &se) || se.Code != 7 || se.Remote {
		t.Fatalf("local read after CancelRead: %v", err)
	}
	// The writer learns of it once the stop-sending arrives.
	<-st.Context().Done()
	if c := context.Cause(st.Context()); !errors.As(c, &se) || se.Code != 7 || !se.Remote {
		t.Fatalf("send context cause: %v", c)
	}
	if _, err := st.Write([]byte("more")); !errors.As(err, &se) || se.Code != 7 || !se.Remote {
		t.Fatalf("write after the peer's stop-sending: %v", err)
	}
	// The server's send side still works; the client reads it.
	rs.Write([]byte("answer"))
	rs.Close()
	if got := string(readAll(t, st)); got != "answer" {
		t.Fatalf("got %q", got)
	}
	waitStreams(t, cli, 0)
	waitStreams(t, srv, 0)
}

// waitStreams waits until s tracks n streams.
func waitStreams(t *testing.T, s *Session, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.NumStreams() != n {
		if time.Now().After(deadline) {
			t.Fatalf("session tracks %d streams, want %d", s.NumStreams(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCloseWithErrorBothEnds(t *testing.T) {
	cli, srv := tcpPair(t, transport.Config{}, transport.Config{})
	ctx := ctxT(t)
	st, _ := cli.OpenStreamSync(ctx)
	st.Write([]byte("x"))
	rs, _ := srv.AcceptStream(ctx)
	rs.Read(make([]byte, 1))
	readErr := make(chan error, 1)
	go func() { _, err := st.Read(make([]byte, 1)); readErr <- err }()

	srv.CloseWithError(9, "going away")
	var ae *transport.ApplicationError
	if err := <-readErr; !errors.As(err, &ae) || ae.Code != 9 || ae.Message != "going away" || !ae.Remote {
		t.Fatalf("client's pending read: %v", err)
	}
	<-cli.Context().Done()
	if c := context.Cause(cli.Context()); !errors.As(c, &ae) || ae.Code != 9 || !ae.Remote {
		t.Fatalf("client cause: %v", c)
	}
	if _, err := cli.OpenStreamSync(ctx); !errors.As(err, &ae) || !ae.Remote {
		t.Fatalf("client open after close: %v", err)
	}
	if c := context.Cause(srv.Context()); !errors.As(c, &ae) || ae.Code != 9 || ae.Remote || ae.Message != "going away" {
		t.Fatalf("server cause: %v", c)
	}
	if _, err := rs.Write([]byte("x")); !errors.As(err, &ae) || ae.Remote {
		t.Fatalf("server write after its close: %v", err)
	}
}

func TestConnectionLostWithoutClose(t *testing.T) {
	cli, srv := tcpPair(t, transport.Config{}, transport.Config{})
	srv.conn.Close() // no CLOSE frame
	<-cli.Context().Done()
	if c := context.Cause(cli.Context()); !errors.Is(c, transport.ErrConnectionLost) {
		t.Fatalf("cause: %v", c)
	}
}

func TestStalledReaderDoesNotBlockOthers(t *testing.T) {
	cfg := transport.Config{InitialStreamReceiveWindow: 64 << 10, MaxStreamReceiveWindow: 64 << 10}
	cli, srv := tcpPair(t, cfg, cfg)
	ctx := ctxT(t)

	stalled, _ := cli.OpenStreamSync(ctx)
	stalledDone := make(chan error, 1)
	go func() {
		_, err := stalled.Write(make([]byte, 1<<20)) // far more than the window
		stalledDone <- err
	}()
	stalledR, err := srv.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Never read stalledR until the others are done.

	const others, size = 8, 4 << 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*others)
	for range others {
		st, err := cli.OpenStreamSync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if _, err := st.Write(make([]byte, size)); err != nil {
				errs <- err
			}
			st.Close()
		})
	}
	for range others {
		rs, err := srv.AcceptStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			n, err := io.Copy(io.Discard, rs)
			if err != nil || n != size {
				errs <- fmt.Errorf("read %d bytes, %v", n, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The stalled stream's writer is still blocked with its window full.
	select {
	case err := <-stalledDone:
		t.Fatalf("the stalled stream's write returned (%v) while nobody read it", err)
	default:
	}
	srv.mu.Lock()
	unread := stalledR.(*stream).unread
	srv.mu.Unlock()
	if unread != cfg.InitialStreamReceiveWindow {
		t.Fatalf("stalled stream has %d unread bytes, want its whole window %d", unread, cfg.InitialStreamReceiveWindow)
	}
	go io.Copy(io.Discard, stalledR)
	if err := <-stalledDone; err != nil {
		t.Fatalf("stalled write after the reader resumed: %v", err)
	}
}

func TestTryWriteAllWouldBlock(t *testing.T) {
	const window = 32 << 10
	cfg := transport.Config{InitialStreamReceiveWindow: window, MaxStreamReceiveWindow: window}
	cli, srv := tcpPair(t, cfg, cfg)
	ctx := ctxT(t)
	st, _ := cli.OpenStreamSync(ctx)
	st.Write([]byte("a")) // wait for settings; 1 byte used
	if err := st.TryWriteAll(make([]byte, window)); !errors.Is(err, transport.ErrWouldBlock) {
		t.Fatalf("TryWriteAll beyond the window: %v", err)
	}
	if err := st.TryWriteAll(make([]byte, window-1)); err != nil {
		t.Fatalf("TryWriteAll within the window: %v", err)
	}
	if err := st.TryWriteAll([]byte("b")); !errors.Is(err, transport.ErrWouldBlock) {
		t.Fatalf("TryWriteAll with no credit: %v", err)
	}
	rs, _ := srv.AcceptStream(ctx)
	if _, err := io.ReadFull(rs, make([]byte, window)); err != nil {
		t.Fatal(err)
	}
	st.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := st.Write([]byte("c")); err != nil { // credit came back
		t.Fatalf("write after the reader caught up: %v", err)
	}
}

func TestDeadlines(t *testing.T) {
	const window = 16 << 10
	cfg := transport.Config{InitialStreamReceiveWindow: window, MaxStreamReceiveWindow: window}
	cli, srv := tcpPair(t, cfg, cfg)
	ctx := ctxT(t)
	st, _ := cli.OpenStreamSync(ctx)
	st.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := st.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v", err)
	}
	st.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := st.Write(make([]byte, 3*window))
	if !errors.Is(err, os.ErrDeadlineExceeded) || n != window {
		t.Fatalf("write past its deadline: %d bytes, %v (want %d and a deadline error)", n, err, window)
	}
	if ne, ok := err.(interface{ Timeout() bool }); !ok || !ne.Timeout() {
		t.Fatalf("deadline error is not a timeout: %#v", err)
	}
	// A deadline set while Read waits wakes it.
	rs, _ := srv.AcceptStream(ctx)
	io.ReadFull(rs, make([]byte, window))
	done := make(chan error, 1)
	go func() { _, err := rs.Read(make([]byte, 1)); done <- err }()
	time.Sleep(10 * time.Millisecond)
	rs.SetReadDeadline(time.Now().Add(-time.Second))
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after a past deadline was set: %v", err)
	}
}

func TestStreamLimitWaitsAndProceeds(t *testing.T) {
	cli, srv := tcpPair(t, transport.Config{}, transport.Config{MaxIncomingStreams: 1, MaxIncomingUniStreams: -1})
	ctx := ctxT(t)
	first, err := cli.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := cli.OpenStreamSync(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("open at the limit: %v, want to wait until the context ends", err)
	}
	if _, err := cli.OpenUniStreamSync(ctx); !errors.Is(err, errNoStreams) {
		t.Fatalf("open of a kind the peer allows none of: %v", err)
	}
	opened := make(chan error, 1)
	go func() {
		st, err := cli.OpenStreamSync(ctx)
		if err == nil {
			st.Write([]byte("second"))
			st.Close()
		}
		opened <- err
	}()
	first.Write([]byte("first"))
	first.Close()
	rs, _ := srv.AcceptStream(ctx)
	readAll(t, rs)
	select {
	case err := <-opened:
		t.Fatalf("second stream opened (%v) before the first ended", err)
	default:
	}
	rs.Close() // both directions over: the server grants another
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	rs2, _ := srv.AcceptStream(ctx)
	if got := string(readAll(t, rs2)); got != "second" {
		t.Fatalf("got %q", got)
	}
}

func TestManyStreamsNoLeak(t *testing.T) {
	before := runtimeGoroutines()
	cli, srv := tcpPair(t, transport.Config{}, transport.Config{})
	ctx := ctxT(t)
	const total, parallel = 10000, 16
	go func() {
		for {
			rs, err := srv.AcceptStream(ctx)
			if err != nil {
				return
			}
			go func() {
				b, _ := io.ReadAll(rs)
				rs.Write(b)
				rs.Close()
			}()
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, parallel)
	for w := range parallel {
		wg.Go(func() {
			for i := w; i < total; i += parallel {
				st, err := cli.OpenStreamSync(ctx)
				if err != nil {
					errs <- err
					return
				}
				msg := fmt.Sprint(i)
				st.Write([]byte(msg))
				st.Close()
				b, err := io.ReadAll(st)
				if err != nil || string(b) != msg {
					errs <- fmt.Errorf("stream %d: %q, %v", i, b, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitStreams(t, cli, 0)
	waitStreams(t, srv, 0)
	cli.CloseWithError(0, "")
	srv.CloseWithError(0, "")
	waitGoroutines(t, before)
}

func TestUnreadDataDroppedOnReset(t *testing.T) {
	// The connection window is returned for data dropped by a reset, so
	// later streams are not starved.
	cfg := transport.Config{InitialStreamReceiveWindow: 64 << 10, InitialConnReceiveWindow: 96 << 10, MaxConnReceiveWindow: 96 << 10}
	cli, srv := tcpPair(t, cfg, cfg)
	ctx := ctxT(t)
	for i := range 10 {
		st, _ := cli.OpenStreamSync(ctx)
		st.Write(make([]byte, 60<<10))
		rs, _ := srv.AcceptStream(ctx)
		if i%2 == 0 {
			st.CancelWrite(1)
		} else {
			rs.CancelRead(2)
		}
		st.Close()
		rs.Close()
		rs.CancelRead(3)
	}
	st, _ := cli.OpenStreamSync(ctx)
	st.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := st.Write(make([]byte, 60<<10)); err != nil {
		t.Fatalf("write after resets: %v", err)
	}
}

func TestErrorTexts(t *testing.T) {
	err := lost("protocol violation: %v", "flow control violated on stream 1")
	if !errors.Is(err, transport.ErrConnectionLost) || !strings.Contains(err.Error(), "flow control violated") {
		t.Fatal(err)
	}
}

func TestBlockedWriterWokenByStopSending(t *testing.T) {
	const window = 16 << 10
	cfg := transport.Config{InitialStreamReceiveWindow: window, MaxStreamReceiveWindow: window}
	cli, srv := tcpPair(t, cfg, cfg)
	ctx := ctxT(t)
	st, _ := cli.OpenStreamSync(ctx)
	done := make(chan error, 1)
	go func() { _, err := st.Write(make([]byte, 10*window)); done <- err }()
	rs, err := srv.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs.CancelRead(5)
	var se *transport.StreamError
	if err := <-done; !errors.As(err, &se) || se.Code != 5 || !se.Remote {
		t.Fatalf("blocked write after the peer's stop-sending: %v", err)
	}
}

func TestCloseDuringWriteSendsFINAfterIt(t *testing.T) {
	const window = 16 << 10
	cfg := transport.Config{InitialStreamReceiveWindow: window, MaxStreamReceiveWindow: window}
	cli, srv := tcpPair(t, cfg, cfg)
	ctx := ctxT(t)
	st, _ := cli.OpenStreamSync(ctx)
	data := bytes.Repeat([]byte("felix"), 4*window)
	done := make(chan error, 1)
	go func() { _, err := st.Write(data); done <- err }()
	rs, err := srv.AcceptStream(ctx) // the write has begun
	if err != nil {
		t.Fatal(err)
	}
	st.Close() // while Write waits for credit
	got := readAll(t, rs)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes before EOF, want %d", len(got), len(data))
	}
}

func TestSessionCloseEndsStreamOperations(t *testing.T) {
	cli, srv := tcpPair(t, transport.Config{}, transport.Config{})
	ctx := ctxT(t)
	st, _ := cli.OpenStreamSync(ctx)
	st.Write([]byte("x"))
	rs, _ := srv.AcceptStream(ctx)
	ctxDone := st.Context()
	acceptErr := make(chan error, 1)
	go func() { _, err := srv.AcceptUniStream(ctx); acceptErr <- err }()
	cli.CloseWithError(3, "bye")
	var ae *transport.ApplicationError
	<-ctxDone.Done()
	if c := context.Cause(ctxDone); !errors.As(c, &ae) || ae.Remote || ae.Code != 3 {
		t.Fatalf("stream context cause after our close: %v", c)
	}
	if err := <-acceptErr; !errors.As(err, &ae) || !ae.Remote || ae.Message != "bye" {
		t.Fatalf("peer's pending accept: %v", err)
	}
	rs.Read(make([]byte, 1)) // the buffered byte
	if _, err := rs.Read(make([]byte, 1)); !errors.As(err, &ae) || !ae.Remote {
		t.Fatalf("peer's read after close: %v", err)
	}
}

func TestSendStatsCountsWrites(t *testing.T) {
	cli, srv := tcpPair(t, transport.Config{}, transport.Config{})
	ctx := ctxT(t)
	st, _ := cli.OpenStreamSync(ctx)
	before, _ := cli.SendStats()
	st.Write(make([]byte, 100<<10))
	st.Close()
	rs, _ := srv.AcceptStream(ctx)
	readAll(t, rs)
	after, _ := cli.SendStats()
	if after-before < 100<<10 {
		t.Fatalf("sent %d bytes for a 100 KiB write", after-before)
	}
}
