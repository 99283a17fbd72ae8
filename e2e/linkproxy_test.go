package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// linkNet puts a TCP fault proxy in front of every node's peer listener
// of a felix dev cluster (peerLinks: node i advertises its proxy's
// address, FELIX_DEV_NODE<i>_NODE_PEER_ADVERTISE_ADDR, and peer links
// dial TCP, FELIX_PEER_TRANSPORT=tcp), or of every node's control-plane
// Raft peer listener (raftLinks: FELIX_DEV_RAFT_VIA<i> names the proxy in
// the other nodes' --raft-peers), so every link another node dials to it
// goes through the proxy. Each relayed connection knows which node
// dialed it (the process owning its source port, found in /proc) and
// which node it reaches, so faults are set per pair of nodes and per
// direction of the bytes, whichever end dialed:
//
//   - cut(a, b) holds every byte between a and b both ways and refuses new
//     connections between them (a partition);
//   - oneWay(a, b) holds the bytes a sends to b (on every connection
//     between them, whichever end dialed), while b's still reach a;
//   - heal lifts every fault: held bytes are delivered, as TCP would once
//     a partition heals (unless an end gave the connection up meanwhile).
//
// Holding rather than dropping keeps each TLS stream whole: the ends see
// silence, as over a real partition, not corruption.
type linkNet struct {
	t       *testing.T
	dataDir string // felix dev's --data-dir: dev.json names each node's real addresses and PID
	kind    linkKind
	proxies []*linkProxy

	mu      sync.Mutex
	held    map[[2]string]bool // held[{from, to}]: bytes from node from to node to are held
	cuts    map[[2]string]bool // cuts[{a, b}] (both orders): new connections refused
	changed chan struct{}      // closed when the faults change
	closed  bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup

	heldChunks atomic.Int64 // chunks that waited for a fault to lift
	refused    atomic.Int64 // connections refused by a cut
	unknown    atomic.Int64 // connections whose dialer was not found
}

// linkProxy is the proxy in front of one node's peer listener.
type linkProxy struct {
	node string // node1, ...
	ln   net.Listener
}

// linkKind is which listener of each node a linkNet stands in front of.
type linkKind int

const (
	peerLinks linkKind = iota // the broker's peer listener (peer links, over TCP)
	raftLinks                 // the control plane's Raft peer listener (HTTP)
)

// newLinkNet listens for n nodes' proxies of kind on free loopback ports;
// env is what makes felix dev's nodes reach each other through them:
// node i advertises its peer proxy (FELIX_DEV_NODE<i>_NODE_PEER_ADVERTISE_ADDR,
// and peer links dial TCP), or the other nodes' --raft-peers name its Raft
// proxy (FELIX_DEV_RAFT_VIA<i>). The proxies find the nodes' real
// addresses in dataDir's dev.json when a connection arrives (the cluster
// is started after this).
func newLinkNet(t *testing.T, dataDir string, n int, kind linkKind) (*linkNet, []string) {
	t.Helper()
	ln := &linkNet{t: t, dataDir: dataDir, kind: kind, held: map[[2]string]bool{}, cuts: map[[2]string]bool{},
		changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	var env []string
	for i := 1; i <= n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := &linkProxy{node: fmt.Sprintf("node%d", i), ln: l}
		ln.proxies = append(ln.proxies, p)
		if kind == raftLinks {
			env = append(env, fmt.Sprintf("FELIX_DEV_RAFT_VIA%d=%s", i, l.Addr()))
		} else {
			env = append(env, fmt.Sprintf("FELIX_DEV_NODE%d_NODE_PEER_ADVERTISE_ADDR=%s", i, l.Addr()))
		}
		ln.wg.Add(1)
		go ln.acceptLoop(p)
	}
	t.Cleanup(ln.close)
	if kind == peerLinks {
		env = append(env, "FELIX_PEER_TRANSPORT=tcp")
	}
	return ln, env
}

// target is the real address of the listener this net proxies on n.
func (ln *linkNet) target(n devNode) string {
	if ln.kind == raftLinks {
		return strings.TrimPrefix(n.RaftPeerURL, "http://")
	}
	return n.PeerAddr
}

