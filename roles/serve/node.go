package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/roles/broker"
	"github.com/felixmq/felix/roles/controlplane"
)

// httpServer is one plain-HTTP listener this process owns.
type httpServer struct {
	srv  *http.Server
	addr net.Addr
	done chan struct{}
}

func startHTTP(addr string, h http.Handler, log *slog.Logger) (*httpServer, error) {
	return startHTTPTLS(addr, h, nil, log)
}

// startHTTPTLS serves h on addr, over TLS when tlsConf is set.
func startHTTPTLS(addr string, h http.Handler, tlsConf *tls.Config, log *slog.Logger) (*httpServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
	}
	s := &httpServer{
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)},
		addr: ln.Addr(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "addr", s.addr, "err", err)
		}
	}()
	return s, nil
}

// stop shuts the server down gracefully within ctx, else closes it, and
// waits for its serve goroutine.
func (s *httpServer) stop(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	<-s.done
	return err
}

func newLogger(w io.Writer, env func(string) string) *slog.Logger {
	level := slog.LevelInfo
	switch strings.ToLower(env("FELIX_LOG_LEVEL")) {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(env("FELIX_LOG_FORMAT"), "json") {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// controlPlaneRole opens the Raft catalog (moving a single-node catalog
// file of an earlier release into it once), waits for a quorum, loads the
// signing key, bootstraps the catalog once for the whole group and mints
// this member's admin token on first start.
func controlPlaneRole(ctx context.Context, c *cli.Context, o *options, log *slog.Logger, defaultRF uint32) (*controlplane.Service, *controlPlaneTLS, error) {
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("--data-dir: %w", err)
	}
	ro, err := loadRaftOptions(c, o)
	if err != nil {
		return nil, nil, cli.Exit(err.Error(), 2)
	}
	ct, err := loadControlPlaneTLS(o)
	if err != nil {
		return nil, nil, cli.Exit(err.Error(), 2)
	}
	store, err := openRaftStore(ro, ct, log)
	if err != nil {
		return nil, nil, fmt.Errorf("open the raft catalog: %w", err)
	}
	if err := waitForQuorum(ctx, store, log); err != nil {
		store.Close()
		return nil, nil, err
	}
	legacy := filepath.Join(o.DataDir, controlplane.LegacyCatalogFile)
	if err := controlplane.MigrateLegacyCatalog(ctx, store, legacy, log); err != nil {
		store.Close()
		return nil, nil, err
	}
	cfg := controlplane.Config{DataDir: o.DataDir, Logger: log, DefaultReplicationFactor: defaultRF}
	cp, err := controlplane.NewContext(ctx, cfg, store)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	if _, err := cp.Bootstrap(ctx); err != nil { // logs when it creates something
		cp.Close()
		return nil, nil, fmt.Errorf("bootstrap: %w", err)
	}
	tokenPath := filepath.Join(o.DataDir, adminTokenFile)
	wrote, err := ensureAdminToken(tokenPath, func() (string, error) {
		return cp.MintToken(auth.Claims{Subject: "admin", TenantID: "default", Perms: []string{"*:*"}, Expiry: time.Now().Add(adminTokenTTL)})
	})
	if err != nil {
		cp.Close()
		return nil, nil, err
	}
	if wrote {
		log.Info("wrote the admin token", "file", tokenPath)
	}
	return cp, ct, nil
}

// startControlPlaneHTTP serves the REST API: over TLS with the control
// plane's certificate, else plain HTTP (with a warning unless it is bound
// to loopback only). It returns the base URL. With profile (a control
// plane without a broker, so without a metrics listener), FELIX_PPROF adds
// /debug/pprof/ to it.
func startControlPlaneHTTP(o *options, cp *controlplane.Service, ct *controlPlaneTLS, log *slog.Logger, profile bool) (*httpServer, string, error) {
	h := cp.Handler()
	if profile {
		var err error
		if h, err = withProfiling(h, o); err != nil {
			return nil, "", cli.Exit(err.Error(), 2)
		}
	}
	if ct == nil {
		srv, err := startHTTP(o.ControlPlaneAddr, h, log)
		if err != nil {
			return nil, "", err
		}
		srv.srv.RegisterOnShutdown(cp.EndWaits)
		if isLoopback(srv.addr) {
			log.Warn("the control plane API is plain HTTP, reachable from this machine only; set FELIX_CONTROLPLANE_TLS_CERT and _KEY to serve it further", "addr", srv.addr.String())
		} else {
			log.Warn("the control plane API is plain HTTP on a non-loopback address; set FELIX_CONTROLPLANE_TLS_CERT and _KEY", "addr", srv.addr.String())
		}
		return srv, "http://" + srv.addr.String(), nil
	}
	srv, err := startHTTPTLS(o.ControlPlaneAddr, h, ct.restConfig(), log)
	if err != nil {
		return nil, "", err
	}
	// Brokers hold cluster-view waits open; answer them as the server
	// shuts down rather than hold its graceful shutdown.
	srv.srv.RegisterOnShutdown(cp.EndWaits)
	return srv, "https://" + srv.addr.String(), nil
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// runNode runs the roles selected and blocks until a signal ends them.
func runNode(c *cli.Context, withControlPlane, withBroker bool) error {
	o, err := loadOptions(c)
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	log := newLogger(os.Stderr, o.env)
	if withControlPlane && !withBroker {
		tuneControlPlaneGC(log)
	}
	n, err := newNode(c, o, log, withControlPlane, withBroker)
	if err != nil {
		return err
	}
	defer n.locks.release()
	ctx, cancel := context.WithCancelCause(c.Context)
	defer cancel(nil)
	n.abort = cancel
	if err := n.start(ctx); err != nil {
		return err
	}
	stopped := waitForSignal(ctx, log, o.ShutdownTimeout)
	err = n.shutdown()
	stopped()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cli.Exit("felix: "+cause.Error(), 1)
	}
	return err
}

// newNode checks the settings of the roles selected before anything
// starts.
func newNode(c *cli.Context, o *options, log *slog.Logger, withControlPlane, withBroker bool) (*node, error) {
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	n := &node{c: c, o: o, log: log, withControlPlane: withControlPlane, withBroker: withBroker}
	if withBroker {
		bcfg, err := broker.ConfigFromEnv(o.env)
		if err != nil {
			return nil, cli.Exit(err.Error(), 2)
		}
		if bcfg.Durable.StorageDir == "" {
			// Durable streams work out of the box: their logs live
			// beside the rest of the node's state.
			bcfg.Durable.StorageDir = filepath.Join(o.DataDir, "log")
		}
		if bcfg.Node.ID == "" {
			bcfg.Node.ID = defaultNodeID(c)
		}
		n.bcfg = bcfg
	}
	if withControlPlane {
		exp, err := controlplane.ExpiryConfigFromEnv(o.env)
		if err != nil {
			return nil, cli.Exit(err.Error(), 2)
		}
		n.expiry = exp
		if n.placement, err = controlplane.PlacementConfigFromEnv(o.env); err != nil {
			return nil, cli.Exit(err.Error(), 2)
		}
		if n.defaultRF, err = controlplane.DefaultReplicationFactorFromEnv(o.env); err != nil {
			return nil, cli.Exit(err.Error(), 2)
		}
	}
	var roles []string
	if withControlPlane {
		roles = append(roles, roleControlPlane)
	}
	if withBroker {
		roles = append(roles, roleBroker)
	}
	locks, err := lockRoles(o.DataDir, roles...)
	if err != nil {
		return nil, err
	}
	n.locks = locks
	return n, nil
}

// defaultNodeID is the broker's node id without FELIX_NODE_ID:
// "broker-<raft node id>" (a member of a control plane group), else
// "broker-1".
func defaultNodeID(c *cli.Context) string {
	id := c.Uint64("raft-node-id")
	if id == 0 {
		id = 1
	}
	return fmt.Sprintf("broker-%d", id)
}

// waitForSignal blocks until SIGINT, SIGTERM or the end of ctx. Until the
// func it returns is called (when the node has stopped), a second signal
// exits the process at once, unfinished drain and all.
func waitForSignal(ctx context.Context, log *slog.Logger, budget time.Duration) (stopped func()) {
	sigC := make(chan os.Signal, 2)
	signal.Notify(sigC, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sigC:
		log.Info("shutting down", "signal", s.String(), "budget", budget)
	case <-ctx.Done():
		signal.Stop(sigC)
		return func() {}
	}
	stopping, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case s := <-sigC:
			log.Error("second signal: exiting without finishing the drain", "signal", s.String())
			os.Exit(1)
		case <-stopping:
		}
	}()
	return func() {
		signal.Stop(sigC)
		close(stopping)
		<-exited
	}
}

