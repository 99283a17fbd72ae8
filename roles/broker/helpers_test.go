package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/internal/testcert"
	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/transport/dual"
	"github.com/felixmq/felix/wire"
)

const testTenant = "acme"

// fakeSource is an in-memory catalogsync.Source.
type fakeSource struct {
	mu         sync.Mutex
	tenants    []wire.Tenant
	namespaces []wire.Namespace
	streams    []wire.StreamSpec
	caches     []wire.CacheSpec
	jwks       []byte

	// The revocations feed: a change log (seq from 1), or, with
	// revUnknown, a control plane that does not know the kind.
	revLog     []wire.CatalogItem
	revUnknown bool
	passes     int    // snapshots and changes of the tenants kind served
	cluster    string // named on every page
}

// become makes the source answer with another cluster's catalog of
// streams from now on, as a control plane that came back empty (or a
// wrong URL) would.
func (f *fakeSource) become(cluster string, streams ...wire.StreamSpec) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cluster, f.streams = cluster, streams
}

// revoke appends a revocation to the feed.
func (f *fakeSource) revoke(r wire.Revocation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revLog = append(f.revLog, wire.CatalogItem{Seq: uint64(len(f.revLog) + 1), Op: wire.OpPut, Revocation: &r})
}

// tenantPasses counts the sync passes that reached the tenants kind.
func (f *fakeSource) tenantPasses() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.passes
}

// revPage serves the revocations feed: the latest item per principal for
// a snapshot (since < 0), the items after since otherwise.
func (f *fakeSource) revPage(since int64) (*wire.CatalogPage, error) {
	if f.revUnknown {
		return nil, wire.NewError(wire.CodeNotFound, "unknown catalog kind")
	}
	p := &wire.CatalogPage{Kind: wire.KindRevocations, Seq: uint64(len(f.revLog))}
	if since >= 0 {
		p.Items = append(p.Items, f.revLog[min(int(since), len(f.revLog)):]...)
		return p, nil
	}
	latest := map[string]wire.CatalogItem{}
	for _, it := range f.revLog {
		latest[it.Revocation.TenantID+"/"+it.Revocation.Subject] = it
	}
	for _, it := range latest {
		p.Items = append(p.Items, it)
	}
	return p, nil
}

func (f *fakeSource) Snapshot(_ context.Context, kind wire.CatalogKind) (*wire.CatalogPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := &wire.CatalogPage{Kind: kind, Seq: 1, ClusterID: f.cluster}
	switch kind {
	case wire.KindRevocations:
		return f.revPage(-1)
	case wire.KindTenants:
		f.passes++
		for i := range f.tenants {
			p.Items = append(p.Items, wire.CatalogItem{Seq: 1, Op: wire.OpPut, Tenant: &f.tenants[i]})
		}
	case wire.KindNamespaces:
		for i := range f.namespaces {
			p.Items = append(p.Items, wire.CatalogItem{Seq: 1, Op: wire.OpPut, Namespace: &f.namespaces[i]})
		}
	case wire.KindStreams:
		for i := range f.streams {
			p.Items = append(p.Items, wire.CatalogItem{Seq: 1, Op: wire.OpPut, Stream: &f.streams[i]})
		}
	case wire.KindCaches:
		for i := range f.caches {
			p.Items = append(p.Items, wire.CatalogItem{Seq: 1, Op: wire.OpPut, Cache: &f.caches[i]})
		}
	}
	return p, nil
}

func (f *fakeSource) Changes(_ context.Context, kind wire.CatalogKind, since uint64) (*wire.CatalogPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch kind {
	case wire.KindRevocations:
		return f.revPage(int64(since))
	case wire.KindTenants:
		f.passes++
	}
	return &wire.CatalogPage{Kind: kind, Seq: since, ClusterID: f.cluster}, nil
}

func (f *fakeSource) JWKS(context.Context) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.jwks, nil
}

// env is one broker under test with its signer and trust.
type env struct {
	t      testing.TB
	srv    *Server
	signer *auth.Signer
	roots  *x509.CertPool
	src    *fakeSource
}

