package felix

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// eventSource is what Subscription and ClusterSubscription share.
type eventSource interface {
	Next(ctx context.Context) (Event, error)
}

// next calls Next with a generous timeout.
func next(t *testing.T, s eventSource) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return ev
}

// nextErr waits for Next to fail and returns the error.
func nextErr(t *testing.T, s eventSource) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			return err
		}
		t.Fatalf("unexpected event %q", ev.Payload)
	}
}

func TestSubscribeDeliversInOrder(t *testing.T) {
	for _, m := range []struct {
		name   string
		flags  uint16
		binary bool
	}{{"binary-shared", binaryFlags, true}, {"json", 0, false}} {
		t.Run(m.name, func(t *testing.T) {
			fb := newFakeBroker(t, fakeOpts{flags: m.flags})
			c := connect(t, fb)
			sub, err := c.Subscribe(context.Background(), "ns", "events")
			if err != nil {
				t.Fatal(err)
			}
			fs := fb.nextSubscription()
			if sub.ID() != fs.id {
				t.Fatalf("id %d, fake says %d", sub.ID(), fs.id)
			}
			for b := range 5 {
				fs.send(t, uint64(100+3*b), fmt.Appendf(nil, "e%d", 3*b), fmt.Appendf(nil, "e%d", 3*b+1), fmt.Appendf(nil, "e%d", 3*b+2))
			}
			fs.sendJSON(t, 115, []byte("e15"))
			for i := range 16 {
				ev := next(t, sub)
				if string(ev.Payload) != fmt.Sprintf("e%d", i) || !ev.HasOffset || ev.Offset != uint64(100+i) ||
					ev.Namespace != "ns" || ev.Stream != "events" {
					t.Fatalf("event %d: %+v", i, ev)
				}
			}
		})
	}
}

func TestSubscribeHelloBeforeSubscribed(t *testing.T) {
	gate := make(chan struct{})
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, gate: gate})
	c := connect(t, fb)
	waiting := make(chan struct{}, 1)
	c.router.mu.Lock()
	c.router.hook = func(string) { waiting <- struct{}{} }
	c.router.mu.Unlock()
	type result struct {
		sub *Subscription
		err error
	}
	resC := make(chan result, 1)
	go func() {
		sub, err := c.Subscribe(context.Background(), "ns", "early")
		resC <- result{sub, err}
	}()
	<-waiting // the stream is parked before the client has read subscribed
	close(gate)
	res := <-resC
	if res.err != nil {
		t.Fatal(res.err)
	}
	fs := fb.nextSubscription()
	fs.send(t, 0, []byte("hello-first"))
	if ev := next(t, res.sub); string(ev.Payload) != "hello-first" {
		t.Fatalf("got %q", ev.Payload)
	}
}

func TestSubscribeHelloAfterSubscribed(t *testing.T) {
	gate := make(chan struct{})
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, gate: gate, helloLate: true})
	c := connect(t, fb)
	sub, err := c.Subscribe(context.Background(), "ns", "late")
	if err != nil {
		t.Fatal(err)
	}
	close(gate) // only now does the fake open the event stream
	fs := fb.nextSubscription()
	fs.send(t, 0, []byte("after"))
	if ev := next(t, sub); string(ev.Payload) != "after" {
		t.Fatalf("got %q", ev.Payload)
	}
}