// cut partitions node a from every node in others, both ways.
func (ln *linkNet) cut(a string, others ...string) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	for _, b := range others {
		ln.held[[2]string{a, b}], ln.held[[2]string{b, a}] = true, true
		ln.cuts[[2]string{a, b}], ln.cuts[[2]string{b, a}] = true, true
	}
	ln.changedLocked()
}

// oneWay holds every byte from sends to each node in to; their bytes
// still reach it.
func (ln *linkNet) oneWay(from string, to ...string) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	for _, b := range to {
		ln.held[[2]string{from, b}] = true
	}
	ln.changedLocked()
}

// heal lifts every fault.
func (ln *linkNet) heal() {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	clear(ln.held)
	clear(ln.cuts)
	ln.changedLocked()
}

func (ln *linkNet) changedLocked() {
	close(ln.changed)
	ln.changed = make(chan struct{})
}

// gate reports whether bytes from node from to node to are held now, and
// a channel closed at the next change of the faults.
func (ln *linkNet) gate(from, to string) (bool, <-chan struct{}) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	return ln.held[[2]string{from, to}] && !ln.closed, ln.changed
}

func (ln *linkNet) isCut(a, b string) bool {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	return ln.cuts[[2]string{a, b}]
}

func (ln *linkNet) close() {
	ln.mu.Lock()
	if ln.closed {
		ln.mu.Unlock()
		return
	}
	ln.closed = true
	ln.changedLocked()
	for c := range ln.conns {
		c.Close()
	}
	ln.mu.Unlock()
	for _, p := range ln.proxies {
		p.ln.Close()
	}
	ln.wg.Wait()
}

func (ln *linkNet) track(cs ...net.Conn) bool {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.closed {
		return false
	}
	for _, c := range cs {
		ln.conns[c] = struct{}{}
	}
	return true
}

func (ln *linkNet) untrack(cs ...net.Conn) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	for _, c := range cs {
		delete(ln.conns, c)
	}
}

func (ln *linkNet) acceptLoop(p *linkProxy) {
	defer ln.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		ln.wg.Add(1)
		go ln.serve(p, c)
	}
}

// serve relays one connection dialed to p's node, once it knows the
// dialer and the node's real address.
func (ln *linkNet) serve(p *linkProxy, c net.Conn) {
	defer ln.wg.Done()
	nodes, err := readDevNodes(ln.dataDir)
	target := ""
	for _, n := range nodes {
		if n.Name == p.node {
			target = ln.target(n)
		}
	}
	if err != nil || target == "" {
		c.Close() // not started yet: the dialer tries again
		return
	}
	from := dialerOf(c, p.ln.Addr(), nodes)
	if from == "" {
		ln.unknown.Add(1)
		from = "?"
	}
	if ln.isCut(from, p.node) {
		ln.refused.Add(1)
		c.Close()
		return
	}
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !ln.track(c, up) {
		c.Close()
		up.Close()
		return
	}
	defer ln.untrack(c, up)
	var wg sync.WaitGroup
	wg.Go(func() { ln.relay(c, up, from, p.node) })
	ln.relay(up, c, p.node, from)
	wg.Wait()
}

// relay copies src (bytes from node from) to dst (node to), holding each
// chunk while a fault holds that direction, and closes both ends when
// either fails.
func (ln *linkNet) relay(src, dst net.Conn, from, to string) {
	defer func() { src.Close(); dst.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for counted := false; ; {
				held, changed := ln.gate(from, to)
				if !held {
					break
				}
				if !counted {
					ln.heldChunks.Add(1)
					counted = true
				}
				<-changed
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// readDevNodes reads dev.json's nodes under dataDir.
func readDevNodes(dataDir string) ([]devNode, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "dev.json"))
	if err != nil {
		return nil, err
	}
	var df struct{ Nodes []devNode }
	if err := json.Unmarshal(b, &df); err != nil {
		return nil, err
	}
	return df.Nodes, nil
}

// dialerOf names the node whose process owns the other end of c, a
// connection accepted on proxy: the socket bound to c's remote port and
// connected to proxy, found in /proc/net/tcp, then among the nodes'
// open files. "" when it is not found (not Linux, or not a node).
func dialerOf(c net.Conn, proxy net.Addr, nodes []devNode) string {
	src, ok1 := c.RemoteAddr().(*net.TCPAddr)
	dst, ok2 := proxy.(*net.TCPAddr)
	if !ok1 || !ok2 {
		return ""
	}
	inode := socketInode(src.Port, dst.Port)
	if inode == "" {
		return ""
	}
	want := "socket:[" + inode + "]"
	for _, n := range nodes {
		if n.PID <= 0 {
			continue
		}
		dir := fmt.Sprintf("/proc/%d/fd", n.PID)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && l == want {
				return n.Name
			}
		}
	}
	return ""
}

