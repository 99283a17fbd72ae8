package peer

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/wire"
)

// echo answers "echo" with the caller's node id and the request's header
// and body, "fail" with a refusal, and "block" once ctx ends or release
// is closed.
type echo struct {
	calls   atomic.Int64
	started chan struct{} // one send per "block" call
	release chan struct{}
}

func newEcho() *echo {
	return &echo{started: make(chan struct{}, 64), release: make(chan struct{})}
}

func (h *echo) handle(ctx context.Context, from Peer, req Request) Reply {
	h.calls.Add(1)
	switch req.Type {
	case "echo":
		hdr, _ := json.Marshal(map[string]any{"from": from.NodeID, "got": req.Header})
		return Reply{Header: hdr, Body: req.Body}
	case "fail":
		return ErrorReply(wire.NewError(wire.CodeOverloaded, "full").WithDetail("reason", "test"))
	case "block":
		h.started <- struct{}{}
		select {
		case <-ctx.Done():
		case <-h.release:
		}
		return Reply{}
	}
	return ErrorReply(wire.NewError(wire.CodeUnsupported, "unknown %s", req.Type))
}

func startCallNode(t *testing.T, ca *testCA, id string, h *echo, tweak func(*Config)) *node {
	return startNode(t, id, ca.creds(t, id), func(c *Config) {
		if h != nil {
			c.Handle = h.handle
		}
		if tweak != nil {
			tweak(c)
		}
	})
}

func target(n *node) Target { return Target{NodeID: n.NodeID(), Addr: n.Addr().String()} }