func TestNextIsCancelSafe(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	sub, fs := subscribeFake(t, c, fb)

	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sub.Next(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	fs.send(t, 0, []byte("a"))
	if ev := next(t, sub); string(ev.Payload) != "a" {
		t.Fatalf("got %q", ev.Payload)
	}

	ctx, cancel := context.WithCancel(context.Background())
	errC := make(chan error, 1)
	go func() {
		_, err := sub.Next(ctx)
		errC <- err
	}()
	cancel()
	if err := <-errC; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	fs.send(t, 1, []byte("b"), []byte("c"))
	for _, want := range []string{"b", "c"} {
		if ev := next(t, sub); string(ev.Payload) != want {
			t.Fatalf("got %q, want %q", ev.Payload, want)
		}
	}

	// A ctx that never ends, after one that did, reads normally: the
	// deadline the ended one set is cleared.
	fs.send(t, 3, []byte("d"))
	ev, err := sub.Next(context.Background())
	if err != nil || string(ev.Payload) != "d" {
		t.Fatalf("got %q, %v", ev.Payload, err)
	}
}

// A ctx that ends while Next is inside a frame, half of it received, loses
// nothing: the next call reads the frame whole.
func TestNextCancelledInsideAFrame(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	sub, fs := subscribeFake(t, c, fb)
	frame := wire.AppendSharedEventBatchFrame(nil, wire.FlagBinaryEventBatchShared|wire.FlagEventBatchOffsets,
		&wire.EventBatchHeader{BaseOffset: 7}, [][]byte{[]byte("first"), []byte("second")})
	for cut := 1; cut < len(frame); cut += 5 {
		if _, err := fs.es.Write(frame[:cut]); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := sub.Next(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cut at %d: Next on half a frame: %v", cut, err)
		}
		if _, err := fs.es.Write(frame[cut:]); err != nil {
			t.Fatal(err)
		}
		for i, want := range []string{"first", "second"} {
			ev := next(t, sub)
			if string(ev.Payload) != want || ev.Offset != 7+uint64(i) {
				t.Fatalf("cut at %d: got %q at %d", cut, ev.Payload, ev.Offset)
			}
		}
	}
}

// Next called with deadlines far shorter than the stream takes to deliver
// a batch, so that most calls end inside a frame, still returns every
// event, in order, exactly once.
func TestNextWithShortDeadlinesLosesNothing(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	sub, fs := subscribeFake(t, c, fb)
	const batches, per = 60, 8
	payload := func(n int) []byte {
		p := make([]byte, 4+n*997%9000)
		binary.BigEndian.PutUint32(p, uint32(n))
		return p
	}
	sendErr := make(chan error, 1)
	go func() {
		for b := range batches {
			var ps [][]byte
			for i := range per {
				ps = append(ps, payload(b*per+i))
			}
			frame := wire.AppendSharedEventBatchFrame(nil, wire.FlagBinaryEventBatchShared|wire.FlagEventBatchOffsets,
				&wire.EventBatchHeader{BaseOffset: uint64(b * per)}, ps)
			// Dribble the frame out so that reads stop inside it.
			for len(frame) > 0 {
				n := min(len(frame), 1500)
				if _, err := fs.es.Write(frame[:n]); err != nil {
					sendErr <- err
					return
				}
				frame = frame[n:]
				time.Sleep(200 * time.Microsecond)
			}
		}
		sendErr <- nil
	}()
	timeouts := 0
	deadline := time.Now().Add(30 * time.Second)
	for want := 0; want < batches*per; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d events in 30s", want, batches*per)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Microsecond)
		ev, err := sub.Next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			timeouts++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Offset != uint64(want) || !bytes.Equal(ev.Payload, payload(want)) {
			t.Fatalf("event %d: offset %d, %d bytes", want, ev.Offset, len(ev.Payload))
		}
		want++
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
	if timeouts == 0 {
		t.Fatal("no Next timed out: the test did not exercise interrupted reads")
	}
	t.Logf("%d calls timed out", timeouts)
}

func TestConnectionKilledEndsSubscription(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	sub, fs := subscribeFake(t, c, fb)
	fs.send(t, 0, []byte("1"), []byte("2"))
	if ev := next(t, sub); string(ev.Payload) != "1" {
		t.Fatalf("got %q", ev.Payload)
	}
	// A subscription still waiting for its stream ends too.
	fb.Kill()
	<-c.conn.Context().Done()
	if ev := next(t, sub); string(ev.Payload) != "2" {
		t.Fatalf("queued event lost: %q", ev.Payload)
	}
	if err := nextErr(t, sub); !errors.Is(err, ErrSubscriptionLost) {
		t.Fatalf("got %v", err)
	}
}

func TestSubscriptionEndsWhenBrokerEndsStream(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	sub, fs := subscribeFake(t, c, fb)
	fs.send(t, 0, []byte("x"))
	_ = fs.es.Close()
	next(t, sub)
	if err := nextErr(t, sub); !errors.Is(err, ErrSubscriptionLost) {
		t.Fatalf("got %v", err)
	}
}

func TestBrokerErrorOnEventStream(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	sub, fs := subscribeFake(t, c, fb)
	if err := writeMsg(fs.es, wire.NewError(wire.CodeNotFound, "stream deleted").ErrorMessage(true)); err != nil {
		t.Fatal(err)
	}
	be := asBroker(t, nextErr(t, sub))
	if be.Code != wire.CodeNotFound {
		t.Fatalf("got %+v", be)
	}
}

func TestSubscribeRefused(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	_, err := c.SubscribeFrom(context.Background(), "missing", "s", SubscribeOptions{Start: Earliest(), Shard: 2})
	if be := asBroker(t, err); be.Code != wire.CodeNotFound {
		t.Fatalf("got %+v", be)
	}
}

func TestSubscriptionClose(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	sub, fs := subscribeFake(t, c, fb)
	fs.send(t, 0, []byte("queued"))
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v", err)
	}
	other, err := c.Subscribe(context.Background(), "ns", "s2")
	if err != nil {
		t.Fatal(err)
	}
	fb.nextSubscription()
	c.Close()
	if err := nextErr(t, other); !errors.Is(err, ErrClosed) {
		t.Fatalf("after client close: %v", err)
	}
}

