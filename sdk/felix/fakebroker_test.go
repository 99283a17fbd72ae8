package felix

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

const goodToken = "good-token"

// binaryFlags is everything a current broker advertises for publishing.
const binaryFlags = wire.FlagBinaryPublishBatch | wire.FlagBinaryPublishAcked | wire.FlagBinaryPublishKeyed |
	wire.FlagBinaryEventBatchShared | wire.FlagEventBatchOffsets | wire.FlagBinaryPublishAckOffset

// fakeOpts shapes a fake broker's behaviour.
type fakeOpts struct {
	flags    uint16 // server_flags; 0 means JSON only
	features uint64
	// gate, when set, pauses subscribe handling: with helloLate false the
	// fake writes the hello, waits on gate, then writes subscribed; with
	// helloLate true it writes subscribed, waits, then opens the stream.
	gate      chan struct{}
	helloLate bool
	hold      chan struct{} // acked publishes to stream "hold" wait for this
	// subscribed, when set, answers each subscribe instead of a plain
	// subscribed: a *wire.Subscribed (its id is filled in) or any other
	// message, which refuses the subscribe and ends its stream.
	subscribed func(m *wire.Subscribe) wire.Message
	// readCap caps a stream_read page that asks for no limit (default 3).
	readCap int
	// tokens are accepted besides goodToken (per-user handles).
	tokens map[string]bool
	// watches receives every cache watch the fake accepted (see
	// fakewatch_test.go); nil refuses cache_watch as unsupported.
	watches chan *fakeWatch
	// cluster, when set, makes the fake one broker of a fake cluster
	// (fakecluster_test.go).
	cluster *fakeCluster
	// groups makes a fake cluster play consumer groups per shard
	// (fakegroup_test.go).
	groups *fakeGroups
	// window is the publish_window granted to a client offering
	// FEATURE_PUBLISH_PIPELINE (0: none).
	window uint32
	// loseAnswer, when set, is asked of every publish_idempotent the fake
	// wrote: true drops the connection instead of answering
	// (fakeidem_test.go).
	loseAnswer func(m *wire.PublishIdempotent) bool
	// initGate, when set, holds every producer_init until it is closed.
	initGate chan struct{}
}

// pubRecord is one publish the fake received.
type pubRecord struct {
	payload []byte
	binary  bool
	key     []byte
}

// fakeBroker speaks enough of the protocol to test the client: auth,
// publish (binary and JSON), subscribe with event streams, and cache.
type fakeBroker struct {
	t    testing.TB
	opts fakeOpts
	ln   transport.Listener
	pool *x509.CertPool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	wmu sync.Mutex // held by send (fakegroup_test.go) while it writes

	mu          sync.Mutex
	changed     chan struct{} // closed and replaced on every recorded change
	conns       []transport.Conn
	killed      bool                   // Kill ran: a connection accepted now is dropped
	muted       bool                   // mute ran: nothing is answered any more, connections stay open
	published   map[string][]pubRecord // "ns/stream" -> arrival order
	cache       map[string][]byte
	ttls        map[string]uint64
	versions    map[string]uint64 // the version of each key in cache (cache_cond_test.go)
	condOps     int               // conditional writes received
	pubIfOps    int               // publish_if requests received (publish_if_test.go)
	commitOps   int               // commit requests received (commit_test.go)
	state       map[string]fakeStateValue
	counters    map[string]int64 // "cache/key" -> sum (counters_test.go)
	counterAdds int              // counter_add requests received
	groupClaims map[uint64]bool  // offsets a fake group poll handed out (group_test.go)
	groupMsgs   []wire.Message   // group requests received
	groupAcked  []uint64         // offsets group_ack named
	lastVersion uint64
	nextSub     uint64
	subC        chan *fakeSub
	logs        map[string][]wire.StreamRecord // "ns/stream" -> a durable shard 0, offsets ascending
	reads       []wire.StreamRead              // stream_read requests, in arrival order
	auths       []string                       // the token of every accepted auth, in order
	authMsgs    []wire.Auth                    // every accepted auth as received, in order
	revoked     map[string]bool                // tokens refused (and ended) with code revoked
	live        map[transport.Stream]string    // authenticated streams being served, by token
	subs        []*fakeSub                     // every subscription, in order
	idem        fakeIdem                       // idempotent producers (fakeidem_test.go)
}

