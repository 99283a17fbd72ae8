package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/roles/broker/catalogsync"
	"github.com/felixmq/felix/roles/broker/peer"
	"github.com/felixmq/felix/roles/broker/sched"
	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// ALPN is the application protocol the listener requires.
const ALPN = "felix/1"

// Deps are what the Server needs from its caller.
type Deps struct {
	// Catalog is where tenants, namespaces, streams, caches and the token
	// signing keys come from. Required.
	Catalog catalogsync.Source
	// TLS is the server TLS configuration (TLS 1.3, ALPN felix/1). Required.
	TLS *tls.Config
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Verifier checks client tokens. When nil, one is built that fetches
	// keys from Catalog.JWKS.
	Verifier *auth.Verifier
	// Registry is where the broker registers and heartbeats (see
	// registration.go). When nil, Catalog is used if it implements
	// Registry; otherwise the broker does not register.
	Registry Registry
	// Cluster is where the broker fetches its cluster view (the broker
	// registry and every shard's assignment, see routes.go). When nil the
	// broker is standalone: it serves every shard of every stream and
	// cache itself. Never defaulted from Catalog: a caller that wants the
	// broker in a cluster says so.
	Cluster ClusterViewSource
	// OnFatal is called (once, from a background goroutine) when the
	// control plane refuses this broker for good, e.g. a duplicate node
	// id; the owner should stop the broker. Default: log the error.
	OnFatal func(error)
}

// Server is the broker as a network service. Create it with New, then
// Start; stop it with Shutdown.
type Server struct {
	cfg      Config
	log      *slog.Logger
	tls      *tls.Config
	catalog  catalogsync.Source
	registry Registry          // nil: the broker does not register
	cluster  ClusterViewSource // nil: standalone
	routes   *routeTable       // where each shard's requests go
	fwd      *forwarder        // forwarding to shard owners (forward.go)
	repl     *replication      // log shipping to and from replicas (repl.go)
	handoff  handoffState      // the planned handoff at shutdown (handoff.go)
	handoffs handoffGates      // publishes held while a shard is handed off (handoff_gate.go)
	own      ownership         // the shards this broker owns (ownership.go)
	view     viewState         // fetching the cluster view (cluster_view.go)
	onFatal  func(error)       // see Deps.OnFatal
	verifier *auth.Verifier
	revs     *auth.Revocations // revoked principals, from the catalog
	streams  *streamRegistry   // open streams by principal
	core     *core.Broker
	metrics  *serverMetrics
	sched    *sched.Scheduler
	state    *catalogState
	lanes    *laneTable
	pubBytes *semaphore.Weighted // process-wide publish bytes
	// groupWaiters bounds the group polls waiting for work (group.go).
	groupWaiters *semaphore.Weighted
	// atomicCommitOn is set while the control plane's last answer listed
	// atomic_commit as finalized (commit.go).
	atomicCommitOn atomic.Bool

	// workCtx bounds background work (publish fanout, sync, sweeps); it is
	// cancelled when Shutdown runs out of budget or finishes.
	workCtx    context.Context
	workCancel context.CancelFunc
	publishes  tracker // admitted publishes not yet finished
	bgCtx      context.Context
	bgCancel   context.CancelFunc
	bgWG       sync.WaitGroup // accept loops, sync loop, sweeper
	connWG     sync.WaitGroup // connection supervisors

	mu sync.Mutex
	// lns are the client listeners, set by Start; lns[0] is the QUIC
	// one, whose address Addr reports.
	lns       []transport.Listener
	peer      *peer.Endpoint // set by Start; nil without a peer listener
	conns     map[*connection]struct{}
	perSource map[string]int
	started   bool
	draining  bool

	acceptWG   sync.WaitGroup // the accept loops, one per listener
	synced     chan struct{}  // closed after the first catalog sync
	syncOnce   sync.Once
	drainingF  atomic.Bool
	shutOnce   sync.Once
	shutErr    error
	coreClosed chan struct{} // closed once Shutdown's close of the core returns
	// runMarker is the run marker's path (crashmark.go), removed once a
	// clean shutdown has closed every log; "" when none was written. Set
	// by Start before anything runs concurrently.
	runMarker string
}