func testConfig() Config {
	c := DefaultConfig()
	c.ListenAddr = "127.0.0.1:0"
	c.CatalogSyncInterval = 50 * time.Millisecond
	return c
}

// startEnv starts a broker whose catalog has tenant acme, namespace prod,
// the given streams (policy drop_new unless set) and cache "sessions".
func startEnv(t testing.TB, cfg Config, streams ...wire.StreamSpec) *env {
	t.Helper()
	return startEnvWith(t, cfg, nil, streams...)
}

// startEnvWith is startEnv with a hook that adjusts the catalog before
// the broker starts.
func startEnvWith(t testing.TB, cfg Config, prep func(*fakeSource), streams ...wire.StreamSpec) *env {
	t.Helper()
	return startEnvClock(t, cfg, prep, nil, streams...)
}

// testSigner is a fresh token signer and the JWKS that verifies it.
func testSigner(t testing.TB) (*auth.Signer, []byte) {
	t.Helper()
	key, err := auth.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	signer := auth.NewSigner(key)
	jwks, err := signer.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	return signer, jwks
}

// startEnvClock is startEnvWith whose broker checks token times against
// now (nil: the real clock).
func startEnvClock(t testing.TB, cfg Config, prep func(*fakeSource), now func() time.Time, streams ...wire.StreamSpec) *env {
	t.Helper()
	signer, jwks := testSigner(t)
	src := &fakeSource{
		tenants:    []wire.Tenant{{TenantID: testTenant}, {TenantID: "other"}},
		namespaces: []wire.Namespace{{TenantID: testTenant, Namespace: "prod"}, {TenantID: "other", Namespace: "prod"}},
		caches:     []wire.CacheSpec{{TenantID: testTenant, Namespace: "prod", Cache: "sessions"}},
		jwks:       jwks,
	}
	for _, s := range streams {
		if s.TenantID == "" {
			s.TenantID, s.Namespace = testTenant, "prod"
		}
		if s.Shards == 0 {
			s.Shards = 1
		}
		src.streams = append(src.streams, s)
	}
	if prep != nil {
		prep(src)
	}
	tlsCfg, roots := testTLS(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	deps := Deps{Catalog: src, TLS: tlsCfg, Logger: log}
	if now != nil {
		deps.Verifier = auth.NewVerifier(auth.VerifierOptions{Fetch: src.JWKS, Now: now})
	}
	return startServer(t, cfg, deps, signer, roots, src)
}

// startServer starts a broker with deps, stopped at the end of the test,
// once its first catalog sync is done.
func startServer(t testing.TB, cfg Config, deps Deps, signer *auth.Signer, roots *x509.CertPool, src *fakeSource) *env {
	t.Helper()
	srv, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, srv: srv, signer: signer, roots: roots, src: src}
	t.Cleanup(func() { e.shutdown() })
	select {
	case <-srv.Synced():
	case <-ctx.Done():
		t.Fatal("catalog never synced")
	}
	return e
}

func (e *env) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return e.srv.Shutdown(ctx)
}

// testTLS is a broker's TLS configuration with a self-signed certificate
// for 127.0.0.1 and localhost, and the roots a client trusts it with.
func testTLS(t testing.TB) (*tls.Config, *x509.CertPool) {
	srv, cli := testcert.Pair(t, ALPN)
	return srv, cli.RootCAs
}

// token mints a token for acme with perms.
func (e *env) token(perms ...string) string {
	return e.tokenFor(testTenant, time.Now().Add(time.Hour), perms...)
}

func (e *env) tokenFor(tenant string, exp time.Time, perms ...string) string {
	e.t.Helper()
	return e.tokenAs("tester", tenant, exp.Add(-2*time.Hour), exp, perms...)
}