func mustEcho(t *testing.T, from, to *node, body string) {
	t.Helper()
	rep, err := from.Call(testCtx(t), target(to), Request{Type: "echo", Header: json.RawMessage(`{"n":1}`), Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		From string          `json:"from"`
		Got  json.RawMessage `json:"got"`
	}
	if err := json.Unmarshal(rep.Header, &got); err != nil || rep.Err != nil {
		t.Fatalf("reply %+v: %v", rep, err)
	}
	if got.From != from.NodeID() || string(got.Got) != `{"n":1}` || string(rep.Body) != body {
		t.Fatalf("reply %s / %q", rep.Header, rep.Body)
	}
}

func TestCallsInBothDirections(t *testing.T) {
	ca := newTestCA(t)
	ha, hb := newEcho(), newEcho()
	a := startCallNode(t, ca, "broker-a", ha, nil)
	b := startCallNode(t, ca, "broker-b", hb, nil)
	for range 3 {
		mustEcho(t, a, b, "to b")
		mustEcho(t, b, a, "to a")
	}
	// One link dialed each way, reused by every call.
	if len(a.Links()) != 2 || len(b.Links()) != 2 {
		t.Fatalf("links: a %+v, b %+v", a.Links(), b.Links())
	}
	if ha.calls.Load() != 3 || hb.calls.Load() != 3 {
		t.Fatalf("handled a %d, b %d", ha.calls.Load(), hb.calls.Load())
	}
}

func TestCallsOverTheAcceptedLinkToo(t *testing.T) {
	ca := newTestCA(t)
	a := startCallNode(t, ca, "broker-a", newEcho(), nil)
	b := startCallNode(t, ca, "broker-b", newEcho(), nil)
	l, err := a.Dial(testCtx(t), "broker-b", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Call(testCtx(t), Request{Type: "echo"}); err != nil {
		t.Fatal(err)
	}
	// b answers over the link a dialed: b's side of it serves calls too.
	var ba *Link
	waitUntil(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		for x := range b.links {
			ba = x
		}
		return ba != nil
	})
	rep, err := ba.Call(testCtx(t), Request{Type: "echo", Body: []byte("x")})
	if err != nil || string(rep.Body) != "x" {
		t.Fatalf("%+v, %v", rep, err)
	}
}

func TestConcurrentCallsShareOneDial(t *testing.T) {
	ca := newTestCA(t)
	a := startCallNode(t, ca, "broker-a", nil, nil)
	b := startCallNode(t, ca, "broker-b", newEcho(), nil)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			body := []byte(fmt.Sprint(i))
			rep, err := a.Call(testCtx(t), target(b), Request{Type: "echo", Body: body})
			if err == nil && !bytes.Equal(rep.Body, body) {
				err = fmt.Errorf("call %d answered %q", i, rep.Body)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(a.Links()); n != 1 {
		t.Fatalf("a holds %d links, want the one every call shared", n)
	}
}

func TestHandlerRefusalReachesTheCaller(t *testing.T) {
	ca := newTestCA(t)
	a := startCallNode(t, ca, "broker-a", nil, nil)
	b := startCallNode(t, ca, "broker-b", newEcho(), nil)
	rep, err := a.Call(testCtx(t), target(b), Request{Type: "fail"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Err == nil || rep.Err.Code != wire.CodeOverloaded || rep.Err.Retry != wire.RetryRetryAfter ||
		rep.Err.Message != "full" || rep.Err.Detail["reason"] != "test" {
		t.Fatalf("refusal %+v", rep.Err)
	}
	// A node without a handler answers unsupported.
	rep, err = b.Call(testCtx(t), target(a), Request{Type: "echo"})
	if err != nil || rep.Err == nil || rep.Err.Code != wire.CodeUnsupported {
		t.Fatalf("%+v, %v", rep, err)
	}
}

func TestCallWhoseLinkDiesIsUnanswered(t *testing.T) {
	ca := newTestCA(t)
	a := startCallNode(t, ca, "broker-a", nil, nil)
	hb := newEcho()
	b := startCallNode(t, ca, "broker-b", hb, nil)
	errC := make(chan error, 1)
	go func() {
		_, err := a.Call(testCtx(t), target(b), Request{Type: "block"})
		errC <- err
	}()
	<-hb.started
	b.Close()
	err := <-errC
	if !errors.Is(err, ErrUnanswered) {
		t.Fatalf("Call = %v, want ErrUnanswered (it reached the handler)", err)
	}
	// Nothing answers now: the call is never sent, so it is not
	// ErrUnanswered.
	_, err = a.Call(testCtx(t), target(b), Request{Type: "echo"})
	if err == nil || errors.Is(err, ErrUnanswered) {
		t.Fatalf("Call to a closed node = %v, want a not-sent error", err)
	}
}

func TestCallRedialsAfterTheLinkDied(t *testing.T) {
	ca := newTestCA(t)
	a := startCallNode(t, ca, "broker-a", nil, nil)
	b := startCallNode(t, ca, "broker-b", newEcho(), nil)
	mustEcho(t, a, b, "1")
	a.mu.Lock()
	l := a.dialed["broker-b"].link
	a.mu.Unlock()
	l.Close()
	mustEcho(t, a, b, "2")
	a.mu.Lock()
	l2 := a.dialed["broker-b"].link
	a.mu.Unlock()
	if l2 == l {
		t.Fatal("the dead link was reused")
	}
}

func TestCallDeadlineFromContext(t *testing.T) {
	ca := newTestCA(t)
	a := startCallNode(t, ca, "broker-a", nil, nil)
	hb := newEcho()
	b := startCallNode(t, ca, "broker-b", hb, nil)
	mustEcho(t, a, b, "warm")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := a.Call(ctx, target(b), Request{Type: "block"})
	if !errors.Is(err, ErrUnanswered) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Call = %v, want ErrUnanswered and DeadlineExceeded", err)
	}
	// The handler saw the caller give up: its context ended, so it
	// returned without release.
	waitUntil(t, func() bool { return len(b.Links()) == 1 })
	mustEcho(t, a, b, "after")
}

func TestCallsInFlightAreBounded(t *testing.T) {
	ca := newTestCA(t)
	a := startCallNode(t, ca, "broker-a", nil, func(c *Config) { c.MaxCallsInFlight = 2 })
	hb := newEcho()
	b := startCallNode(t, ca, "broker-b", hb, nil)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := a.Call(testCtx(t), target(b), Request{Type: "block"}); err != nil {
				t.Error(err)
			}
		})
	}
	<-hb.started
	<-hb.started
	_, err := a.Call(testCtx(t), target(b), Request{Type: "echo"})
	if !errors.Is(err, ErrBusy) || errors.Is(err, ErrUnanswered) {
		t.Fatalf("third call = %v, want ErrBusy, never sent", err)
	}
	close(hb.release)
	wg.Wait()
	mustEcho(t, a, b, "room again")
	if got := hb.calls.Load(); got != 3 {
		t.Fatalf("b handled %d calls, want 3 (the refused one never reached it)", got)
	}
}