// New builds a Server; nothing listens until Start.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Catalog == nil {
		return nil, errors.New("broker: Deps.Catalog is required")
	}
	if deps.TLS == nil {
		return nil, errors.New("broker: Deps.TLS is required")
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	revs := auth.NewRevocations()
	v := deps.Verifier
	if v == nil {
		v = auth.NewVerifier(auth.VerifierOptions{Fetch: deps.Catalog.JWKS, Revocations: revs})
	}
	m := newServerMetrics()
	repl := newReplication(m.set)
	coreCfg := cfg.Core
	coreCfg.PlacedShards = deps.Cluster != nil // open only the shards placed here
	coreCfg.ReplicationFor = repl.forShard
	if st := cfg.Durable.storage(); st != nil {
		st.Logger = log.With("role", "broker")
		coreCfg.Storage = st
	}
	b := core.NewBroker(coreCfg)
	s := &Server{
		cfg:          cfg,
		log:          log.With("role", "broker"),
		tls:          serverTLS(deps.TLS),
		catalog:      deps.Catalog,
		verifier:     v,
		revs:         revs,
		streams:      newStreamRegistry(revs, m.revokedStreams),
		core:         b,
		metrics:      m,
		lanes:        newLaneTable(cfg.PublishLaneDepth),
		pubBytes:     semaphore.NewWeighted(cfg.PublishTotalInflightBytes),
		groupWaiters: semaphore.NewWeighted(int64(max(cfg.GroupMaxWaitingPolls, 1))),
		conns:        map[*connection]struct{}{},
		perSource:    map[string]int{},
		synced:       make(chan struct{}),
		coreClosed:   make(chan struct{}),
	}
	s.registry, s.onFatal, s.cluster = deps.Registry, deps.OnFatal, deps.Cluster
	s.routes = newRouteTable(s.nodeID(), s.cluster == nil)
	s.fwd = newForwarder(m.set)
	s.repl, repl.s = repl, s
	if d := cfg.Node.LeaderSuspectAfter; d > 0 {
		repl.suspectAfter = d
	}
	s.initView()
	m.watchLease(s.leaseHeld)
	if s.registry == nil {
		s.registry, _ = deps.Catalog.(Registry)
	}
	s.initHandoff(deps.Catalog)
	if s.onFatal == nil {
		s.onFatal = func(err error) { s.log.Error("broker refused by the control plane", "err", err) }
	}
	m.watchIngress(s.ingressDepth)
	s.state = newCatalogState(b, v, s.streams, s.log)
	s.state.streamApplied = s.streamApplied // cluster_view.go
	s.watchOwnership()
	s.workCtx, s.workCancel = context.WithCancel(context.Background())
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	return s, nil
}

// serverTLS clones c, requiring TLS 1.3 and offering ALPN felix/1.
func serverTLS(c *tls.Config) *tls.Config {
	c = c.Clone()
	if c.MinVersion < tls.VersionTLS13 {
		c.MinVersion = tls.VersionTLS13
	}
	if !slices.Contains(c.NextProtos, ALPN) {
		c.NextProtos = append(c.NextProtos, ALPN)
	}
	return c
}

func (s *Server) transportConfig() transport.Config {
	c := s.cfg
	return transport.Config{
		KeepAlive:                  c.KeepAlive,
		MaxIdleTimeout:             c.MaxIdleTimeout,
		InitialStreamReceiveWindow: min(c.StreamReceiveWindow, 512<<10),
		MaxStreamReceiveWindow:     c.StreamReceiveWindow,
		InitialConnReceiveWindow:   min(c.ConnReceiveWindow, 1<<20),
		MaxConnReceiveWindow:       c.ConnReceiveWindow,
		MaxIncomingStreams:         c.MaxIncomingStreams,
		MaxIncomingUniStreams:      c.MaxIncomingUniStreams,
	}
}

