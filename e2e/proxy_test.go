package e2e

import (
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// udpProxy relays datagrams between one client and a server on loopback,
// asking drop for every datagram whether to lose it and delay how long to
// hold it. It is how the e2e tests put loss and latency between a client
// and the real broker.
type udpProxy struct {
	conn    *net.UDPConn
	server  *net.UDPAddr
	drop    func(toServer bool) bool
	delay   func(toServer bool) time.Duration
	dropped atomic.Int64

	mu       sync.Mutex
	client   *net.UDPAddr
	upstream *net.UDPConn
	wg       sync.WaitGroup
	closed   chan struct{}
}

func newUDPProxy(t *testing.T, server string) *udpProxy {
	t.Helper()
	saddr, err := net.ResolveUDPAddr("udp", server)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	up, err := net.DialUDP("udp", nil, saddr)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	p := &udpProxy{conn: conn, server: saddr, upstream: up, closed: make(chan struct{}),
		drop: func(bool) bool { return false }, delay: func(bool) time.Duration { return 0 }}
	p.wg.Add(2)
	go p.clientToServer()
	go p.serverToClient()
	t.Cleanup(p.close)
	return p
}

func (p *udpProxy) addr() string { return p.conn.LocalAddr().String() }

func (p *udpProxy) close() {
	select {
	case <-p.closed:
		return
	default:
	}
	close(p.closed)
	p.conn.Close()
	p.upstream.Close()
	p.wg.Wait()
}

// forward sends b after the configured delay unless it is dropped.
func (p *udpProxy) forward(b []byte, toServer bool, send func([]byte)) {
	if p.drop(toServer) {
		p.dropped.Add(1)
		return
	}
	d := p.delay(toServer)
	if d <= 0 {
		send(b)
		return
	}
	pkt := append([]byte(nil), b...)
	time.AfterFunc(d, func() {
		select {
		case <-p.closed:
		default:
			send(pkt)
		}
	})
}

func (p *udpProxy) clientToServer() {
	defer p.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := p.conn.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.mu.Lock()
		p.client = from
		p.mu.Unlock()
		p.forward(buf[:n], true, func(b []byte) { p.upstream.Write(b) })
	}
}

func (p *udpProxy) serverToClient() {
	defer p.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, err := p.upstream.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.mu.Lock()
		client := p.client
		p.mu.Unlock()
		if client == nil {
			continue
		}
		p.forward(buf[:n], false, func(b []byte) { p.conn.WriteToUDP(b, client) })
	}
}

// lossy returns a drop function that loses the given fraction of datagrams
// in both directions, from a seeded generator so a failure can be replayed.
func lossy(fraction float64, seed uint64) func(bool) bool {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func(bool) bool {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64() < fraction
	}
}
