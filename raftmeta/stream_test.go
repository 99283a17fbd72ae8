package raftmeta

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/felixmq/felix/wire"
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

// release is how a proxied member looks to its peers.
type release int

const (
	thisRelease   release = iota
	streamsOnly           // streams and batched proposals, but MsgProp from peers is dropped
	beforeStreams         // neither streams nor batched proposals
)

// newProxiedCluster starts size members whose peers reach one another
// through an HTTP proxy in front of each member. The proxies make every
// member look like one of rel: an older member's proxy answers 404 on the
// endpoints it lacks, or leaves out of its stream answer that it takes
// forwarded proposals.
func newProxiedCluster(t *testing.T, size int, rel release) (*testCluster, *pathCounter) {
	t.Helper()
	seen := &pathCounter{n: map[string]int{}}
	c := startTestCluster(t, size, 0, nil, nil, func(_ uint64, addr string) string {
		target, _ := url.Parse("http://" + addr)
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.FlushInterval = -1 // pass a stream's batches on at once
		if rel == streamsOnly {
			rp.ModifyResponse = func(r *http.Response) error {
				r.Header.Del(acceptsHeader)
				return nil
			}
		}
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.add(r.URL.Path)
			if rel == beforeStreams && (r.URL.Path == "/raft/stream" || r.URL.Path == "/raft/proposals") {
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
// follower reach the leader on it too, as forwarded MsgProp: no request is
// made per write or per batch of writes.
func TestPeersStreamMessagesAndProposals(t *testing.T) {
	c, seen := newProxiedCluster(t, 3, thisRelease)
	c.leader()
	putEverywhere(c, 50)
	if got := seen.get("/raft/message"); got != 0 {
		t.Fatalf("%d messages were posted one batch at a time, want all on streams", got)
	}
	if got := seen.get("/raft/stream"); got == 0 || got > 12 {
		t.Fatalf("%d streams opened, want one per peer and a few reconnects at most", got)
	}
	if seen.get("/raft/proposals") != 0 || seen.get("/raft/propose") != 0 {
		t.Fatalf("forwarded writes: %d batches, %d single; want all on streams", seen.get("/raft/proposals"), seen.get("/raft/propose"))
	}
}

// A leader of the previous release drops MsgProp from peers, and does not
// say it takes them: writes through a follower reach it in batches on
// /raft/proposals.
func TestPeersBatchProposalsToLeadersWithoutForwarding(t *testing.T) {
	c, seen := newProxiedCluster(t, 3, streamsOnly)
	c.leader()
	putEverywhere(c, 50)
	if seen.get("/raft/message") != 0 {
		t.Fatal("messages were posted one batch at a time to members with streams")
	}
	if seen.get("/raft/proposals") == 0 || seen.get("/raft/propose") != 0 {
		t.Fatalf("forwarded writes: %d batches, %d single; want batches only", seen.get("/raft/proposals"), seen.get("/raft/propose"))
	}
}

// A group whose members lack the stream and batch endpoints (an earlier
// release, during a rolling upgrade) still replicates and forwards: the
// newer members fall back to a POST per message batch and per proposal.
func TestPeersFallBackForOlderMembers(t *testing.T) {
	c, seen := newProxiedCluster(t, 3, beforeStreams)
	c.leader()
	putEverywhere(c, 30)
	if seen.get("/raft/message") == 0 {
		t.Fatal("no message batch was posted to the older members")
	}
	if seen.get("/raft/propose") == 0 {
		t.Fatal("no write was forwarded one by one to an older leader")
	}
}

// A write through a follower whose leader is gone returns once a new
// leader is known and the write has not shown up, with an unknown outcome
// (or applied, if the old leader had replicated it), not at the caller's
// deadline; the same write then goes through.
func TestProposalToALostLeaderEndsUnknown(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	lead := c.leader()
	c.put(lead%3+1, "warm", "up") // the follower's streams are open
	c.stop(lead)
	via := lead%3 + 1
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.nodes[via].Propose(ctx, KVPut([]byte("k"), []byte("v")))
	if err != nil && (ctx.Err() != nil || !unknownOrUnavailable(err)) {
		t.Fatalf("write to a lost leader: %v (caller's deadline passed: %v)", err, ctx.Err() != nil)
	}
	c.put(via, "k", "v")
	c.converged()
	if got := c.get(via, "k"); got != "v" {
		t.Fatalf("k = %q after the retry", got)
	}
}

func unknownOrUnavailable(err error) bool {
	var we *wire.Error
	return errors.As(err, &we) && (we.Retry == wire.RetryOutcomeUnknown || we.Code == wire.CodeShardUnavailable)
}

func TestForwardedProposalGuard(t *testing.T) {
	env := encodeEnvelope(1, []byte("cmd"))
	cases := []struct {
		name string
		ents []*pb.Entry
		ok   bool
	}{
		{"commands", []*pb.Entry{{Data: env}, {Data: env}}, true},
		{"no entries", nil, false},
		{"configuration change", []*pb.Entry{{Data: env}, {Type: pb.EntryConfChange.Enum(), Data: env}}, false},
		{"no envelope", []*pb.Entry{{Data: []byte("x")}}, false},
	}
	for _, tc := range cases {
		if got := forwardedProposal(&pb.Message{Type: pb.MsgProp.Enum(), Entries: tc.ents}); got != tc.ok {
			t.Errorf("%s: forwardedProposal = %v, want %v", tc.name, got, tc.ok)
		}
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

// A proposal forwarded to a member that knows no leader is dropped at
// once rather than waiting inside raft: the wait would hold up every
// later message on the peer's stream, among them the appends and
// heartbeats of the leader the member has yet to hear of (a leader frozen
// while followers forwarded to it, thawed after losing office, was
// otherwise cut off from its successor for good).
func TestAForwardedProposalNeverHoldsUpTheStream(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	lead := c.leader()
	alone := lead%3 + 1
	for id := uint64(1); id <= 3; id++ {
		if id != alone {
			c.stop(id)
		}
	}
	waitFor(t, "the last member to lose its leader", func() bool { return c.nodes[alone].leader() == 0 })
	from := alone%3 + 1
	m := &pb.Message{Type: pb.MsgProp.Enum(), From: new(from), To: new(alone),
		Entries: []*pb.Entry{{Data: encodeEnvelope(1, []byte("cmd"))}}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.nodes[alone].receive(context.Background(), m) // no deadline: only the guard can end it
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a forwarded proposal to a member without a leader is still waiting inside raft")
	}
}
