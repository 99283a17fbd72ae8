package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tcpProxy relays TCP connections between clients and a server on
// loopback, the TCP transport's counterpart of udpProxy. Faults are
// switched at run time: refuse makes it close new connections at once,
// stall holds every byte in both directions until it is lifted, delay
// holds each chunk that long, and resetAll ends every relayed connection
// with a TCP reset.
type tcpProxy struct {
	ln     net.Listener
	server string

	refuse atomic.Bool
	delay  atomic.Int64 // nanoseconds each chunk is held

	accepted atomic.Int64
	refused  atomic.Int64
	delayed  atomic.Int64 // chunks held back by delay

	mu      sync.Mutex
	stalled chan struct{} // closed while nothing is stalled
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

func newTCPProxy(t *testing.T, server string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := make(chan struct{})
	close(open)
	p := &tcpProxy{ln: ln, server: server, stalled: open, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

// stall holds every byte in both directions until unstall.
func (p *tcpProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stalled:
		p.stalled = make(chan struct{})
	default:
	}
}

func (p *tcpProxy) unstall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stalled:
	default:
		close(p.stalled)
	}
}

// resetAll ends every relayed connection with a reset (SO_LINGER 0).
func (p *tcpProxy) resetAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
}

func (p *tcpProxy) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.unstall()
	p.resetAll()
	p.wg.Wait()
}

// track adds c to the relayed connections; it reports false once the
// proxy is closed.
func (p *tcpProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *tcpProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *tcpProxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			p.refused.Add(1)
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.server, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c) || !p.track(up) {
			c.Close()
			up.Close()
			continue
		}
		p.accepted.Add(1)
		p.wg.Add(2)
		go p.relay(c, up)
		go p.relay(up, c)
	}
}

// relay copies src to dst chunk by chunk, honouring stall and delay, and
// closes both ends when either fails.
func (p *tcpProxy) relay(src, dst net.Conn) {
	defer p.wg.Done()
	defer func() {
		src.Close()
		dst.Close()
		p.untrack(src)
		p.untrack(dst)
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			stalled := p.stalled
			p.mu.Unlock()
			<-stalled
			if d := time.Duration(p.delay.Load()); d > 0 {
				p.delayed.Add(1)
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// stallNowAndThen stalls p for stall every period until ctx ends, and
// counts the stalls.
func stallNowAndThen(ctx context.Context, p *tcpProxy, period, stall time.Duration) *atomic.Int64 {
	var n atomic.Int64
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				p.unstall()
				return
			case <-t.C:
			}
			p.stall()
			n.Add(1)
			select {
			case <-ctx.Done():
			case <-time.After(stall):
			}
			p.unstall()
		}
	}()
	return &n
}

// TestTCPProxyFaults checks the proxy itself against a plain echo server:
// it relays, stalls and resumes, resets, and refuses.
func TestTCPProxyFaults(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var ewg sync.WaitGroup
	t.Cleanup(func() { echo.Close(); ewg.Wait() })
	ewg.Add(1)
	go func() {
		defer ewg.Done()
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			ewg.Add(1)
			go func() { defer ewg.Done(); io.Copy(c, c); c.Close() }()
		}
	}()
	p := newTCPProxy(t, echo.Addr().String())

	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(msg string, within time.Duration) error {
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(within))
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil {
			return err
		}
		if string(got) != msg {
			t.Fatalf("echo %q, want %q", got, msg)
		}
		return nil
	}
	if err := roundTrip("hello", 5*time.Second); err != nil {
		t.Fatalf("relay: %v", err)
	}

	p.stall()
	var ne net.Error
	if err := roundTrip("held", 200*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a stalled proxy delivered: %v", err)
	}
	p.unstall()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "held" {
		t.Fatalf("after unstall: %q, %v", got, err)
	}

	p.resetAll()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(got); err == nil {
		t.Fatal("a reset connection still reads")
	}

	p.refuse.Store(true)
	r, err := net.Dial("tcp", p.addr())
	if err == nil {
		defer r.Close()
		r.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := r.Read(got); err == nil {
			t.Fatal("a refused connection reads")
		}
	}
	if p.refused.Load() == 0 && err == nil {
		t.Fatal("the proxy counted no refusal")
	}
}
