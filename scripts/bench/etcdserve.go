package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// serveEtcd is the hidden `serve-etcd` subcommand: one member of an etcd
// cluster on loopback, printing "READY" once the cluster serves it and
// running until SIGTERM.
func serveEtcd(args []string) error {
	fs := flag.NewFlagSet("serve-etcd", flag.ContinueOnError)
	name := fs.String("name", "", "member name")
	dir := fs.String("dir", "", "data directory")
	client := fs.String("client-url", "", "client URL")
	peer := fs.String("peer-url", "", "peer URL")
	cluster := fs.String("initial-cluster", "", "name=peerURL,...")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cu, err := url.Parse(*client)
	if err != nil {
		return err
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		return err
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = *name, *dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster, cfg.InitialClusterToken = *cluster, "felix-bench"
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return err
	case <-time.After(60 * time.Second):
		return errors.New("etcd member not ready within 60s")
	}
	fmt.Println("READY")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	select {
	case <-ctx.Done():
	case err := <-e.Err():
		return err
	}
	return nil
}

// etcdCluster is three members, each its own child process.
type etcdCluster struct {
	members   []*child
	endpoints []string
}

// freePorts asks the kernel for n free loopback ports. The listeners are
// closed before the members bind them, so another process could take one
// in between; a member that cannot bind fails its start, loudly.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func startEtcd(ctx context.Context, p *procs, self, dir string, members int) (*etcdCluster, error) {
	ports, err := freePorts(2 * members)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range members {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	ec := &etcdCluster{}
	readies := make([]<-chan string, members)
	for i := range members {
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
		mdir := filepath.Join(dir, fmt.Sprintf("m%d", i))
		if err := os.MkdirAll(mdir, 0o700); err != nil {
			ec.stop()
			return nil, err
		}
		cmd := exec.Command(self, "serve-etcd", "--name", fmt.Sprintf("m%d", i), "--dir", filepath.Join(mdir, "data"),
			"--client-url", client, "--peer-url", fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			"--initial-cluster", strings.Join(initial, ","))
		cmd.Dir = mdir
		out, err := cmd.StdoutPipe()
		if err != nil {
			ec.stop()
			return nil, err
		}
		c, err := p.start(fmt.Sprintf("etcd member m%d", i), cmd)
		if err != nil {
			ec.stop()
			return nil, err
		}
		readies[i] = readyLine(out, "READY")
		ec.members = append(ec.members, c)
		ec.endpoints = append(ec.endpoints, client)
	}
	for i, c := range ec.members {
		if _, err := awaitReady(ctx, c, readies[i], 60*time.Second); err != nil {
			ec.stop()
			return nil, err
		}
	}
	return ec, nil
}

func (ec *etcdCluster) stop() {
	for _, m := range ec.members {
		m.stop(20 * time.Second)
	}
}
