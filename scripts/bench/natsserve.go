package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// natsConfig is how a NATS server child is run.
type natsConfig struct {
	jetstream  bool
	syncAlways bool // JetStream file storage fsyncs every write
}

// serveNATS is the hidden `serve-nats` subcommand: one embedded NATS server
// with TLS on a kernel-chosen port, printing "READY <host:port>" when it
// takes connections and running until SIGTERM.
func serveNATS(args []string) error {
	fs := flag.NewFlagSet("serve-nats", flag.ContinueOnError)
	dir := fs.String("dir", "", "JetStream store directory")
	js := fs.Bool("jetstream", false, "enable JetStream")
	syncAlways := fs.Bool("sync-always", false, "fsync every JetStream file write")
	cert := fs.String("cert", "", "server certificate PEM")
	key := fs.String("key", "", "server key PEM")
	cl := clusterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	pair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		return err
	}
	opts := &server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		TLS: true, TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
		TLSTimeout: 5, MaxPayload: 8 << 20,
	}
	if *js {
		opts.JetStream, opts.StoreDir, opts.SyncAlways = true, *dir, *syncAlways
		opts.JetStreamMaxMemory = 2 << 30
		opts.JetStreamMaxStore = 8 << 30
		// nats-server 2.14+ caps each stream at 1,000 consumers unless the
		// stream or account sets a limit (a KV bucket's stream says -1,
		// which counts as unset); every KV Watch is an ephemeral consumer,
		// so watch-fanout needs it unlimited.
		opts.JetStreamLimits.DefaultMaxConsumers = -1
	}
	if err := cl.apply(opts, pair); err != nil {
		return err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		s.Shutdown()
		return errors.New("nats server not ready within 20s")
	}
	fmt.Printf("READY %s\n", s.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// natsNode is a running NATS server child.
type natsNode struct {
	proc *child
	url  string
	ca   string
}

func startNATS(ctx context.Context, p *procs, self, dir string, tf tlsFiles, cfg natsConfig) (*natsNode, error) {
	return startNATSWith(ctx, p, self, dir, tf, cfg, nil)
}

// startNATSWith starts a serve-nats child with the extra flags (a
// cluster member's) and waits until it takes connections.
func startNATSWith(ctx context.Context, p *procs, self, dir string, tf tlsFiles, cfg natsConfig, extra []string) (*natsNode, error) {
	store := filepath.Join(dir, "jetstream")
	if err := os.MkdirAll(store, 0o755); err != nil {
		return nil, err
	}
	args := []string{"serve-nats", "--dir", store, "--cert", tf.Cert, "--key", tf.Key}
	if cfg.jetstream {
		args = append(args, "--jetstream")
	}
	if cfg.syncAlways {
		args = append(args, "--sync-always")
	}
	cmd := exec.Command(self, append(args, extra...)...)
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c, err := p.start("nats server", cmd)
	if err != nil {
		return nil, err
	}
	addr, err := awaitReady(ctx, c, readyLine(out, "READY "), 30*time.Second)
	if err != nil {
		c.stop(5 * time.Second)
		return nil, err
	}
	return &natsNode{proc: c, url: "tls://" + addr, ca: tf.CA}, nil
}

func (n *natsNode) stop() { n.proc.stop(20 * time.Second) }
