package serve

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/roles/broker"
	"github.com/felixmq/felix/roles/broker/catalogsync"
	"github.com/felixmq/felix/roles/controlplane"
)

// Names of the steps of a node's start, in order.
const (
	stepControlPlane     = "controlplane"
	stepControlPlaneHTTP = "controlplane-http"
	stepBroker           = "broker"
	stepMetrics          = "metrics"
	stepClientFile       = "client-file"
)

// node is the roles one felix process runs, as they start. start runs
// its steps in order; each starts one thing and records how to stop it in
// running, so a failing step stops, newest first, everything the steps
// before it started.
type node struct {
	c   *cli.Context // for the Raft flags and the summary's writer
	o   *options
	log *slog.Logger

	withControlPlane, withBroker bool
	bcfg                         broker.Config                // checked before anything starts
	expiry                       controlplane.ExpiryConfig    // likewise
	placement                    controlplane.PlacementConfig // likewise
	defaultRF                    uint32                       // likewise: FELIX_DEFAULT_REPLICATION_FACTOR
	// abort ends the node's run with a cause (set by runNode): the
	// broker calls it when the control plane refuses it for good.
	abort context.CancelCauseFunc

	// fault, when set (tests only), is called as each step begins with
	// the step's name; an error it returns fails the step.
	fault func(step string) error

	running startedSet

	// locks hold --data-dir's state of the node's roles for the life of
	// the process; empty in tests that build a node by hand.
	locks dirLocks

	// What the steps started, for the steps after them and for shutdown.
	cp      *controlplane.Service
	ct      *controlPlaneTLS
	cpHTTP  *httpServer
	cpURL   string
	catalog catalogsync.Source
	srv     *broker.Server
	caFile  string
	metrics *httpServer
}

// start runs the steps the node's roles need. On an error everything
// started is stopped (within the shutdown budget) before it returns.
func (n *node) start(ctx context.Context) error {
	type step struct {
		name string
		run  func(context.Context) error
		on   bool
	}
	steps := []step{
		{stepControlPlane, n.startControlPlane, n.withControlPlane},
		{stepControlPlaneHTTP, n.startControlPlaneHTTP, n.withControlPlane},
		{stepBroker, n.startBroker, n.withBroker},
		{stepMetrics, n.startMetrics, n.withBroker},
		{stepClientFile, n.writeClientFile, n.withControlPlane && n.withBroker},
	}
	for _, s := range steps {
		if !s.on {
			continue
		}
		err := n.injected(s.name)
		if err == nil {
			err = s.run(ctx)
		}
		if err != nil {
			n.stop()
			return err
		}
	}
	return nil
}

// injected returns the test's fault for step, if any.
func (n *node) injected(step string) error {
	if n.fault == nil {
		return nil
	}
	return n.fault(step)
}

// stop stops everything started, newest first, within the shutdown
// budget.
func (n *node) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), n.o.ShutdownTimeout)
	defer cancel()
	return n.running.stopAll(ctx, n.log)
}

func (n *node) startControlPlane(ctx context.Context) error {
	cp, ct, err := controlPlaneRole(ctx, n.c, n.o, n.log, n.defaultRF)
	if err != nil {
		return err
	}
	n.cp, n.ct, n.catalog = cp, ct, cp
	cp.StartExpiry(n.expiry)       // stopped by cp.Close
	cp.StartPlacement(n.placement) // likewise
	n.running.push(stepControlPlane, func(context.Context) error { return cp.Close() })
	return nil
}

func (n *node) startControlPlaneHTTP(context.Context) error {
	srv, url, err := startControlPlaneHTTP(n.o, n.cp, n.ct, n.log, !n.withBroker)
	if err != nil {
		return fmt.Errorf("--controlplane-addr %s: %w", n.o.ControlPlaneAddr, err)
	}
	n.cpHTTP, n.cpURL = srv, url
	n.running.push(stepControlPlaneHTTP, srv.stop)
	n.log.Info("control plane listening", "url", url)
	return nil
}