// Start binds the QUIC listener and, when Config.Peer names one, the
// peer listener (closed when Shutdown stops the background work), starts
// the scheduler, the catalog sync and the cache sweeper, and returns once
// the listener accepts connections. ctx bounds only the start itself; the server runs until
// Shutdown.
func (s *Server) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("broker: already started")
	}
	lns, err := s.listen()
	if err != nil {
		return err
	}
	var tcpLn net.Addr
	if len(lns) > 1 {
		tcpLn = lns[1].Addr()
	}
	pe, reg, registered, err := s.joinCluster(ctx, lns[0].Addr(), tcpLn)
	if err != nil {
		closeAll(lns)
		return err
	}
	s.firstView(ctx) // before anything is accepted; cluster_view.go
	s.lns, s.peer = lns, pe
	s.started = true
	s.sched = sched.New(s.cfg.Sched)
	for _, ln := range lns {
		s.startAccept(ln)
	}
	s.bgWG.Add(3)
	go s.runSync(s.bgCtx)
	go s.sweepLoop(s.bgCtx)
	go s.retentionLoop(s.bgCtx)
	s.startHeartbeats(reg, registered)
	if s.cluster != nil {
		s.bgWG.Add(1)
		go func() {
			defer s.bgWG.Done()
			s.repl.watchSilence(s.bgCtx.Done())
		}()
	}
	s.startViewLoop()
	s.stopPeerAtShutdown(pe)
	return nil
}

// Addr is the listener's address (nil before Start).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lns) == 0 {
		return nil
	}
	return s.lns[0].Addr()
}

// TCPAddr is the TLS-over-TCP listener's address (nil before Start, or
// when FELIX_TCP_LISTEN is off).
func (s *Server) TCPAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ln := range s.lns {
		if _, ok := ln.Addr().(*net.TCPAddr); ok {
			return ln.Addr()
		}
	}
	return nil
}

// ingressDepth returns the publishes queued for the executors.
func (s *Server) ingressDepth() int {
	s.mu.Lock()
	sc := s.sched // set by Start
	s.mu.Unlock()
	if sc == nil {
		return 0
	}
	return sc.Depth()
}

// startAccept runs an accept loop on ln until ln is closed: every
// listener, whatever its transport, admits and serves its connections
// with the same code.
func (s *Server) startAccept(ln transport.Listener) {
	s.bgWG.Add(1)
	s.acceptWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		defer s.acceptWG.Done()
		s.acceptLoop(ln)
	}()
}

func (s *Server) acceptLoop(ln transport.Listener) {
	for {
		qc, err := ln.Accept(context.Background())
		if err != nil {
			return
		}
		s.admit(qc)
	}
}

// admit registers a new connection or refuses it when its source address
// has too many.
func (s *Server) admit(qc transport.Conn) {
	src := sourceIP(qc.RemoteAddr())
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		qc.CloseWithError(transport.ApplicationErrorCode(wire.CloseShutdown), "shutdown")
		return
	}
	if s.perSource[src] >= s.cfg.MaxConnectionsPerSource {
		s.mu.Unlock()
		s.metrics.connsRefused.Inc()
		s.log.Warn("refused a connection: too many from its source", "source", src, "limit", s.cfg.MaxConnectionsPerSource)
		qc.CloseWithError(transport.ApplicationErrorCode(wire.CloseTooManyConnections), "too many connections from this source")
		return
	}
	s.perSource[src]++
	c := newConnection(s, qc, src)
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.metrics.connections.Inc()
	c.start()
}

// forget is called by a connection once everything it started has ended.
func (s *Server) forget(c *connection) {
	s.mu.Lock()
	delete(s.conns, c)
	if s.perSource[c.source]--; s.perSource[c.source] <= 0 {
		delete(s.perSource, c.source)
	}
	s.mu.Unlock()
	s.metrics.connections.Dec()
}

func sourceIP(a net.Addr) string {
	if u, ok := a.(*net.UDPAddr); ok {
		return u.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
