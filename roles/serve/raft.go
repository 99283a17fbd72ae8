package serve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/raftmeta"
	"github.com/felixmq/felix/roles/broker/tlsconf"
	"github.com/felixmq/felix/roles/controlplane"
)

// raftOptions are the Raft settings of the control plane role.
type raftOptions struct {
	NodeID  uint64
	DataDir string
	Peers   map[uint64]string // nil: a one-voter group on a loopback port
	Tick    time.Duration
	SnapEvy uint64
}

func raftFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Uint64Flag{Name: "raft-node-id", Usage: "this member's `ID` in --raft-peers", EnvVars: []string{"FELIX_RAFT_NODE_ID"}},
		&cli.StringFlag{Name: "raft-data-dir", Usage: "`DIR` of the Raft log and the catalog (default <data-dir>/raft)", EnvVars: []string{"FELIX_RAFT_DATA_DIR"}},
		&cli.StringFlag{Name: "raft-peers", Usage: "every member as `ID=URL,...`, e.g. \"1=https://cp1:7001,2=https://cp2:7001,3=https://cp3:7001\"; this member listens for peers on its own entry", EnvVars: []string{"FELIX_RAFT_PEERS"}},
	}
}

// loadRaftOptions reads the Raft flags (of `felix controlplane` and
// `felix serve`) and the FELIX_RAFT_TICK_MS / FELIX_RAFT_SNAPSHOT_EVERY
// tuning variables.
func loadRaftOptions(c *cli.Context, o *options) (raftOptions, error) {
	ro := raftOptions{NodeID: 1, DataDir: filepath.Join(o.DataDir, "raft")}
	var errs []error
	if v := o.env("FELIX_RAFT_TICK_MS"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 1 || ms > 10000 {
			errs = append(errs, fmt.Errorf("FELIX_RAFT_TICK_MS=%q: want milliseconds in 1..10000", v))
		}
		ro.Tick = time.Duration(ms) * time.Millisecond
	}
	if v := o.env("FELIX_RAFT_SNAPSHOT_EVERY"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n < 10 {
			errs = append(errs, fmt.Errorf("FELIX_RAFT_SNAPSHOT_EVERY=%q: want an entry count of at least 10", v))
		}
		ro.SnapEvy = n
	}
	if d := c.String("raft-data-dir"); d != "" {
		ro.DataDir = d
	}
	if peers := c.String("raft-peers"); peers != "" {
		p, err := raftmeta.ParsePeers(peers)
		if err != nil {
			errs = append(errs, fmt.Errorf("--raft-peers: %w", err))
		}
		ro.Peers = p
		ro.NodeID = c.Uint64("raft-node-id")
		if ro.NodeID == 0 {
			errs = append(errs, errors.New("--raft-node-id (FELIX_RAFT_NODE_ID) must be set with --raft-peers"))
		} else if _, ok := p[ro.NodeID]; p != nil && !ok {
			errs = append(errs, fmt.Errorf("--raft-peers has no entry for --raft-node-id %d", ro.NodeID))
		}
	} else if id := c.Uint64("raft-node-id"); id > 1 {
		errs = append(errs, fmt.Errorf("--raft-node-id %d needs --raft-peers (FELIX_RAFT_PEERS)", id))
	}
	return ro, errors.Join(errs...)
}

// controlPlaneTLS is the control plane's certificate (FELIX_CONTROLPLANE_TLS_CERT
// and _KEY) and the CA that peer and client certificates must chain to
// (FELIX_CONTROLPLANE_TLS_CLIENT_CA). A nil result means plain HTTP.
type controlPlaneTLS struct {
	reloader *tlsconf.Reloader
	clientCA *x509.CertPool
}

