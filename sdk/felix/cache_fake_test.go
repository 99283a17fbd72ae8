package felix

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// cacheFake is a minimal broker for the cache pipelining tests. It
// authenticates every stream and hands the stream's requests, in arrival
// order, to a handler the test supplies, so a test decides when and in
// which order answers go out, or how the stream dies.
type cacheFake struct {
	t      testing.TB
	ln     transport.Listener
	pool   *x509.CertPool
	handle func(ps *cacheFakeStream)

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	streams atomic.Int32 // streams authenticated so far

	mu    sync.Mutex
	conns []transport.Conn
	store map[string][]byte
}

// cacheFakeStream is one authenticated stream seen by a handler.
type cacheFakeStream struct {
	fake  *cacheFake
	n     int // 1 for the first stream the fake authenticated
	conn  transport.Conn
	s     transport.Stream
	reqC  chan wire.Message // requests; closed when the client's side ends
	ctx   context.Context
	wrErr error
}

func newCacheFake(t testing.TB, handle func(ps *cacheFakeStream)) *cacheFake {
	t.Helper()
	cert, pool := selfSigned(t)
	tlsConf := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{ALPN}, MinVersion: tls.VersionTLS13}
	ln, err := listenTest(tlsConf, transport.Config{MaxIncomingStreams: 1000, MaxIdleTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &cacheFake{t: t, ln: ln, pool: pool, handle: handle, ctx: ctx, cancel: cancel, store: map[string][]byte{}}
	f.wg.Add(1)
	go f.acceptLoop()
	t.Cleanup(f.Close)
	return f
}

// config returns a client config for this fake using one cache stream.
func (f *cacheFake) config() Config {
	return Config{Addr: f.ln.Addr().String(), RootCAs: f.pool, ServerName: "localhost",
		Tenant: "acme", Token: goodToken, CacheStreams: 1}
}

// connect dials the fake and closes the client when the test ends.
func (f *cacheFake) connect() *Client {
	f.t.Helper()
	c, err := Connect(context.Background(), f.config())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Close drops every connection and waits for the fake's goroutines.
func (f *cacheFake) Close() {
	_ = f.ln.Close()
	f.cancel()
	f.mu.Lock()
	conns := f.conns
	f.conns = nil
	f.mu.Unlock()
	for _, c := range conns {
		_ = c.CloseWithError(0, "fake closed")
	}
	f.wg.Wait()
}

// spawn runs fn on a goroutine Close waits for.
func (f *cacheFake) spawn(fn func()) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		fn()
	}()
}

func (f *cacheFake) acceptLoop() {
	defer f.wg.Done()
	for {
		conn, err := f.ln.Accept(f.ctx)
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns = append(f.conns, conn)
		f.mu.Unlock()
		f.spawn(func() { f.serveConn(conn) })
	}
}

func (f *cacheFake) serveConn(conn transport.Conn) {
	for {
		s, err := conn.AcceptStream(f.ctx)
		if err != nil {
			return
		}
		f.spawn(func() { f.serveStream(conn, s) })
	}
}

func (f *cacheFake) serveStream(conn transport.Conn, s transport.Stream) {
	defer s.CancelRead(0)
	fr := wire.NewFrameReader(s, 0)
	fm, err := fr.Next()
	if err != nil {
		return
	}
	if m, err := wire.ParseMessage(fm.Payload); err != nil {
		return
	} else if _, ok := m.(*wire.Auth); !ok {
		return
	}
	if writeMsg(s, &wire.AuthOK{ServerFeatures: wire.FeatureCacheDelete}) != nil {
		return
	}
	ps := &cacheFakeStream{fake: f, n: int(f.streams.Add(1)), conn: conn, s: s,
		reqC: make(chan wire.Message, 1024), ctx: f.ctx}
	f.spawn(func() { ps.pump(fr) })
	f.handle(ps)
}

// pump reads requests until the client's side ends.
func (ps *cacheFakeStream) pump(fr *wire.FrameReader) {
	defer close(ps.reqC)
	for {
		fm, err := fr.Next()
		if err != nil {
			return
		}
		m, err := wire.ParseMessage(fm.Payload)
		if err != nil {
			return
		}
		select {
		case ps.reqC <- m:
		case <-ps.ctx.Done():
			return
		}
	}
}

// next returns the next request, or false once the stream or fake ended.
func (ps *cacheFakeStream) next() (wire.Message, bool) {
	select {
	case m, ok := <-ps.reqC:
		return m, ok
	case <-ps.ctx.Done():
		return nil, false
	}
}

// collect returns the next n requests, or false if the stream ends first.
func (ps *cacheFakeStream) collect(n int) ([]wire.Message, bool) {
	var out []wire.Message
	for len(out) < n {
		m, ok := ps.next()
		if !ok {
			return out, false
		}
		out = append(out, m)
	}
	return out, true
}

func (ps *cacheFakeStream) send(m wire.Message) {
	if ps.wrErr == nil {
		ps.wrErr = writeMsg(ps.s, m)
	}
}

// answer applies a cache request to the fake's store and sends the reply.
func (ps *cacheFakeStream) answer(m wire.Message) {
	ps.send(ps.fake.apply(m))
}

// serve answers every request at once, in order, until the stream ends.
func (ps *cacheFakeStream) serve() {
	for {
		m, ok := ps.next()
		if !ok {
			return
		}
		ps.answer(m)
	}
}

// apply runs one cache request on the store and returns its answer.
func (f *cacheFake) apply(msg wire.Message) wire.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch m := msg.(type) {
	case *wire.CachePut:
		f.store[m.Key] = m.Value
		return &wire.CacheOK{RequestID: m.RequestID}
	case *wire.CacheGet:
		return &wire.CacheValue{RequestID: m.RequestID, Key: m.Key, Value: f.store[m.Key]}
	case *wire.CacheDelete:
		v := f.store[m.Key]
		delete(f.store, m.Key)
		return &wire.CacheValue{RequestID: m.RequestID, Key: m.Key, Value: v}
	}
	return &wire.Unsupported{RequestType: msg.MessageType()}
}

// cacheKeyID returns the key and request id of a cache request.
func cacheKeyID(msg wire.Message) (string, uint64) {
	switch m := msg.(type) {
	case *wire.CachePut:
		return m.Key, m.RequestID
	case *wire.CacheGet:
		return m.Key, m.RequestID
	case *wire.CacheDelete:
		return m.Key, m.RequestID
	}
	return "", 0
}
