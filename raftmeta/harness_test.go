package raftmeta

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testCluster runs members in-process on 127.0.0.1 listeners with KV state
// machines, each in its own temp dir.
type testCluster struct {
	t             testing.TB
	peers         map[uint64]string
	addrs         map[uint64]string
	dirs          map[uint64]string
	nodes         map[uint64]*Node
	kvs           map[uint64]*KV
	tick          time.Duration
	snapshotEvery uint64
	tls           *tls.Config
	hooks         *readyHooks // given to every member's Config
}

const testTick = 10 * time.Millisecond

func newTestCluster(t testing.TB, size int, snapshotEvery uint64) *testCluster {
	t.Helper()
	return newTestClusterTLS(t, size, snapshotEvery, nil)
}

func newTestClusterTLS(t testing.TB, size int, snapshotEvery uint64, tlsConf *tls.Config) *testCluster {
	t.Helper()
	scheme := "http://"
	if tlsConf != nil {
		scheme = "https://"
	}
	return startTestCluster(t, size, snapshotEvery, tlsConf, nil, func(_ uint64, addr string) string { return scheme + addr })
}

// startTestCluster starts size members on 127.0.0.1 listeners; peerURL
// names each member to the others (its listener's address, or a proxy in
// front of it). hooks, when not nil, are every member's Ready loop seams.
func startTestCluster(t testing.TB, size int, snapshotEvery uint64, tlsConf *tls.Config, hooks *readyHooks, peerURL func(id uint64, addr string) string) *testCluster {
	t.Helper()
	// Registered first, so it runs last: after the members and whatever
	// the test put in front of them (proxies) are closed.
	before := goroutineSet()
	t.Cleanup(func() { checkNoLeaks(t, before) })
	c := &testCluster{
		t: t, peers: map[uint64]string{}, addrs: map[uint64]string{}, dirs: map[uint64]string{},
		nodes: map[uint64]*Node{}, kvs: map[uint64]*KV{}, tick: testTick, snapshotEvery: snapshotEvery,
		tls: tlsConf, hooks: hooks,
	}
	lns := map[uint64]net.Listener{}
	for id := uint64(1); id <= uint64(size); id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id] = ln
		c.addrs[id] = ln.Addr().String()
		c.peers[id] = peerURL(id, ln.Addr().String())
		c.dirs[id] = t.TempDir()
	}
	for id, ln := range lns {
		c.startWith(id, ln)
	}
	t.Cleanup(c.closeAll)
	return c
}

func testLogger() *slog.Logger {
	if os.Getenv("RAFTMETA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (c *testCluster) startWith(id uint64, ln net.Listener) {
	c.t.Helper()
	kv, err := OpenKV(filepath.Join(c.dirs[id], "kv.db"), KVNoSync())
	if err != nil {
		c.t.Fatal(err)
	}
	n, err := Open(Config{
		ID: id, Dir: c.dirs[id], Peers: c.peers, FSM: kv, Listener: ln, TLS: c.tls,
		TickInterval: c.tick, SnapshotEvery: c.snapshotEvery, Logger: testLogger(), hooks: c.hooks,
	})
	if err != nil {
		kv.Close()
		c.t.Fatal(err)
	}
	c.nodes[id], c.kvs[id] = n, kv
}

// start restarts a stopped member on its old address.
func (c *testCluster) start(id uint64) {
	c.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the old socket may take a moment to be released
		if ln, err = net.Listen("tcp", c.addrs[id]); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	c.startWith(id, ln)
}

func (c *testCluster) stop(id uint64) {
	c.t.Helper()
	n, kv := c.nodes[id], c.kvs[id]
	if n == nil {
		return
	}
	if err := n.Close(); err != nil {
		c.t.Errorf("close %d: %v", id, err)
	}
	kv.Close()
	delete(c.nodes, id)
	delete(c.kvs, id)
}

// wipe stops a member and deletes its data dir.
func (c *testCluster) wipe(id uint64) {
	c.stop(id)
	if err := os.RemoveAll(c.dirs[id]); err != nil {
		c.t.Fatal(err)
	}
	if err := os.MkdirAll(c.dirs[id], 0o700); err != nil {
		c.t.Fatal(err)
	}
}

func (c *testCluster) closeAll() {
	for id := range c.nodes {
		c.stop(id)
	}
}

// waitFor polls cond until it holds or the shared deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leader waits until the running members agree on one leader among them.
func (c *testCluster) leader() uint64 {
	c.t.Helper()
	var lead uint64
	waitFor(c.t, "a leader", func() bool {
		lead = 0
		for id, n := range c.nodes {
			st := n.Status()
			if st.Role == "StateLeader" {
				lead = id
			}
		}
		if lead == 0 {
			return false
		}
		for _, n := range c.nodes {
			if n.Status().Leader != lead {
				return false
			}
		}
		return true
	})
	return lead
}

// put proposes key=value through member id, retrying while the outcome is
// "not taken" or unknown (a put is idempotent).
func (c *testCluster) put(id uint64, key, value string) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.nodes[id].Propose(ctx, KVPut([]byte(key), []byte(value)))
		cancel()
		if err == nil {
			return
		}
		if errors.Is(err, ErrClosed) || time.Now().After(deadline) {
			c.t.Fatalf("put %s via %d: %v", key, id, err)
		}
	}
}

// converged waits until every running member applied the same index and
// holds byte-identical state.
func (c *testCluster) converged() {
	c.t.Helper()
	waitFor(c.t, "identical state on every member", func() bool {
		var want []byte
		var wantIdx uint64
		first := true
		for _, kv := range c.kvs {
			b, idx := snapshotBytes(c.t, kv)
			if first {
				want, wantIdx, first = b, idx, false
				continue
			}
			if idx != wantIdx || string(b) != string(want) {
				return false
			}
		}
		return true
	})
}

func (c *testCluster) get(id uint64, key string) string {
	v, _, err := c.kvs[id].Get([]byte(key))
	if err != nil {
		c.t.Fatal(err)
	}
	return string(v)
}

func keyN(i int) string { return fmt.Sprintf("k%05d", i) }

// storageEmpty reports whether a stopped member's raft.db holds nothing.
func (c *testCluster) storageEmpty(id uint64) bool {
	s, err := OpenStorage(filepath.Join(c.dirs[id], "raft.db"))
	if err != nil {
		c.t.Fatal(err)
	}
	defer s.Close()
	return s.IsEmpty()
}