func loadControlPlaneTLS(o *options) (*controlPlaneTLS, error) {
	certFile, keyFile := o.env("FELIX_CONTROLPLANE_TLS_CERT"), o.env("FELIX_CONTROLPLANE_TLS_KEY")
	caFile := o.env("FELIX_CONTROLPLANE_TLS_CLIENT_CA")
	if certFile == "" && keyFile == "" {
		if caFile != "" {
			return nil, errors.New("FELIX_CONTROLPLANE_TLS_CLIENT_CA needs FELIX_CONTROLPLANE_TLS_CERT and _KEY")
		}
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("FELIX_CONTROLPLANE_TLS_CERT and FELIX_CONTROLPLANE_TLS_KEY must be set together")
	}
	r, err := tlsconf.NewReloader(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("FELIX_CONTROLPLANE_TLS_CERT/_KEY: %w", err)
	}
	ct := &controlPlaneTLS{reloader: r}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("FELIX_CONTROLPLANE_TLS_CLIENT_CA: %w", err)
		}
		ct.clientCA = x509.NewCertPool()
		if !ct.clientCA.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("FELIX_CONTROLPLANE_TLS_CLIENT_CA %s: no PEM certificate", caFile)
		}
	}
	return ct, nil
}

// restConfig serves the REST API; client certificates are not asked for
// (callers authenticate with tokens).
func (ct *controlPlaneTLS) restConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: ct.reloader.GetCertificate, NextProtos: []string{"h2", "http/1.1"}}
}

// peerConfig secures Raft traffic both ways with the same certificate:
// mutual TLS when a client CA is configured, which peers are then also
// verified against.
func (ct *controlPlaneTLS) peerConfig() *tls.Config {
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: ct.reloader.GetCertificate,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return ct.reloader.GetCertificate(nil)
		},
	}
	if ct.clientCA != nil {
		cfg.RootCAs, cfg.ClientCAs, cfg.ClientAuth = ct.clientCA, ct.clientCA, tls.RequireAndVerifyClientCert
	}
	return cfg
}

// openRaftStore starts this process's Raft member: the configured group,
// or (without --raft-peers) a one-voter group whose peer listener takes a
// kernel-chosen loopback port, since nothing else needs to reach it.
func openRaftStore(ro raftOptions, ct *controlPlaneTLS, log *slog.Logger) (*controlplane.RaftStore, error) {
	cfg := controlplane.RaftConfig{ID: ro.NodeID, Dir: ro.DataDir, Peers: ro.Peers, TickInterval: ro.Tick,
		SnapshotEvery: ro.SnapEvy, Logger: log.With("raft_member", ro.NodeID)}
	if ro.Peers == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("raft peer listener: %w", err)
		}
		cfg.Listener = ln
		cfg.Peers = map[uint64]string{1: "http://" + ln.Addr().String()}
	} else {
		https := false
		for _, u := range ro.Peers {
			if strings.HasPrefix(u, "https://") {
				https = true
			}
		}
		switch {
		case https && ct == nil:
			return nil, errors.New("--raft-peers uses https but FELIX_CONTROLPLANE_TLS_CERT/_KEY are not set")
		case https:
			cfg.TLS = ct.peerConfig()
		default:
			log.Warn("raft peers talk plain HTTP: use https peer URLs with FELIX_CONTROLPLANE_TLS_CERT outside tests")
		}
		if u, err := url.Parse(ro.Peers[ro.NodeID]); err == nil {
			log.Info("raft member listening for peers", "id", ro.NodeID, "addr", u.Host, "members", len(ro.Peers))
		}
	}
	return controlplane.OpenRaftStore(cfg)
}

// waitForQuorum blocks until the group answers a linearizable read, so
// the signing key and bootstrap see the replicated state. It logs while
// waiting and gives up only when ctx ends.
func waitForQuorum(ctx context.Context, store *controlplane.RaftStore, log *slog.Logger) error {
	start, lastLog := time.Now(), time.Time{}
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _, err := store.Meta(cctx, "bootstrapped")
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(lastLog) >= 5*time.Second {
			lastLog = time.Now()
			log.Info("waiting for the control plane's raft group to reach a quorum", "waited", time.Since(start).Round(time.Second), "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