// fakeSub is one subscription's event stream on the fake.
type fakeSub struct {
	id          uint64
	ns, stream  string
	clientFlags uint16
	token       string          // what the subscribe stream authenticated with
	msg         *wire.Subscribe // the request as received
	es          transport.SendStream
}

func newFakeBroker(t testing.TB, opts fakeOpts) *fakeBroker {
	t.Helper()
	cert, pool := selfSigned(t)
	tlsConf := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{ALPN}, MinVersion: tls.VersionTLS13}
	ln, err := listenTest(tlsConf, transport.Config{MaxIncomingStreams: 1000, MaxIdleTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	fb := &fakeBroker{t: t, opts: opts, ln: ln, pool: pool, ctx: ctx, cancel: cancel,
		changed: make(chan struct{}), published: map[string][]pubRecord{}, cache: map[string][]byte{},
		ttls: map[string]uint64{}, versions: map[string]uint64{}, subC: make(chan *fakeSub, 64), revoked: map[string]bool{},
		live: map[transport.Stream]string{}}
	fb.wg.Add(1)
	go fb.acceptLoop()
	t.Cleanup(fb.Close)
	return fb
}

func (fb *fakeBroker) Addr() string { return fb.ln.Addr().String() }

// config returns a client config for this fake.
func (fb *fakeBroker) config() Config {
	return Config{Addr: fb.Addr(), RootCAs: fb.pool, ServerName: "localhost", Tenant: "acme", Token: goodToken}
}

// Kill drops every connection with an error and stops listening. The
// connections go first, so nothing more is sent on them; one a client
// redialling at once slips in before the listener closes (over TCP a
// dead broker answers at once) is dropped as it is accepted.
func (fb *fakeBroker) Kill() {
	fb.mu.Lock()
	fb.killed = true
	fb.mu.Unlock()
	fb.closeConns("killed")
	_ = fb.ln.Close()
}

// closeConns closes every connection fb holds with an error carrying
// reason, and forgets them.
func (fb *fakeBroker) closeConns(reason string) {
	fb.mu.Lock()
	conns := fb.conns
	fb.conns = nil
	fb.mu.Unlock()
	for _, c := range conns {
		_ = c.CloseWithError(1, reason)
	}
}

// Close kills the fake and waits for its goroutines.
func (fb *fakeBroker) Close() {
	fb.Kill()
	fb.cancel()
	fb.wg.Wait()
}

func (fb *fakeBroker) acceptLoop() {
	defer fb.wg.Done()
	for {
		conn, err := fb.ln.Accept(fb.ctx)
		if err != nil {
			return
		}
		fb.mu.Lock()
		if fb.killed { // accepted just as Kill ran: it never serves
			fb.mu.Unlock()
			_ = conn.CloseWithError(1, "killed")
			continue
		}
		fb.conns = append(fb.conns, conn)
		fb.mu.Unlock()
		fb.wg.Add(1)
		go fb.serveConn(conn)
	}
}

func (fb *fakeBroker) serveConn(conn transport.Conn) {
	defer fb.wg.Done()
	for {
		s, err := conn.AcceptStream(fb.ctx)
		if err != nil {
			return
		}
		fb.wg.Add(1)
		go func() {
			defer fb.wg.Done()
			fb.serveStream(conn, s)
		}()
	}
}

// notify wakes everyone waiting in waitFor; called with mu held.
func (fb *fakeBroker) notifyLocked() {
	close(fb.changed)
	fb.changed = make(chan struct{})
}

// waitFor polls cond (under mu) on every change until it holds.
func (fb *fakeBroker) waitFor(cond func() bool) {
	fb.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		fb.mu.Lock()
		ok, ch := cond(), fb.changed
		fb.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			fb.t.Fatal("fake broker: condition not reached in 10s")
		}
	}
}

