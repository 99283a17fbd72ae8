package broker

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// writerGoroutines lists, in one look and without waiting, the goroutines
// running a subscription's or a watch's writer code. A connection waits
// for each of them before it is done, so none may be left once it is.
func writerGoroutines() []string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, fn := range []string{"(*eventWriter).drain", "(*watchPump).run", "(*watchWriter).alone", "(*eventWriter).step", "(*watchWriter).step", "(*watchWriter).pumpStep"} {
			if strings.Contains(g, fn) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// busyConnection opens a connection with a subscription and a cache watch
// that both have delivered, so that their writers have run.
func busyConnection(t *testing.T, e *env) transport.Conn {
	t.Helper()
	qc := e.dial(0)
	s := e.authed(qc, 0, allFeatures, "stream.publish:*", "stream.subscribe:*", cacheAll)
	sub := e.subscribe(qc, s, "s")
	w, _ := e.watch(qc, s, &wire.CacheWatch{Key: "k", RequestID: 7})
	for i := range 3 {
		s.write(binPublish("s", true, uint64(i+1), numbered(i)))
		if _, ok := s.recv().(*wire.PublishOK); !ok {
			t.Fatalf("publish %d not acked", i)
		}
		cachePut(s, "k", "v")
	}
	checkOrder(t, sub.payloads(3), 3)
	w.changes(3)
	return qc
}

// onlyConnection returns the server's one connection.
func (e *env) onlyConnection() *connection {
	e.t.Helper()
	e.srv.mu.Lock()
	defer e.srv.mu.Unlock()
	if len(e.srv.conns) != 1 {
		e.t.Fatalf("%d connections, want 1", len(e.srv.conns))
	}
	for c := range e.srv.conns {
		return c
	}
	return nil
}

// TestWriterGoroutinesEndWithTheConnection checks that the goroutines a
// connection's writers ran on have all returned once the connection is
// done (the client closed it).
func TestWriterGoroutinesEndWithTheConnection(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "s"})
	qc := busyConnection(t, e)
	c := e.onlyConnection()
	qc.CloseWithError(0, "bye")
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the connection never finished")
	}
	if gs := writerGoroutines(); len(gs) > 0 {
		t.Fatalf("%d writer goroutines outlived the connection:\n%s", len(gs), strings.Join(gs, "\n\n"))
	}
}

// TestWriterGoroutinesEndWithShutdown is the same for a broker shutting
// down under busy connections.
func TestWriterGoroutinesEndWithShutdown(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "s"})
	busyConnection(t, e)
	busyConnection(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.srv.Shutdown(ctx)
	if gs := writerGoroutines(); len(gs) > 0 {
		t.Fatalf("%d writer goroutines outlived Shutdown:\n%s", len(gs), strings.Join(gs, "\n\n"))
	}
}