// shutdown drains the broker within the budget first (its readiness stays
// served meanwhile), then stops everything else, newest first. A drain
// the budget cut short is exit code 1.
func (n *node) shutdown() error {
	n.locks.stopping()
	var drainErr error
	if n.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), n.o.ShutdownTimeout)
		drainErr = n.srv.Shutdown(ctx)
		cancel()
	}
	n.stop()
	if drainErr != nil {
		n.log.Error("shutdown did not finish cleanly", "err", drainErr)
		return cli.Exit("shutdown forced: "+drainErr.Error(), 1)
	}
	n.log.Info("stopped")
	return nil
}

// controlPlaneGCPercent is the GC target of a process that runs only the
// control plane. Its heap is small (the catalog lives in bbolt's mmap) and
// churns fast under a burst of writes, so at Go's default of 100 the
// collector ran a dozen times a second and took ~12% of the CPU of a
// three-member group under felix bench meta; at 400 creates/s rose by
// 10-20%, for a heap that peaks at a few tens of MB. GOGC still wins.
const controlPlaneGCPercent = 400

func tuneControlPlaneGC(log *slog.Logger) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(controlPlaneGCPercent)
	log.Debug("GC target raised for a control-plane-only process", "gc_percent", controlPlaneGCPercent)
}

// fileToken re-reads the token file on every call, so a rotated token is
// picked up without a restart.
func fileToken(path string, log *slog.Logger) func() string {
	return func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			log.Warn("cannot read the catalog token", "file", path, "err", err)
			return ""
		}
		return strings.TrimSpace(string(b))
	}
}