func TestCallToANodeWithAnotherCertificateIsRefused(t *testing.T) {
	ca := newTestCA(t)
	hb := newEcho()
	b := startCallNode(t, ca, "broker-b", hb, nil)
	// x holds a certificate for broker-x but says it is broker-a.
	x := startCallNode(t, ca, "broker-x", nil, nil)
	x.cfg.NodeID = "broker-a"
	_, err := x.Call(testCtx(t), target(b), Request{Type: "echo"})
	if !errors.Is(err, ErrWrongNode) || errors.Is(err, ErrUnanswered) {
		t.Fatalf("Call = %v, want ErrWrongNode", err)
	}
	// And the other way: a caller asking for broker-b reaches x's
	// listener, whose certificate names broker-x.
	a := startCallNode(t, ca, "broker-a", nil, nil)
	_, err = a.Call(testCtx(t), Target{NodeID: "broker-b", Addr: x.Addr().String()}, Request{Type: "echo"})
	if !errors.Is(err, ErrWrongNode) {
		t.Fatalf("Call = %v, want ErrWrongNode", err)
	}
	if hb.calls.Load() != 0 {
		t.Fatal("a refused caller reached the handler")
	}
}

func TestACallCannotSkipTheHandshake(t *testing.T) {
	ca := newTestCA(t)
	hb := newEcho()
	b := startCallNode(t, ca, "broker-b", hb, nil)
	cr := ca.creds(t, "broker-a")
	tc := &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{ALPN}, Certificates: []tls.Certificate{cr.Cert},
		InsecureSkipVerify: true}
	ctx := testCtx(t)
	qc, err := quic.DialAddr(ctx, b.Addr().String(), tc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer qc.CloseWithError(0, "")
	st, err := qc.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	frame, _ := AppendRequest(nil, Request{Type: "echo"})
	st.Write(frame)
	<-qc.Context().Done()
	if hb.calls.Load() != 0 {
		t.Fatal("a call without a handshake reached the handler")
	}
	b.log.mustContain(t, "refused a peer connection: bad handshake")
}