// startBroker builds the broker and starts its QUIC listener. Its stop is
// recorded once it is built: Shutdown also undoes a Start that failed.
func (n *node) startBroker(ctx context.Context) error {
	catalog := n.catalog
	// The broker joins the cluster: it routes by the view of the control
	// plane in process (felix serve) or over REST (felix broker).
	var cluster broker.ClusterViewSource
	if n.cp != nil {
		cluster = n.cp
	}
	if catalog == nil {
		tokenFile := n.o.TokenFile
		if tokenFile == "" {
			tokenFile = filepath.Join(n.o.DataDir, adminTokenFile)
		}
		catalog = catalogsync.NewHTTPSource(n.o.ControlPlaneURL, fileToken(tokenFile, n.log), &http.Client{Timeout: 10 * time.Second})
		cluster, _ = catalog.(broker.ClusterViewSource)
	}
	tlsCfg, ca, err := serverTLS(n.o, n.log)
	if err != nil {
		return err
	}
	n.caFile = ca
	cfg := n.bcfg
	cfg.ListenAddr = n.o.BrokerAddr
	cfg.TCPListenAddr = n.o.TCPAddr
	cfg.Peer.Addr = n.o.PeerAddr
	switch {
	case cfg.Peer.CertFile != "":
		// the operator's node certificate
	case n.o.env("FELIX_TLS_CERT") != "":
		// An operator who brings the serving certificate brings the node
		// certificate too: no development CA is made behind their back.
		n.log.Info("no peer listener: FELIX_TLS_CERT is set but FELIX_NODE_TLS_CERT/_KEY/_CA are not; brokers cannot link to this one until they are")
		cfg.Peer.Addr = ""
	case cfg.Peer.DevCADir == "":
		cfg.Peer.DevCADir = filepath.Join(n.o.DataDir, "tls") // beside the serving certificate's CA
	}
	verifier := auth.NewVerifier(auth.VerifierOptions{Fetch: catalog.JWKS})
	srv, err := broker.New(cfg, broker.Deps{Catalog: catalog, Cluster: cluster, TLS: tlsCfg, Logger: n.log, Verifier: verifier, OnFatal: n.fatal})
	if err != nil {
		return err
	}
	n.srv = srv
	n.running.push(stepBroker, srv.Shutdown)
	if err := srv.Start(ctx); err != nil {
		return fmt.Errorf("--broker-addr %s: %w", n.o.BrokerAddr, err)
	}
	return nil
}

// The control plane's Service is the in-process cluster view source, and
// where the broker asks for its planned handoffs at shutdown.
var (
	_ broker.ClusterViewSource = (*controlplane.Service)(nil)
	_ broker.HandoffSource     = (*controlplane.Service)(nil)
)

// fatal stops the node because the control plane refused its broker.
func (n *node) fatal(err error) {
	n.log.Error("stopping: the control plane refused this broker", "err", err)
	if n.abort != nil {
		n.abort(err)
	}
}

func (n *node) startMetrics(context.Context) error {
	handler, err := withProfiling(n.srv.HTTPHandler(), n.o)
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	m, err := startHTTP(n.o.MetricsAddr, handler, n.log)
	if err != nil {
		return fmt.Errorf("--metrics-addr %s: %w", n.o.MetricsAddr, err)
	}
	n.metrics = m
	n.running.push(stepMetrics, m.stop)
	n.log.Info("broker listening", "quic", n.srv.Addr(), "tcp", n.srv.TCPAddr(), "metrics", "http://"+m.addr.String())
	return nil
}

// writeClientFile writes client.json and prints the summary (serve only).
func (n *node) writeClientFile(context.Context) error {
	cf := clientFile{
		BrokerAddr:      dialable(n.srv.Addr().String()),
		ControlPlaneURL: dialableURL(n.cpURL),
		CAFile:          relTo(n.o.DataDir, n.caFile),
		TokenFile:       adminTokenFile,
		Tenant:          "default",
		Namespace:       "default",
	}
	if a := n.srv.TCPAddr(); a != nil {
		cf.BrokerTCPAddr = dialable(a.String())
	}
	if err := writeClientFile(n.o.DataDir, cf); err != nil {
		return fmt.Errorf("write client.json: %w", err)
	}
	printSummary(n.c.App.Writer, n.o, cf, n.metrics.addr)
	return nil
}