func printSummary(w io.Writer, o *options, cf clientFile, metricsAddr net.Addr) {
	abs, _ := filepath.Abs(o.DataDir)
	fmt.Fprintf(w, "felix serve is up\n")
	fmt.Fprintf(w, "  broker (QUIC)    %s\n", cf.BrokerAddr)
	if cf.BrokerTCPAddr != "" {
		fmt.Fprintf(w, "  broker (TCP)     %s  (--transport tcp, for networks that drop UDP)\n", cf.BrokerTCPAddr)
	}
	fmt.Fprintf(w, "  control plane    %s\n", cf.ControlPlaneURL)
	fmt.Fprintf(w, "  metrics          http://%s/metrics\n", metricsAddr)
	fmt.Fprintf(w, "  data directory   %s\n", abs)
	fmt.Fprintf(w, "clients need: %s (addresses), %s (token)", filepath.Join(abs, clientJSONFile), filepath.Join(abs, cf.TokenFile))
	if cf.CAFile != "" {
		fmt.Fprintf(w, ", %s (CA to trust)", filepath.Join(abs, cf.CAFile))
	}
	fmt.Fprintf(w, "\nfrom this directory, felix admin/pub/sub/cache find them on their own.\n")
}

// withProfiling adds net/http/pprof under /debug/pprof/ when FELIX_PPROF is
// true. It is off by default because the metrics listener has no
// authentication.
func withProfiling(h http.Handler, o *options) (http.Handler, error) {
	on, err := o.envBool("FELIX_PPROF")
	if err != nil || !on {
		return h, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux, nil
}
