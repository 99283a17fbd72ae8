package peer

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/transport/dual"
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

func startCallNode(t testing.TB, ca *testCA, id string, h *echo, tweak func(*Config)) *node {
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
	qc, err := dual.Dial(ctx, transport.QUIC, b.Addr().String(), tc, transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer qc.CloseWithError(0, "")
	st, err := qc.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	frame, _ := appendRequest(nil, 1, Request{Type: "echo"})
	st.Write(frame)
	<-qc.Context().Done()
	if hb.calls.Load() != 0 {
		t.Fatal("a call without a handshake reached the handler")
	}
	b.log.mustContain(t, "refused a peer connection: bad handshake")
}

func TestCallFramesRoundTrip(t *testing.T) {
	parse := func(b []byte) (callFrame, error) {
		t.Helper()
		f, err := wire.NewFrameReader(bytes.NewReader(b), 0).Next()
		if err != nil {
			t.Fatal(err)
		}
		return parseCallFrame(f.Flags, f.Payload)
	}
	req := Request{Type: "fwd_publish", Header: json.RawMessage(`{"a":1}`), Body: []byte{0, 1, 2}}
	b, err := appendRequest(nil, 7, req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parse(b)
	if err != nil || got.kind != frameRequest || got.id != 7 || got.req.Type != req.Type || string(got.req.Header) != `{"a":1}` || !bytes.Equal(got.req.Body, req.Body) {
		t.Fatalf("%+v, %v", got, err)
	}
	rb, err := appendReply(nil, 1<<40, Reply{Err: wire.NewError(wire.CodeNotLeader, "elsewhere").WithDetail("node_id", "b")})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := parse(rb)
	if err != nil || rep.kind != frameReply || rep.id != 1<<40 || rep.rep.Err == nil || rep.rep.Err.Code != wire.CodeNotLeader ||
		rep.rep.Err.Retry != wire.RetryRedirect || rep.rep.Err.Detail["node_id"] != "b" {
		t.Fatalf("%+v, %v", rep, err)
	}
	c, err := parse(appendCancel(nil, 9))
	if err != nil || c.kind != frameCancel || c.id != 9 {
		t.Fatalf("%+v, %v", c, err)
	}
	// A request with a reply's header, a reply with a request's, and
	// headers that do not decode keep their kind and id (so a request
	// can be refused by id) but are refused.
	bad := func(kind byte, rest []byte) []byte {
		return append(append([]byte{kind}, 0, 0, 0, 0, 0, 0, 0, 5), rest...)
	}
	for _, p := range [][]byte{
		bad(frameRequest, nil), bad(frameRequest, []byte{0, 0}), bad(frameRequest, []byte{0, 1, 'x', 0, 0, 0, 9}),
		bad(frameRequest, append([]byte{0, 10}, TypeReply...)), bad(frameReply, []byte{0, 0, 0, 0}),
		bad(frameReply, []byte{0, 0, 0, 0, 0, 0, 0, 1, '{'}),
	} {
		if f, err := parseCallFrame(FlagCall, p); err == nil || f.id != 5 || f.kind != p[0] {
			t.Errorf("parseCallFrame(%q) = %+v, %v", p, f, err)
		}
	}
	for _, p := range [][]byte{nil, {1, 0, 0}, bad(9, nil), bad(frameCancel, []byte{1})} {
		if _, err := parseCallFrame(FlagCall, p); err == nil {
			t.Errorf("parseCallFrame(%q) accepted", p)
		}
	}
	if _, err := parseCallFrame(0, b[wire.HeaderLen:]); err == nil {
		t.Error("a frame without FlagCall accepted")
	}
	if _, err := appendRequest(nil, 1, Request{Type: TypeReply}); err == nil {
		t.Error("a request typed as a reply encoded")
	}
}

func FuzzParseCall(f *testing.F) {
	b, _ := appendRequest(nil, 3, Request{Type: "fwd_publish", Header: json.RawMessage(`{"a":1}`), Body: []byte("xy")})
	f.Add(FlagCall, b[wire.HeaderLen:])
	b, _ = appendReply(nil, 4, Reply{Err: wire.NewError(wire.CodeInternal, "x").WithDetail("k", 1)})
	f.Add(FlagCall, b[wire.HeaderLen:])
	f.Add(FlagCall, appendCancel(nil, 5)[wire.HeaderLen:])
	f.Add(uint16(0), []byte(`{"type":"x"}`))
	f.Fuzz(func(t *testing.T, flags uint16, payload []byte) {
		cf, err := parseCallFrame(flags, payload)
		if err != nil {
			return
		}
		var b []byte
		switch cf.kind {
		case frameRequest:
			b, err = appendRequest(nil, cf.id, cf.req)
		case frameReply:
			b, err = appendReply(nil, cf.id, cf.rep)
		case frameCancel:
			b = appendCancel(nil, cf.id)
		default:
			t.Fatalf("kind %d parsed", cf.kind)
		}
		if err != nil {
			t.Fatalf("a parsed frame does not encode: %v", err)
		}
		again, err := parseCallFrame(FlagCall, b[wire.HeaderLen:])
		if err != nil || again.kind != cf.kind || again.id != cf.id || again.req.Type != cf.req.Type ||
			!bytes.Equal(again.req.Body, cf.req.Body) || !bytes.Equal(again.rep.Body, cf.rep.Body) {
			t.Fatalf("round trip: %+v, %v", again, err)
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

// TestCallsShareAFewStreams makes many calls at once and one after the
// other: they travel on at most maxCallStreams streams of the link.
func TestCallsShareAFewStreams(t *testing.T) {
	ca := newTestCA(t)
	a := startCallNode(t, ca, "broker-a", nil, nil)
	b := startCallNode(t, ca, "broker-b", newEcho(), nil)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range 50 {
				if _, err := a.Call(testCtx(t), target(b), Request{Type: "echo", Body: []byte{byte(i)}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	a.mu.Lock()
	l := a.dialed["broker-b"].link
	a.mu.Unlock()
	l.cmu.Lock()
	n := len(l.out)
	l.cmu.Unlock()
	if n < 1 || n > maxCallStreams {
		t.Fatalf("%d call streams", n)
	}
}

// TestABadRequestIsRefusedByItsID sends, on a call stream of a
// handshaken link, a request that does not decode and then a good
// one: the first is refused invalid_request, the second answered, on the
// same stream.
func TestABadRequestIsRefusedByItsID(t *testing.T) {
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
	bad := wire.FrameHeader{Flags: FlagCall, Length: callPrefix + 3}.Append(nil)
	bad = append(bad, frameRequest, 0, 0, 0, 0, 0, 0, 0, 1, 0, 9, 'x') // a type longer than the frame
	good, _ := appendRequest(nil, 2, Request{Type: "echo"})
	st.Write(append(bad, good...))
	fr := wire.NewFrameReader(st, 0)
	for _, want := range []struct {
		id  uint64
		bad bool
	}{{1, true}, {2, false}} {
		f, err := fr.Next()
		if err != nil {
			t.Fatal(err)
		}
		cf, err := parseCallFrame(f.Flags, f.Payload)
		if err != nil || cf.kind != frameReply || cf.id != want.id || (cf.rep.Err != nil) != want.bad ||
			(want.bad && cf.rep.Err.Code != wire.CodeInvalidRequest) {
			t.Fatalf("reply %+v, %v; want id %d refused %v", cf, err, want.id, want.bad)
		}
	}
	if hb.calls.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", hb.calls.Load())
	}
}

// TestABrokenStreamEndsItsCallsUnanswered breaks the call stream a call
// waits on: the call ends unanswered, and the next call opens another
// stream and is answered.
func TestABrokenStreamEndsItsCallsUnanswered(t *testing.T) {
	ca := newTestCA(t)
	a := startCallNode(t, ca, "broker-a", nil, nil)
	hb := newEcho()
	b := startCallNode(t, ca, "broker-b", hb, nil)
	mustEcho(t, a, b, "warm")
	errC := make(chan error, 1)
	go func() {
		_, err := a.Call(testCtx(t), target(b), Request{Type: "block"})
		errC <- err
	}()
	<-hb.started
	a.mu.Lock()
	l := a.dialed["broker-b"].link
	a.mu.Unlock()
	l.cmu.Lock()
	streams := slices.Clone(l.out)
	l.cmu.Unlock()
	for _, cs := range streams {
		cs.breakWith(errors.New("broken by the test"))
	}
	if err := <-errC; !errors.Is(err, ErrUnanswered) {
		t.Fatalf("Call = %v, want ErrUnanswered", err)
	}
	mustEcho(t, a, b, "again")
	close(hb.release)
}

// BenchmarkCallRoundTrip measures one call at a time with a small header
// and a 256-byte body, over each transport (call/quic, call/tcp), against
// the floor each transport sets on the same TLS settings: an echo of as
// many bytes on one long-lived stream (quic/stream, tcp/stream), and on a
// new stream per exchange (…/stream-per-call), the design calls had
// before they shared streams.
func BenchmarkCallRoundTrip(b *testing.B) {
	ca := newTestCA(b)
	nb := startCallNode(b, ca, "broker-b", newEcho(), nil)
	ctx := testCtx(b)
	hdr := json.RawMessage(`{"token":"t","stream":"s","shard":1}`)
	req := Request{Type: "echo", Header: hdr, Body: make([]byte, 256)}
	var na *node
	for _, kind := range []transport.Kind{transport.QUIC, transport.TCP} {
		na = startCallNode(b, ca, "broker-a", nil, func(c *Config) { c.Transport = kind })
		if _, err := na.Call(ctx, target(nb), req); err != nil {
			b.Fatal(err)
		}
		b.Run("call/"+string(kind), func(b *testing.B) {
			for b.Loop() {
				if _, err := na.Call(ctx, target(nb), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}

	lns, err := listen("127.0.0.1:0", nb.serverTLS(), nb.transportConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer closeListeners(lns)
	for i, kind := range []transport.Kind{transport.QUIC, transport.TCP} {
		benchEcho(b, ctx, kind, lns[i], na.Endpoint)
	}
}

// closeListeners closes every listener of lns.
func closeListeners(lns []transport.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}

// benchEcho measures echoes of a call's size over kind through ln: on one
// long-lived stream (kind/stream) and on a new stream per exchange
// (kind/stream-per-call).
func benchEcho(b *testing.B, ctx context.Context, kind transport.Kind, ln transport.Listener, na *Endpoint) {
	go func() {
		qc, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		for {
			st, err := qc.AcceptStream(ctx)
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 300)
				for {
					if _, err := io.ReadFull(st, buf); err != nil {
						st.Close()
						return
					}
					if _, err := st.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	var refusal lockedErr
	qc, err := dual.Dial(ctx, kind, ln.Addr().String(), na.clientTLS("broker-b", &refusal), na.transportConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer qc.CloseWithError(0, "")
	buf := make([]byte, 300)
	exchange := func(st transport.Stream) {
		if _, err := st.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(st, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.Run(string(kind)+"/stream", func(b *testing.B) {
		st, err := qc.OpenStreamSync(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		for b.Loop() {
			exchange(st)
		}
	})
	b.Run(string(kind)+"/stream-per-call", func(b *testing.B) {
		for b.Loop() {
			st, err := qc.OpenStreamSync(ctx)
			if err != nil {
				b.Fatal(err)
			}
			exchange(st)
			st.Close()
		}
	})
}