// socketInode finds in /proc/net/tcp the inode of the IPv4 socket whose
// local port is local and remote port is remote ("" if none).
func socketInode(local, remote int) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || hexPort(fields[1]) != local || hexPort(fields[2]) != remote {
			continue
		}
		return fields[9]
	}
	return ""
}

// hexPort is the port of /proc/net/tcp's "ADDR:PORT" (hex), -1 if none.
func hexPort(s string) int {
	_, p, ok := strings.Cut(s, ":")
	if !ok {
		return -1
	}
	n, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return -1
	}
	return int(n)
}

// TestLinkNetFaults checks the link proxy against an echo server played
// as node1, dialed by this process played as node2: it finds the dialer,
// relays, holds one direction or both, refuses under a cut, and delivers
// what it held once healed.
func TestLinkNetFaults(t *testing.T) {
	echo := startEcho(t)
	dir := t.TempDir()
	df := map[string]any{"nodes": []devNode{{Name: "node1", PeerAddr: echo}, {Name: "node2", PID: os.Getpid()}}}
	b, _ := json.Marshal(df)
	if err := os.WriteFile(filepath.Join(dir, "dev.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, env := newLinkNet(t, dir, 1, peerLinks)
	addr := strings.TrimPrefix(env[0], "FELIX_DEV_NODE1_NODE_PEER_ADVERTISE_ADDR=")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(msg string) {
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(msg string, within time.Duration) error {
		c.SetReadDeadline(time.Now().Add(within))
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil {
			return err
		}
		if string(got) != msg {
			t.Fatalf("echo %q, want %q", got, msg)
		}
		return nil
	}
	send("hello")
	if err := expect("hello", 5*time.Second); err != nil {
		t.Fatalf("relay: %v", err)
	}
	if n := ln.unknown.Load(); n != 0 {
		t.Fatalf("the dialer (this process, node2) was not found: %d unknown", n)
	}
	for _, fault := range []struct {
		name string
		set  func()
	}{
		{"node2 to node1 held", func() { ln.oneWay("node2", "node1") }}, // the request is held
		{"node1 to node2 held", func() { ln.oneWay("node1", "node2") }}, // the echo is held
		{"cut", func() { ln.cut("node1", "node2") }},
	} {
		fault.set()
		send(fault.name)
		if err := expect(fault.name, 300*time.Millisecond); err == nil {
			t.Fatalf("%s: the echo came through", fault.name)
		}
		ln.heal()
		if err := expect(fault.name, 5*time.Second); err != nil {
			t.Fatalf("%s, healed: %v", fault.name, err)
		}
	}
	if ln.heldChunks.Load() < 3 {
		t.Fatalf("%d chunks held, want at least 3", ln.heldChunks.Load())
	}
	ln.cut("node2", "node1")
	r, err := net.Dial("tcp", addr)
	if err == nil {
		r.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := r.Read(make([]byte, 1)); err == nil {
			t.Fatal("a connection under a cut reads")
		}
		r.Close()
	}
	if ln.refused.Load() != 1 {
		t.Fatalf("%d connections refused under the cut, want 1", ln.refused.Load())
	}
}

// startEcho runs a TCP echo server on loopback until the test ends.
func startEcho(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { io.Copy(c, c); c.Close() })
		}
	})
	return l.Addr().String()
}
