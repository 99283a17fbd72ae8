package raftmeta

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// pathCounter counts the peer requests a proxy saw, by path.
type pathCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (p *pathCounter) add(path string) {
	p.mu.Lock()
	p.n[path]++
	p.mu.Unlock()
}

func (p *pathCounter) get(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[path]
}

// newProxiedCluster starts size members whose peers reach one another
// through an HTTP proxy in front of each member. With asOld, the proxies
// answer 404 on the endpoints an older member lacks (/raft/stream and
// /raft/proposals), as a member of the previous release would.
func newProxiedCluster(t *testing.T, size int, asOld bool) (*testCluster, *pathCounter) {
	t.Helper()
	seen := &pathCounter{n: map[string]int{}}
	c := startTestCluster(t, size, 0, nil, func(_ uint64, addr string) string {
		target, _ := url.Parse("http://" + addr)
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.FlushInterval = -1 // pass a stream's batches on at once
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.add(r.URL.Path)
			if asOld && (r.URL.Path == "/raft/stream" || r.URL.Path == "/raft/proposals") {
				http.NotFound(w, r)
				return
			}
			rp.ServeHTTP(w, r)
		}))
		t.Cleanup(proxy.Close)
		return proxy.URL
	})
	return c, seen
}

// putEverywhere writes n keys through every member at once, so followers
// forward concurrently, then waits for identical state.
func putEverywhere(c *testCluster, n int) {
	var wg sync.WaitGroup
	for id := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				c.put(id, fmt.Sprintf("m%d-%03d", id, i), "v")
			}
		}()
	}
	wg.Wait()
	c.converged()
}

// Raft messages travel on one stream per peer, and writes through a
// follower reach the leader in batches on /raft/proposals.
func TestPeersStreamMessagesAndBatchProposals(t *testing.T) {
	c, seen := newProxiedCluster(t, 3, false)
	c.leader()
	putEverywhere(c, 50)
	if got := seen.get("/raft/message"); got != 0 {
		t.Fatalf("%d messages were posted one batch at a time, want all on streams", got)
	}
	if got := seen.get("/raft/stream"); got == 0 || got > 12 {
		t.Fatalf("%d streams opened, want one per peer and a few reconnects at most", got)
	}
	if seen.get("/raft/proposals") == 0 || seen.get("/raft/propose") != 0 {
		t.Fatalf("forwarded writes: %d batches, %d single; want batches only", seen.get("/raft/proposals"), seen.get("/raft/propose"))
	}
}

// A group whose members lack the stream and batch endpoints (the previous
// release, during a rolling upgrade) still replicates and forwards: the
// newer members fall back to a POST per message batch and per proposal.
func TestPeersFallBackForOlderMembers(t *testing.T) {
	c, seen := newProxiedCluster(t, 3, true)
	c.leader()
	putEverywhere(c, 30)
	if seen.get("/raft/message") == 0 {
		t.Fatal("no message batch was posted to the older members")
	}
	if seen.get("/raft/propose") == 0 {
		t.Fatal("no write was forwarded one by one to an older leader")
	}
}

func TestProposalsRoundTrip(t *testing.T) {
	batch := []*forwardReq{{env: encodeEnvelope(1, []byte("a"))}, {env: encodeEnvelope(2, []byte("bc"))}}
	b := encodeProposals(batch)
	envs, err := decodeProposals(b)
	if err != nil || len(envs) != 2 || string(envs[1]) != string(batch[1].env) {
		t.Fatalf("round trip: %q %v", envs, err)
	}
	if _, err := decodeProposals(b[:len(b)-1]); err == nil {
		t.Fatal("truncated batch accepted")
	}
}

func FuzzDecodeProposals(f *testing.F) {
	f.Add(encodeProposals([]*forwardReq{{env: encodeEnvelope(7, []byte("cmd"))}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		envs, err := decodeProposals(b) // must not panic
		for _, e := range envs {
			if _, _, derr := decodeEnvelope(e); err == nil && derr != nil {
				t.Fatalf("accepted an undecodable envelope %x", e)
			}
		}
	})
}
