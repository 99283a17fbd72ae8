package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats-server/v2/server"
)

// A NATS cluster is three serve-nats children, each its own process,
// named n1..n3, joined by routes on 127.0.0.1 (TLS 1.3, verified against
// the throwaway CA, as Felix's peer links are), each with JetStream file
// storage in its own directory.

// natsClusterName is the cluster every member joins.
const natsClusterName = "bench"

// clusterOptions are serve-nats' cluster flags; a zero clusterPort runs a
// standalone server.
type clusterOptions struct {
	name        *string
	clusterPort *int
	routes      *string
	ca          *string
}

func clusterFlags(fs *flag.FlagSet) clusterOptions {
	return clusterOptions{
		name:        fs.String("name", "", "server name (a cluster member's n1, n2, ...)"),
		clusterPort: fs.Int("cluster-port", 0, "route listener port on 127.0.0.1 (0: no cluster)"),
		routes:      fs.String("routes", "", "comma-separated route URLs of every member, this one's included"),
		ca:          fs.String("ca", "", "CA PEM that signed every member's certificate (routes verify it)"),
	}
}

// apply makes opts a cluster member when a cluster port is set.
func (c clusterOptions) apply(opts *server.Options, pair tls.Certificate) error {
	if *c.name != "" {
		opts.ServerName = *c.name
	}
	if *c.clusterPort == 0 {
		return nil
	}
	pem, err := os.ReadFile(*c.ca)
	if err != nil {
		return fmt.Errorf("--ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("--ca %s: no certificate", *c.ca)
	}
	opts.Cluster.Name, opts.Cluster.Host, opts.Cluster.Port = natsClusterName, "127.0.0.1", *c.clusterPort
	opts.Cluster.TLSConfig = &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS13}
	opts.Cluster.TLSTimeout = 5
	for _, r := range strings.Split(*c.routes, ",") {
		u, err := url.Parse(strings.TrimSpace(r))
		if err != nil {
			return fmt.Errorf("--routes %q: %w", r, err)
		}
		opts.Routes = append(opts.Routes, u)
	}
	return nil
}

// natsCluster is three running NATS servers, by name n1..n3.
type natsCluster struct {
	members []*natsNode
	names   []string
}

// natsClusterSize is the members of a NATS cluster, matching felix dev's three nodes.
const natsClusterSize = 3

// startNATSCluster starts three JetStream servers joined by routes, each
// in its own directory under dir. The route ports come from freePorts:
// each member must name the others' before any starts.
func startNATSCluster(ctx context.Context, p *procs, self, dir string, tf tlsFiles, cfg natsConfig) (*natsCluster, error) {
	cfg.jetstream = true
	ports, err := freePorts(natsClusterSize)
	if err != nil {
		return nil, err
	}
	routes := make([]string, len(ports))
	for i, port := range ports {
		routes[i] = "tls://127.0.0.1:" + strconv.Itoa(port)
	}
	c := &natsCluster{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(ports))
	for i, port := range ports {
		name := "n" + strconv.Itoa(i+1)
		wg.Add(1)
		go func() { // in parallel: no member is ready before it has routes
			defer wg.Done()
			extra := []string{"--name", name, "--cluster-port", strconv.Itoa(port), "--routes", strings.Join(routes, ","), "--ca", tf.CA}
			n, err := startNATSWith(ctx, p, self, filepath.Join(dir, name), tf, cfg, extra)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[i] = fmt.Errorf("nats %s: %w", name, err)
				return
			}
			c.members = append(c.members, n)
			c.names = append(c.names, name)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// member returns the server named name, nil if none.
func (c *natsCluster) member(name string) *natsNode {
	for i, n := range c.names {
		if n == name {
			return c.members[i]
		}
	}
	return nil
}

// pids are the members' process ids.
func (c *natsCluster) pids() []int {
	var out []int
	for _, m := range c.members {
		out = append(out, m.proc.pid())
	}
	return out
}

// alive says whether every member still runs.
func (c *natsCluster) alive() bool {
	for _, m := range c.members {
		if !m.proc.alive() {
			return false
		}
	}
	return len(c.members) == natsClusterSize
}

func (c *natsCluster) stop() {
	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Add(1)
		go func() { defer wg.Done(); m.stop() }()
	}
	wg.Wait()
}