func TestCallFramesRoundTrip(t *testing.T) {
	req := Request{Type: "fwd_publish", Header: json.RawMessage(`{"a":1}`), Body: []byte{0, 1, 2}}
	b, err := AppendRequest(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	f, err := wire.NewFrameReader(bytes.NewReader(b), 0).Next()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseRequest(f.Flags, f.Payload)
	if err != nil || got.Type != req.Type || string(got.Header) != `{"a":1}` || !bytes.Equal(got.Body, req.Body) {
		t.Fatalf("%+v, %v", got, err)
	}
	if _, err := ParseReply(f.Flags, f.Payload); err == nil {
		t.Fatal("a request parsed as a reply")
	}
	rb, err := AppendReply(nil, Reply{Err: wire.NewError(wire.CodeNotLeader, "elsewhere").WithDetail("node_id", "b")})
	if err != nil {
		t.Fatal(err)
	}
	f, _ = wire.NewFrameReader(bytes.NewReader(rb), 0).Next()
	rep, err := ParseReply(f.Flags, f.Payload)
	if err != nil || rep.Err == nil || rep.Err.Code != wire.CodeNotLeader || rep.Err.Retry != wire.RetryRedirect || rep.Err.Detail["node_id"] != "b" {
		t.Fatalf("%+v, %v", rep, err)
	}
	if _, err := ParseRequest(f.Flags, f.Payload); err == nil {
		t.Fatal("a reply parsed as a request")
	}
	for _, bad := range [][]byte{nil, {0, 0, 0}, {0, 0, 0, 9, '{'}, {0, 0, 0, 2, '{', '}'}, {0, 0, 0, 4, 'n', 'u', 'l', 'l'}} {
		if _, err := ParseRequest(FlagCall, bad); err == nil {
			t.Errorf("ParseRequest(%q) accepted", bad)
		}
	}
	if _, err := ParseRequest(0, b[wire.HeaderLen:]); err == nil {
		t.Error("a frame without FlagCall accepted")
	}
	if _, err := AppendRequest(nil, Request{Type: TypeReply}); err == nil {
		t.Error("a request typed as a reply encoded")
	}
}

func FuzzParseCall(f *testing.F) {
	b, _ := AppendRequest(nil, Request{Type: "fwd_publish", Header: json.RawMessage(`{"a":1}`), Body: []byte("xy")})
	f.Add(FlagCall, b[wire.HeaderLen:])
	b, _ = AppendReply(nil, Reply{Err: wire.NewError(wire.CodeInternal, "x").WithDetail("k", 1)})
	f.Add(FlagCall, b[wire.HeaderLen:])
	f.Add(uint16(0), []byte(`{"type":"x"}`))
	f.Fuzz(func(t *testing.T, flags uint16, payload []byte) {
		if req, err := ParseRequest(flags, payload); err == nil {
			b, err := AppendRequest(nil, req)
			if err != nil {
				t.Fatalf("a parsed request does not encode: %v", err)
			}
			again, err := ParseRequest(FlagCall, b[wire.HeaderLen:])
			if err != nil || again.Type != req.Type || !bytes.Equal(again.Body, req.Body) {
				t.Fatalf("round trip: %+v, %v", again, err)
			}
		}
		if rep, err := ParseReply(flags, payload); err == nil {
			if _, err := AppendReply(nil, rep); err != nil {
				t.Fatalf("a parsed reply does not encode: %v", err)
			}
		}
	})
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCallStreamsGiveTheirCreditBack makes many more calls, one after the
// other and a few at a time, than the streams the other end allows at
// once: each finished call must return its stream's credit.
func TestCallStreamsGiveTheirCreditBack(t *testing.T) {
	ca := newTestCA(t)
	a := startCallNode(t, ca, "broker-a", newEcho(), func(c *Config) { c.MaxCallsInFlight = 4 })
	b := startCallNode(t, ca, "broker-b", newEcho(), func(c *Config) { c.MaxCallsInFlight = 4 })
	body := bytes.Repeat([]byte("x"), 3000) // more than one packet
	for i := range 300 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rep, err := a.Call(ctx, target(b), Request{Type: "echo", Body: body})
		cancel()
		if err != nil || len(rep.Body) != len(body) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 100 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := b.Call(ctx, target(a), Request{Type: "echo", Body: body})
				cancel()
				if err != nil {
					t.Errorf("call %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestACallStreamCarriesOneFrame(t *testing.T) {
	ca := newTestCA(t)
	a := startCallNode(t, ca, "broker-a", nil, nil)
	hb := newEcho()
	b := startCallNode(t, ca, "broker-b", hb, nil)
	l, err := a.Dial(testCtx(t), "broker-b", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.qc.OpenStreamSync(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	frame, _ := AppendRequest(nil, Request{Type: "echo"})
	st.Write(append(frame, frame...))
	st.Close()
	f, err := wire.NewFrameReader(st, 0).Next()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ParseReply(f.Flags, f.Payload)
	if err != nil || rep.Err == nil || rep.Err.Code != wire.CodeInvalidRequest {
		t.Fatalf("%+v, %v", rep, err)
	}
	if hb.calls.Load() != 0 {
		t.Fatal("the handler ran")
	}
}
