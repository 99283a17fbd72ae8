package controlplane

import (
	"net"
	"testing"
	"time"
)

// testStoreOpt adjusts the RaftConfig of a test store.
type testStoreOpt func(*RaftConfig)

func withKeep(n int) testStoreOpt { return func(c *RaftConfig) { c.ChangeLogKeep = n } }

func withSnapshotEvery(n uint64) testStoreOpt {
	return func(c *RaftConfig) { c.SnapshotEvery = n }
}

// testRaftConfig is a member on a 127.0.0.1 listener with a fast clock.
func testRaftConfig(t testing.TB, id uint64, dir string, ln net.Listener, peers map[uint64]string, opts ...testStoreOpt) RaftConfig {
	cfg := RaftConfig{ID: id, Dir: dir, Peers: peers, Listener: ln, TickInterval: 10 * time.Millisecond,
		NoSync: true, OpTimeout: 20 * time.Second, Logger: quietLogger()}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// openTestRaft opens a one-member store in dir; the caller closes it.
func openTestRaft(t testing.TB, dir string, opts ...testStoreOpt) *RaftStore {
	t.Helper()
	ln := listen(t)
	peers := map[uint64]string{1: "http://" + ln.Addr().String()}
	s, err := OpenRaftStore(testRaftConfig(t, 1, dir, ln, peers, opts...))
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	return s
}

// testGroup is a Raft group of stores in one process.
type testGroup struct {
	t      testing.TB
	peers  map[uint64]string
	dirs   map[uint64]string
	opts   []testStoreOpt
	stores map[uint64]*RaftStore
}

// leader waits until a running member is leader and returns its id.
func (g *testGroup) leader(t *testing.T) uint64 {
	t.Helper()
	var id uint64
	waitFor(t, "a leader", func() bool {
		for mid, s := range g.stores {
			if st := s.Node().Status(); st.Leader == mid {
				id = mid
				return true
			}
		}
		return false
	})
	return id
}

// openTestGroup starts n members; they are closed at the end of the test.
func openTestGroup(t testing.TB, n int, opts ...testStoreOpt) *testGroup {
	t.Helper()
	g := &testGroup{t: t, peers: map[uint64]string{}, dirs: map[uint64]string{}, opts: opts, stores: map[uint64]*RaftStore{}}
	lns := map[uint64]net.Listener{}
	for id := uint64(1); id <= uint64(n); id++ {
		lns[id] = listen(t)
		g.peers[id] = "http://" + lns[id].Addr().String()
		g.dirs[id] = t.TempDir()
	}
	for id, ln := range lns {
		g.start(id, ln)
	}
	t.Cleanup(g.closeAll)
	return g
}

func (g *testGroup) start(id uint64, ln net.Listener) {
	g.t.Helper()
	s, err := OpenRaftStore(testRaftConfig(g.t, id, g.dirs[id], ln, g.peers, g.opts...))
	if err != nil {
		ln.Close()
		g.t.Fatal(err)
	}
	g.stores[id] = s
}

// stop closes one member, keeping its directory.
func (g *testGroup) stop(id uint64) {
	if s := g.stores[id]; s != nil {
		s.Close()
		delete(g.stores, id)
	}
}

// restart starts a stopped member again on its old address.
func (g *testGroup) restart(id uint64) {
	g.t.Helper()
	addr := g.peers[id][len("http://"):]
	var ln net.Listener
	var err error
	for range 100 { // the old socket may linger for a moment
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		g.t.Fatal(err)
	}
	g.start(id, ln)
}

func (g *testGroup) closeAll() {
	for id := range g.stores {
		g.stop(id)
	}
}

// waitFor polls cond until it holds, failing the test after 30 seconds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