// records returns a copy of what ns/stream received.
func (fb *fakeBroker) records(ns, stream string) []pubRecord {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return append([]pubRecord(nil), fb.published[ns+"/"+stream]...)
}

func (fb *fakeBroker) waitRecords(ns, stream string, n int) []pubRecord {
	fb.waitFor(func() bool { return len(fb.published[ns+"/"+stream]) >= n })
	return fb.records(ns, stream)
}

// nextSubscription returns the next subscription the fake accepted.
func (fb *fakeBroker) nextSubscription() *fakeSub {
	fb.t.Helper()
	select {
	case s := <-fb.subC:
		return s
	case <-time.After(10 * time.Second):
		fb.t.Fatal("fake broker: no subscription in 10s")
		return nil
	}
}

func writeMsg(w interface{ Write([]byte) (int, error) }, m wire.Message) error {
	b, err := wire.AppendMessageFrame(nil, m)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// mute makes fb a broker frozen in place: its connections stay open and
// nothing it reads from now on is answered.
func (fb *fakeBroker) mute() {
	fb.mu.Lock()
	fb.muted = true
	fb.mu.Unlock()
}

func (fb *fakeBroker) isMuted() bool {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.muted
}

func (fb *fakeBroker) serveStream(conn transport.Conn, s transport.Stream) {
	defer s.CancelRead(0)
	if fb.isMuted() {
		<-fb.ctx.Done()
		return
	}
	fr := wire.NewFrameReader(s, 0)
	flags, ok := fb.auth(s, fr)
	if !ok {
		return
	}
	defer func() {
		fb.mu.Lock()
		delete(fb.live, s)
		fb.mu.Unlock()
	}()
	for {
		f, err := fr.NextOwned()
		if err != nil {
			_ = s.Close() // end our side too, as the broker does
			return
		}
		if fb.isMuted() {
			<-fb.ctx.Done()
			return
		}
		if f.Flags&wire.FlagBinaryPublishBatch != 0 {
			if !fb.binaryPublish(s, f) {
				return
			}
			continue
		}
		msg, err := wire.ParseMessage(f.Payload)
		if err != nil {
			return
		}
		if !fb.handle(conn, s, flags, msg) {
			return
		}
	}
}

// auth runs the auth round trip; false means the stream was refused.
func (fb *fakeBroker) auth(s transport.Stream, fr *wire.FrameReader) (uint16, bool) {
	f, err := fr.Next()
	if err != nil {
		return 0, false
	}
	msg, err := wire.ParseMessage(f.Payload)
	a, ok := msg.(*wire.Auth)
	fb.mu.Lock()
	revoked := ok && fb.revoked[a.Token]
	if ok && err == nil && !revoked {
		fb.auths = append(fb.auths, a.Token)
		fb.authMsgs = append(fb.authMsgs, *a)
		fb.live[s] = a.Token
	}
	fb.mu.Unlock()
	if revoked {
		_ = writeMsg(s, wire.NewError(wire.CodeRevoked, "token revoked").ErrorMessage(true))
		_ = s.Close()
		return 0, false
	}
	if err != nil || !ok || (a.Token != goodToken && !fb.opts.tokens[a.Token]) || a.TenantID != "acme" {
		_ = writeMsg(s, wire.NewError(wire.CodeUnauthorized, "bad token").ErrorMessage(true))
		_ = s.Close()
		return 0, false
	}
	ok2 := &wire.AuthOK{ServerFlags: fb.opts.flags, ServerFeatures: fb.opts.features}
	if w := fb.opts.window; w > 0 && a.Features&wire.FeaturePublishPipeline != 0 && fb.opts.features&wire.FeaturePublishPipeline != 0 {
		ok2.PublishWindow = &w
	}
	if err := writeMsg(s, ok2); err != nil {
		return 0, false
	}
	return a.ClientFlags, true
}

func (fb *fakeBroker) binaryPublish(s transport.Stream, f wire.Frame) bool {
	p, err := wire.ParseBinaryPublish(f.Flags, f.Payload)
	if err != nil {
		return false
	}
	if f.Flags&wire.FlagBinaryPublishIdempotent != 0 { // fakeidem_test.go
		seq := p.Sequence
		fb.mu.Lock()
		fb.idem.binary++
		fb.mu.Unlock()
		return fb.idemOp(s, &wire.PublishIdempotent{TenantID: p.TenantID, Namespace: p.Namespace, Stream: p.Stream,
			Payloads: p.Payloads, Key: p.Key, ProducerID: p.ProducerID, Sequence: &seq, RequestID: p.RequestID})
	}
	if f.Flags&wire.FlagBinaryPublishAcked != 0 {
		m := &wire.Publish{Namespace: p.Namespace, Stream: p.Stream, Key: p.Key, RequestID: p.RequestID, Ack: wire.AckPerMessage}
		if handled, keep := fb.clusterHandle(s, m); handled {
			return keep
		}
	}
	if p.Namespace == "missing" && f.Flags&wire.FlagBinaryPublishAcked == 0 {
		return writeMsg(s, wire.NewError(wire.CodeNotFound, "stream not found").ErrorMessage(true)) == nil
	}
	base := fb.record(p.Namespace, p.Stream, p.Payloads, true, p.Key)
	if f.Flags&wire.FlagBinaryPublishAcked == 0 {
		return true
	}
	return fb.answerPublish(s, p.Stream, p.RequestID, base)
}

// record stores a publish and returns the offset of its first payload.
func (fb *fakeBroker) record(ns, stream string, payloads [][]byte, binary bool, key []byte) uint64 {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	base := uint64(len(fb.published[ns+"/"+stream]))
	defer fb.notifyLocked()
	for _, p := range payloads {
		fb.published[ns+"/"+stream] = append(fb.published[ns+"/"+stream], pubRecord{payload: p, binary: binary, key: key})
	}
	return base
}

// answerPublish acks, or refuses publishes to "refuse" (keeping the
// stream) and "refuse-end" (ending the stream after the refusal).
// An ack carries the batch's offset when the fake advertises
// FLAG_BINARY_PUBLISH_ACK_OFFSET.
func (fb *fakeBroker) answerPublish(s transport.Stream, stream string, id, base uint64) bool {
	if stream == "hold" && fb.opts.hold != nil {
		select {
		case <-fb.opts.hold:
		case <-fb.ctx.Done():
			return false
		}
	}
	if stream == "refuse" || stream == "refuse-end" {
		e := wire.NewError(wire.CodeForbidden, "not allowed").WithDetail("reason", "nope")
		err := writeMsg(s, e.PublishErrorMessage(id, true))
		if stream == "refuse-end" {
			_ = s.Close()
			return false
		}
		return err == nil
	}
	ok := &wire.PublishOK{RequestID: id}
	if fb.opts.flags&wire.FlagBinaryPublishAckOffset != 0 {
		ok.Offset = &base
	}
	return writeMsg(s, ok) == nil
}

// handle answers one JSON request; false ends the stream.
func (fb *fakeBroker) handle(conn transport.Conn, s transport.Stream, clientFlags uint16, msg wire.Message) bool {
	if handled, keep := fb.clusterHandle(s, msg); handled {
		return keep
	}
	switch m := msg.(type) {
	case *wire.Publish:
		base := fb.record(m.Namespace, m.Stream, [][]byte{m.Payload}, false, m.Key)
		if m.Ack == wire.AckPerMessage || m.Ack == wire.AckPerBatch {
			return fb.answerPublish(s, m.Stream, m.RequestID, base)
		}
	case *wire.PublishBatch:
		base := fb.record(m.Namespace, m.Stream, m.Payloads, false, m.Key)
		if m.Ack == wire.AckPerMessage || m.Ack == wire.AckPerBatch {
			return fb.answerPublish(s, m.Stream, m.RequestID, base)
		}
	case *wire.Subscribe:
		fb.subscribe(conn, s, clientFlags, m)
		return false
	case *wire.CachePut, *wire.CacheGet, *wire.CacheDelete:
		return fb.cacheOp(s, msg)
	case *wire.CachePutIf, *wire.CacheDeleteIf:
		return fb.condOp(s, msg)
	case *wire.PublishIf:
		return fb.publishIf(s, m)
	case *wire.Commit:
		return fb.commit(s, m)
	case *wire.StateGet:
		return fb.stateGet(s, m)
	case *wire.ProducerInit, *wire.PublishIdempotent, *wire.PublishWidth:
		return fb.idemOp(s, msg)
	case *wire.CounterAdd, *wire.CounterGet:
		return fb.counterOp(s, msg)
	case *wire.GroupPoll, *wire.GroupAck, *wire.GroupNack, *wire.GroupExtend, *wire.GroupDeadLetters,
		*wire.GroupSeek, *wire.GroupDescribe, *wire.GroupDelete:
		return fb.groupOp(s, msg) // group_test.go
	case *wire.StreamRead:
		return writeMsg(s, fb.streamRead(m)) == nil
	case *wire.OffsetForTime:
		return writeMsg(s, fb.offsetForTime(m)) == nil
	case *wire.CacheWatch:
		if fb.opts.watches != nil {
			return fb.cacheWatch(conn, s, m)
		}
		_ = writeMsg(s, &wire.Unsupported{RequestType: msg.MessageType()})
	default:
		_ = writeMsg(s, &wire.Unsupported{RequestType: msg.MessageType()})
	}
	return true
}

func (fb *fakeBroker) subscribe(conn transport.Conn, s transport.Stream, clientFlags uint16, m *wire.Subscribe) {
	if m.Namespace == "missing" {
		_ = writeMsg(s, wire.NewError(wire.CodeNotFound, "no such stream").ErrorMessage(true))
		_ = s.Close()
		return
	}
	fb.mu.Lock()
	fb.nextSub++
	sub := &fakeSub{id: 1000 + fb.nextSub, ns: m.Namespace, stream: m.Stream, clientFlags: clientFlags, msg: m,
		token: fb.live[s]}
	fb.mu.Unlock()
	answer := wire.Message(&wire.Subscribed{})
	if fb.opts.subscribed != nil {
		answer = fb.opts.subscribed(m)
	}
	ok, isOK := answer.(*wire.Subscribed)
	if !isOK {
		_ = writeMsg(s, answer)
		_ = s.Close()
		return
	}
	ok.SubscriptionID = sub.id
	openHello := func() bool {
		es, err := conn.OpenUniStreamSync(fb.ctx)
		if err != nil {
			return false
		}
		sub.es = es
		return writeMsg(es, &wire.EventStreamHello{SubscriptionID: sub.id}) == nil
	}
	if !fb.opts.helloLate && !openHello() {
		return
	}
	if fb.opts.gate != nil && !fb.opts.helloLate {
		<-fb.opts.gate
	}
	if writeMsg(s, ok) != nil {
		return
	}
	_ = s.Close()
	if fb.opts.helloLate {
		if fb.opts.gate != nil {
			<-fb.opts.gate
		}
		if !openHello() {
			return
		}
	}
	fb.mu.Lock()
	fb.subs = append(fb.subs, sub)
	fb.mu.Unlock()
	fb.subC <- sub
}

// revoke refuses token from now on and ends, with code revoked, every
// stream and subscription opened with it, as a broker does when the
// catalog revokes the token's principal.
func (fb *fakeBroker) revoke(token string) {
	fb.mu.Lock()
	fb.revoked[token] = true
	var streams []transport.Stream
	for s, tok := range fb.live {
		if tok == token {
			streams = append(streams, s)
		}
	}
	var subs []*fakeSub
	for _, sub := range fb.subs {
		if sub.token == token {
			subs = append(subs, sub)
		}
	}
	fb.mu.Unlock()
	e := wire.NewError(wire.CodeRevoked, "token revoked for subject x").ErrorMessage(true)
	for _, s := range streams {
		_ = writeMsg(s, e)
		_ = s.Close()
		s.CancelRead(0)
	}
	for _, sub := range subs {
		_ = writeMsg(sub.es, e)
		_ = sub.es.Close()
	}
}

// authTokens returns the token of every accepted auth so far.
func (fb *fakeBroker) authTokens() []string {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return append([]string(nil), fb.auths...)
}

// send writes one event batch the way the subscriber negotiated: a shared
// binary batch with offsets, or a JSON event_batch.
func (s *fakeSub) send(t testing.TB, base uint64, payloads ...[]byte) {
	t.Helper()
	var frame []byte
	if s.clientFlags&wire.FlagBinaryEventBatchShared != 0 {
		flags := wire.FlagBinaryEventBatchShared | wire.FlagEventBatchOffsets
		frame = wire.AppendSharedEventBatchFrame(nil, flags, &wire.EventBatchHeader{BaseOffset: base}, payloads)
	} else {
		var err error
		frame, err = wire.AppendMessageFrame(nil, &wire.EventBatch{TenantID: "acme", Namespace: s.ns,
			Stream: s.stream, Payloads: payloads, BaseOffset: &base})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.es.Write(frame); err != nil {
		t.Fatalf("fake send: %v", err)
	}
}

// sendJSON writes a JSON event_batch regardless of the negotiated flags.
func (s *fakeSub) sendJSON(t testing.TB, base uint64, payloads ...[]byte) {
	t.Helper()
	if err := writeMsg(s.es, &wire.EventBatch{Namespace: s.ns, Stream: s.stream, Payloads: payloads, BaseOffset: &base}); err != nil {
		t.Fatal(err)
	}
}

func (fb *fakeBroker) cacheOp(s transport.Stream, msg wire.Message) bool {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	switch m := msg.(type) {
	case *wire.CachePut:
		if m.Key == "forbidden" {
			id := m.RequestID
			em := wire.NewError(wire.CodeForbidden, "no").ErrorMessage(true)
			em.RequestID = &id
			_ = writeMsg(s, em)
			_ = s.Close()
			return false
		}
		fb.cache[m.Cache+"/"+m.Key] = m.Value
		fb.versions[m.Cache+"/"+m.Key] = fb.newVersionLocked()
		if m.TTLMs != nil {
			fb.ttls[m.Cache+"/"+m.Key] = *m.TTLMs
		}
		return writeMsg(s, &wire.CacheOK{RequestID: m.RequestID}) == nil
	case *wire.CacheGet:
		if m.Key == "hang" {
			return true // never answered
		}
		v := &wire.CacheValue{RequestID: m.RequestID, Key: m.Key, Value: fb.cache[m.Cache+"/"+m.Key]}
		if ver, ok := fb.versions[m.Cache+"/"+m.Key]; ok && fb.opts.features&wire.FeatureCacheConditional != 0 {
			v.Version = &ver
		}
		return writeMsg(s, v) == nil
	case *wire.CacheDelete:
		v := fb.cache[m.Cache+"/"+m.Key]
		delete(fb.cache, m.Cache+"/"+m.Key)
		delete(fb.versions, m.Cache+"/"+m.Key)
		return writeMsg(s, &wire.CacheValue{RequestID: m.RequestID, Key: m.Key, Value: v}) == nil
	}
	return false
}

var (
	testCertOnce sync.Once
	testCert     tls.Certificate
	testPool     *x509.CertPool
	testCertErr  error
)

// selfSigned returns one P-256 certificate for 127.0.0.1 and localhost,
// shared by every fake in the test binary, and a pool that trusts it.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	testCertOnce.Do(func() { testCert, testPool, testCertErr = makeSelfSigned() })
	if testCertErr != nil {
		t.Fatal(testCertErr)
	}
	return testCert, testPool
}

func makeSelfSigned() (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "felix test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool, nil
}

// connect dials fb and closes the client when the test ends.
func connect(t testing.TB, fb *fakeBroker) *Client {
	t.Helper()
	c, err := Connect(context.Background(), fb.config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// asBroker returns err as a *BrokerError or fails the test.
func asBroker(t testing.TB, err error) *BrokerError {
	t.Helper()
	var be *BrokerError
	if !errors.As(err, &be) {
		t.Fatalf("want *BrokerError, got %T %v", err, err)
	}
	return be
}