// tokenAs mints a token for subject of tenant, issued at iat.
func (e *env) tokenAs(subject, tenant string, iat, exp time.Time, perms ...string) string {
	e.t.Helper()
	tok, err := e.signer.Sign(auth.Claims{Subject: subject, TenantID: tenant, Perms: perms, Expiry: exp, IssuedAt: iat})
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// dial connects a test client; window bounds its per-stream receive
// window (0 for quic-go's default).
func (e *env) dial(window uint64) transport.Conn {
	e.t.Helper()
	tcfg := transport.Config{MaxIdleTimeout: 10 * time.Second, KeepAlive: time.Second}
	if window > 0 {
		tcfg.InitialStreamReceiveWindow, tcfg.MaxStreamReceiveWindow = window, window
		tcfg.InitialConnReceiveWindow, tcfg.MaxConnReceiveWindow = 64<<20, 64<<20
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	qc, err := dual.Dial(ctx, testTransport, e.srv.Addr().String(), &tls.Config{RootCAs: e.roots, ServerName: "127.0.0.1", NextProtos: []string{ALPN}}, tcfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { qc.CloseWithError(0, "test done") })
	return qc
}

// tstream is a test client's control stream.
type tstream struct {
	t  testing.TB
	st transport.Stream
	fr *wire.FrameReader
}

func openStream(t testing.TB, qc transport.Conn) *tstream {
	t.Helper()
	st, err := qc.OpenStreamSync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &tstream{t: t, st: st, fr: wire.NewFrameReader(st, 0)}
}

func (s *tstream) write(b []byte) {
	s.t.Helper()
	if _, err := s.st.Write(b); err != nil {
		s.t.Fatal(err)
	}
}

func (s *tstream) send(m wire.Message) {
	s.t.Helper()
	b, err := wire.AppendMessageFrame(nil, m)
	if err != nil {
		s.t.Fatal(err)
	}
	s.write(b)
}

// next reads the next frame, or returns the read error.
func (s *tstream) next() (wire.Frame, error) {
	s.st.SetReadDeadline(time.Now().Add(20 * time.Second))
	return s.fr.NextOwned()
}

// recv reads the next frame as a JSON message.
func (s *tstream) recv() wire.Message {
	s.t.Helper()
	f, err := s.next()
	if err != nil {
		s.t.Fatalf("read: %v", err)
	}
	if f.Flags != 0 {
		s.t.Fatalf("got a binary frame with flags %#x", f.Flags)
	}
	m, err := wire.ParseMessage(f.Payload)
	if err != nil {
		s.t.Fatal(err)
	}
	return m
}

// expectEnd checks the broker ended its side of the stream.
func (s *tstream) expectEnd() {
	s.t.Helper()
	_, err := s.next()
	if err == nil {
		s.t.Fatal("stream still open: got another frame")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		s.t.Fatalf("stream still open: %v", err)
	}
}

const allFeatures = wire.FeatureErrorCodes | wire.FeatureUnsupported

func (s *tstream) auth(tenant, token string, flags uint16, features uint64) wire.Message {
	s.t.Helper()
	s.send(&wire.Auth{TenantID: tenant, Token: token, ClientFlags: flags, Features: features})
	return s.recv()
}

// authed opens a stream and authenticates it, failing the test on refusal.
func (e *env) authed(qc transport.Conn, flags uint16, features uint64, perms ...string) *tstream {
	e.t.Helper()
	s := openStream(e.t, qc)
	m := s.auth(testTenant, e.token(perms...), flags, features)
	ok, isOK := m.(*wire.AuthOK)
	if !isOK {
		e.t.Fatalf("auth refused: %#v", m)
	}
	if ok.ServerFlags != ServerFlags || ok.ServerFeatures != e.srv.serverFeatures() {
		e.t.Fatalf("auth_ok advertises %#x/%#x", ok.ServerFlags, ok.ServerFeatures)
	}
	return s
}

func binPublish(stream string, acked bool, reqID uint64, payloads ...[]byte) []byte {
	p := wire.BinaryPublish{RequestID: reqID, TenantID: testTenant, Namespace: "prod", Stream: stream, Payloads: payloads}
	return p.AppendFrame(nil, wire.PublishFlags(acked, false))
}

// expectError checks m is an error (or publish_error) with code.
func expectCode(t testing.TB, m wire.Message, code wire.Code) *wire.Error {
	t.Helper()
	var e *wire.Error
	switch x := m.(type) {
	case *wire.ErrorMsg:
		e = x.Err()
	case *wire.PublishError:
		e = x.Err()
	default:
		t.Fatalf("want error %s, got %T %#v", code, m, m)
	}
	if e.Code != code {
		t.Fatalf("want code %s, got %v", code, e)
	}
	return e
}

// tsub is a test subscription's event stream.
type tsub struct {
	t  testing.TB
	rs transport.ReceiveStream
	fr *wire.FrameReader
	id uint64
}

// subscribe subscribes on s and accepts the event stream.
func (e *env) subscribe(qc transport.Conn, s *tstream, stream string) *tsub {
	e.t.Helper()
	ts, _ := e.subscribeWith(qc, s, &wire.Subscribe{TenantID: testTenant, Namespace: "prod", Stream: stream})
	return ts
}

// subscribeWith sends req on s, accepts the event stream and returns it
// with the subscribed answer.
func (e *env) subscribeWith(qc transport.Conn, s *tstream, req *wire.Subscribe) (*tsub, *wire.Subscribed) {
	e.t.Helper()
	s.send(req)
	m := s.recv()
	sd, ok := m.(*wire.Subscribed)
	if !ok {
		e.t.Fatalf("subscribe refused: %#v", m)
	}
	return e.acceptEvents(qc, sd.SubscriptionID), sd
}

// acceptEvents accepts the next event stream and checks its hello names
// id.
func (e *env) acceptEvents(qc transport.Conn, id uint64) *tsub {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rs, err := qc.AcceptUniStream(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	ts := &tsub{t: e.t, rs: rs, fr: wire.NewFrameReader(rs, 0)}
	f := ts.frame()
	hm, err := wire.ParseMessage(f.Payload)
	if err != nil {
		e.t.Fatal(err)
	}
	h, ok := hm.(*wire.EventStreamHello)
	if !ok || h.SubscriptionID != id {
		e.t.Fatalf("hello %#v does not match id %d", hm, id)
	}
	ts.id = h.SubscriptionID
	return ts
}

func (s *tsub) frame() wire.Frame {
	s.t.Helper()
	f, err := s.next()
	if err != nil {
		s.t.Fatalf("event stream: %v", err)
	}
	return f
}

func (s *tsub) next() (wire.Frame, error) {
	s.rs.SetReadDeadline(time.Now().Add(20 * time.Second))
	return s.fr.NextOwned()
}

// payloads reads event frames until n payloads arrived.
func (s *tsub) payloads(n int) [][]byte {
	s.t.Helper()
	out, err := s.read(n)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// read is payloads for goroutines other than the test's.
func (s *tsub) read(n int) ([][]byte, error) {
	var out [][]byte
	for len(out) < n {
		f, err := s.next()
		if err != nil {
			return out, fmt.Errorf("event stream after %d payloads: %w", len(out), err)
		}
		if f.Flags == 0 {
			m, err := wire.ParseMessage(f.Payload)
			if err != nil {
				return out, err
			}
			b, ok := m.(*wire.EventBatch)
			if !ok {
				return out, fmt.Errorf("unexpected event stream message %#v", m)
			}
			out = append(out, b.Payloads...)
			continue
		}
		b, err := wire.ParseSharedEventBatch(f.Flags, f.Payload)
		if err != nil {
			return out, err
		}
		out = append(out, b.Payloads...)
	}
	return out, nil
}

func numbered(i int) []byte { return []byte(fmt.Sprintf("msg-%05d", i)) }

func checkOrder(t testing.TB, got [][]byte, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("got %d payloads, want %d", len(got), n)
	}
	for i, p := range got {
		if !bytes.Equal(p, numbered(i)) {
			t.Fatalf("payload %d is %q", i, p)
		}
	}
}

// metric reads one sample from the broker's own metrics (0 when absent).
func (e *env) metric(name string) float64 {
	var b bytes.Buffer
	e.srv.WriteMetrics(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

// waitFor polls cond until it holds, failing the test after 10 s: for
// what a catalog sync pass brings about, which no event announces.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// brokerGoroutines lists goroutines running this package's server code.
// A goroutine that has signalled its owner may still be returning, so the
// list is retaken until it is empty or a few seconds have passed.
func brokerGoroutines() []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 4<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var out []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "roles/broker.(*") && !strings.Contains(g, "_test.go") {
				out = append(out, g)
			}
		}
		if len(out) == 0 || time.Now().After(deadline) {
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
}