// Client.Close wakes a Next blocked in its read, and what was read is
// still returned.
func TestBlockedReaderDoesNotBlockClose(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c, err := Connect(context.Background(), fb.config())
	if err != nil {
		t.Fatal(err)
	}
	sub, fs := subscribeFake(t, c, fb)
	fs.send(t, 0, []byte("1"), []byte("2"), []byte("3"))
	if ev := next(t, sub); string(ev.Payload) != "1" {
		t.Fatalf("first event %q", ev.Payload)
	}
	blocked := make(chan error, 1)
	other, _ := subscribeFake(t, c, fb)
	go func() { _, err := other.Next(context.Background()); blocked <- err }()
	// Close only once that Next is inside its read of the event stream: a
	// Next that started after Close would return ErrClosed without reading.
	read := "(*ReceiveStream).Read(" // quic-go's
	if testTransport == transport.TCP {
		read = "mux.(*stream).Read("
	}
	waitGoroutine(t, "(*streamLife[...]).fill(", read)
	c.Close()
	select {
	case err := <-blocked:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("a Next blocked in its read: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Client.Close left a Next blocked in its read")
	}
	// What was read is still returned, then ErrClosed.
	for _, want := range []string{"2", "3"} {
		ev, err := sub.Next(context.Background())
		if err != nil || string(ev.Payload) != want {
			t.Fatalf("after Close: %q, %v; want the event %q already read", ev.Payload, err, want)
		}
	}
	if _, err := sub.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("after the events already read: %v, want ErrClosed", err)
	}
}

// waitGoroutine waits until a goroutine the running test started (its
// stack names the test's function) has every one of frames on its stack
// and is parked, not running: how a test knows a call is blocked where it
// means to interrupt it, without sleeping and hoping. It fails the test
// after 10 seconds.
func waitGoroutine(t *testing.T, frames ...string) {
	t.Helper()
	owner := "." + t.Name() + ".func"
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		buf = buf[:cap(buf)]
		n := runtime.Stack(buf, true)
		if n == len(buf) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			head, _, _ := strings.Cut(g, "\n")
			parked := !strings.Contains(head, "[running") && !strings.Contains(head, "[runnable")
			if parked && strings.Contains(g, owner) && containsAll(g, frames) {
				return
			}
		}
		if time.Now().After(deadline) {
			var mine []string
			for _, g := range strings.Split(string(buf[:n]), "\n\n") {
				if strings.Contains(g, owner) {
					mine = append(mine, g)
				}
			}
			t.Fatalf("no goroutine of %s parked in %v within 10s; the test's goroutines:\n%s", t.Name(), frames, strings.Join(mine, "\n\n"))
		}
		time.Sleep(time.Millisecond)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// subscribeFake subscribes c to the fake broker's stream ns/s and returns
// the subscription with the fake's side of it.
func subscribeFake(t *testing.T, c *Client, fb *fakeBroker) (*Subscription, *fakeSub) {
	t.Helper()
	sub, err := c.Subscribe(context.Background(), "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	return sub, fb.nextSubscription()
}
