package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/roles/broker/peer"
	"github.com/felixmq/felix/roles/broker/tlsconf"
)

// sharedDevCA makes one development CA and returns, for each node, a
// directory holding a copy of it, as an operator copies ca.pem and
// ca-key.pem into each node's <data-dir>/tls.
func sharedDevCA(t testing.TB, nodes int) []string {
	t.Helper()
	caDir := t.TempDir()
	certPath, keyPath, _, err := tlsconf.EnsureDevCA(caDir)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for range nodes {
		dir := filepath.Join(t.TempDir(), "tls")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{certPath, keyPath} {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

func peerConfig(id, caDir string) Config {
	cfg := testConfig()
	cfg.Node.ID = id
	cfg.Peer = PeerConfig{Addr: "127.0.0.1:0", DevCADir: caDir}
	return cfg
}

func TestBrokersLinkOverTheirPeerListeners(t *testing.T) {
	dirs := sharedDevCA(t, 2)
	a := startEnv(t, peerConfig("broker-a", dirs[0]))
	b := startEnv(t, peerConfig("broker-b", dirs[1]))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, tlsconf.NodeCertFile)); err != nil {
			t.Fatalf("no node certificate issued: %v", err)
		}
	}
	if a.srv.PeerAddr() == nil || a.srv.PeerAddr().String() == a.srv.Addr().String() {
		t.Fatalf("peer listener %v, client listener %v", a.srv.PeerAddr(), a.srv.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := a.srv.Peer().Dial(ctx, "broker-b", b.srv.PeerAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.srv.Peer().Links(); len(got) != 1 || got[0].NodeID != "broker-a" {
		t.Fatalf("b's links: %+v", got)
	}
	// The client listener does not speak the peer protocol.
	if _, err := a.srv.Peer().Dial(ctx, "broker-b", b.srv.Addr().String()); err == nil {
		t.Fatal("a peer link was made to the client listener")
	}
	if err := b.shutdown(); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	if !errors.Is(l.Err(), peer.ErrClosed) {
		t.Fatalf("the link ended with %v, want ErrClosed (shutdown)", l.Err())
	}
	if err := a.shutdown(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "broker/peer.") {
			t.Fatalf("a peer goroutine outlives Shutdown:\n%s", g)
		}
	}
}

func TestRegistrationNamesThePeerListener(t *testing.T) {
	dirs := sharedDevCA(t, 1)
	cfg := peerConfig("broker-7", dirs[0])
	cfg.Durable.StorageDir = t.TempDir()
	srv, reg := startRegistering(t, cfg)
	got := receive(t, reg.regC, "registration")
	if got.PeerAddr == "" || got.PeerAddr != srv.PeerAddr().String() {
		t.Fatalf("peer_addr %q, listener %v", got.PeerAddr, srv.PeerAddr())
	}
	if links := srv.Peer(); links == nil {
		t.Fatal("no peer endpoint")
	}
}

func TestPeerAdvertiseAddrIsRegistered(t *testing.T) {
	dirs := sharedDevCA(t, 1)
	cfg := peerConfig("broker-7", dirs[0])
	cfg.Peer.AdvertiseAddr = "node7.example:7000"
	_, reg := startRegistering(t, cfg)
	if got := receive(t, reg.regC, "registration"); got.PeerAddr != "node7.example:7000" {
		t.Fatalf("peer_addr %q", got.PeerAddr)
	}
}

func TestPeerConfigFromEnv(t *testing.T) {
	env := map[string]string{
		"FELIX_NODE_PEER_ADDR":           "0.0.0.0:5100",
		"FELIX_NODE_PEER_ADVERTISE_ADDR": "node1:5100",
		"FELIX_NODE_TLS_CERT":            "/c.pem",
		"FELIX_NODE_TLS_KEY":             "/k.pem",
		"FELIX_NODE_TLS_CA":              "/ca.pem",
	}
	c, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := PeerConfig{Addr: "0.0.0.0:5100", AdvertiseAddr: "node1:5100", CertFile: "/c.pem", KeyFile: "/k.pem", CAFile: "/ca.pem"}
	if c.Peer != want {
		t.Fatalf("got %+v, want %+v", c.Peer, want)
	}
	delete(env, "FELIX_NODE_TLS_KEY")
	_, err = ConfigFromEnv(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "FELIX_NODE_TLS_CERT, FELIX_NODE_TLS_KEY and FELIX_NODE_TLS_CA must be set together") {
		t.Fatalf("err = %v", err)
	}
	if c := DefaultConfig(); c.Peer.Addr != "" {
		t.Fatalf("a peer listener by default: %q", c.Peer.Addr)
	}
}

func startErr(t *testing.T, cfg Config) error {
	t.Helper()
	tlsCfg, _ := testTLS(t)
	srv, err := New(cfg, Deps{Catalog: &fakeSource{}, TLS: tlsCfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv.Start(context.Background())
}

func TestPeerListenerNeedsANodeCertificate(t *testing.T) {
	cfg := testConfig()
	cfg.Peer.Addr = "127.0.0.1:0"
	err := startErr(t, cfg)
	if err == nil || !strings.Contains(err.Error(), "needs a node certificate: set FELIX_NODE_TLS_CERT") {
		t.Fatalf("Start = %v", err)
	}
}

func TestOperatorNodeCertificateMustNameThisNode(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath, caPath, err := tlsconf.WriteNodeCert(dir, "broker-x")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Node.ID = "broker-a"
	cfg.Peer = PeerConfig{Addr: "127.0.0.1:0", CertFile: certPath, KeyFile: keyPath, CAFile: caPath}
	err = startErr(t, cfg)
	if err == nil || !strings.Contains(err.Error(), `names node "broker-x", but this broker is "broker-a"`) {
		t.Fatalf("Start = %v", err)
	}
	cfg.Node.ID = "broker-x"
	if err := startErr(t, cfg); err != nil {
		t.Fatalf("the operator's certificate for this node: %v", err)
	}
}

// startRegistering starts a broker with cfg that registers with a fake
// registry, shut down at the end of the test.
func startRegistering(t *testing.T, cfg Config) (*Server, *fakeRegistry) {
	t.Helper()
	reg := newFakeRegistry()
	tlsCfg, _ := testTLS(t)
	srv, err := New(cfg, Deps{Catalog: &fakeSource{}, Registry: reg, TLS: tlsCfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return srv, reg
}
