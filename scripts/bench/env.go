package main

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// env is what a workload runs against: the temp dir, the child processes,
// and the servers started for the current workload, by key.
type env struct {
	o        *options
	p        *procs
	tmp      string
	self     string // this harness's binary, re-executed for the peer servers
	felixBin string
	tls      tlsFiles
	seq      int
	felixes  map[string]*felixNode
	natses   map[string]*natsNode
	etcds    map[string]*etcdCluster
	groups   map[string]*felixCluster
	devs     map[string]*felixDev    // felix dev clusters
	natsCls  map[string]*natsCluster // three-server NATS clusters
	warnings map[string]string       // by workload, added to its notes
}

// checkOnDisk warns, in the workload's notes, when a durable run left
// nothing in the node's storage directory: that broker build served the
// durable stream from memory, and its figures are not a durable write path.
func (e *env) checkOnDisk(workload string, n *felixNode) {
	if dirBytes(filepath.Join(n.dir, "durable")) > 0 {
		return
	}
	e.warnings[workload] = "WARNING: Felix wrote nothing to its storage directory, so this build served the durable stream from memory."
}

// dirBytes is the size of the regular files under dir (0 if absent).
func dirBytes(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

func (e *env) dir(kind string) string {
	e.seq++
	return filepath.Join(e.tmp, fmt.Sprintf("%s-%d", kind, e.seq))
}

// felix returns the running Felix node for key, starting it with the extra
// environment on first use.
func (e *env) felix(ctx context.Context, key string, extra ...string) (*felixNode, error) {
	if n, ok := e.felixes[key]; ok && n.proc.alive() {
		return n, nil
	} else if ok {
		logf("felix serve (%s) had exited (%v); starting a new one", key, n.proc.err)
		n.stop()
	}
	dir := e.dir("felix")
	n, err := startFelix(ctx, e.p, e.felixBin, dir, append(extra, "FELIX_DURABLE_STORAGE_DIR="+filepath.Join(dir, "durable")))
	if err != nil {
		return nil, err
	}
	e.felixes[key] = n
	return n, nil
}

// nats returns the running NATS server for key, starting it on first use.
func (e *env) nats(ctx context.Context, key string, cfg natsConfig) (*natsNode, error) {
	if n, ok := e.natses[key]; ok && n.proc.alive() {
		return n, nil
	} else if ok {
		logf("nats server (%s) had exited (%v); starting a new one", key, n.proc.err)
		n.stop()
	}
	n, err := startNATS(ctx, e.p, e.self, e.dir("nats"), e.tls, cfg)
	if err != nil {
		return nil, err
	}
	e.natses[key] = n
	return n, nil
}

// felixDev returns the running three-node felix dev cluster for key,
// starting it with the extra environment on first use.
func (e *env) felixDev(ctx context.Context, key string, extra ...string) (*felixDev, error) {
	if d, ok := e.devs[key]; ok && d.alive() {
		return d, nil
	} else if ok {
		logf("felix dev (%s) or one of its nodes had exited (%v); starting a new cluster", key, d.proc.err)
		d.stop()
	}
	d, err := startFelixDev(ctx, e.p, e.felixBin, e.dir("felix-dev"), 3, extra)
	if err != nil {
		return nil, err
	}
	e.devs[key] = d
	return d, nil
}

// natsCluster returns the running three-server NATS cluster for key,
// starting it on first use.
func (e *env) natsCluster(ctx context.Context, key string, cfg natsConfig) (*natsCluster, error) {
	if c, ok := e.natsCls[key]; ok && c.alive() {
		return c, nil
	} else if ok {
		logf("a server of the NATS cluster (%s) had exited; starting a new cluster", key)
		c.stop()
	}
	c, err := startNATSCluster(ctx, e.p, e.self, e.dir("nats-cluster"), e.tls, cfg)
	if err != nil {
		return nil, err
	}
	e.natsCls[key] = c
	return c, nil
}

// felixGroup returns the running three-member Felix control plane for key.
func (e *env) felixGroup(ctx context.Context, key string) (*felixCluster, error) {
	if c, ok := e.groups[key]; ok {
		return c, nil
	}
	c, err := startFelixCluster(ctx, e.p, e.felixBin, e.dir("felix-cp"), 3)
	if err != nil {
		return nil, err
	}
	e.groups[key] = c
	return c, nil
}

// etcd returns the running three-member etcd cluster for key.
func (e *env) etcd(ctx context.Context, key string) (*etcdCluster, error) {
	return e.etcdMembers(ctx, key, 3)
}

// etcdMembers returns the running etcd cluster for key, starting it with
// the given number of members on first use.
func (e *env) etcdMembers(ctx context.Context, key string, members int) (*etcdCluster, error) {
	if c, ok := e.etcds[key]; ok {
		return c, nil
	}
	c, err := startEtcd(ctx, e.p, e.self, e.dir("etcd"), members)
	if err != nil {
		return nil, err
	}
	e.etcds[key] = c
	return c, nil
}

// stop stops and forgets the servers whose key has the prefix ("" = all).
func (e *env) stop(prefix string) {
	for k, n := range e.felixes {
		if strings.HasPrefix(k, prefix) {
			n.stop()
			delete(e.felixes, k)
		}
	}
	for k, n := range e.natses {
		if strings.HasPrefix(k, prefix) {
			n.stop()
			delete(e.natses, k)
		}
	}
	for k, c := range e.etcds {
		if strings.HasPrefix(k, prefix) {
			c.stop()
			delete(e.etcds, k)
		}
	}
	for k, d := range e.devs {
		if strings.HasPrefix(k, prefix) {
			d.stop()
			delete(e.devs, k)
		}
	}
	for k, c := range e.natsCls {
		if strings.HasPrefix(k, prefix) {
			c.stop()
			delete(e.natsCls, k)
		}
	}
	for k, c := range e.groups {
		if strings.HasPrefix(k, prefix) {
			c.stop()
			delete(e.groups, k)
		}
	}
}

// felixBench runs one `felix bench` client process against the node over
// transport tr (`--transport tr`; "" adds no flag, for scenarios that do
// not reach a broker).
func (e *env) felixBench(ctx context.Context, n *felixNode, work time.Duration, tr string, args ...string) (figures, error) {
	if tr != "" {
		args = append(slices.Clip(args), "--transport", tr)
	}
	return runFelixBench(ctx, e.p, e.felixBin, n, work+2*time.Minute, args...)
}

func secs(d time.Duration) string { return d.String() }
