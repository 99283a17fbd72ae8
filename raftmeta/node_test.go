package raftmeta

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/wire"
)

func TestParsePeers(t *testing.T) {
	got, err := ParsePeers(" 1=https://a:7000, 2=https://b:7000/ ,3=http://127.0.0.1:9")
	if err != nil || len(got) != 3 || got[2] != "https://b:7000" {
		t.Fatalf("ParsePeers = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1", "0=https://a:1", "x=https://a:1", "1=ftp://a:1", "1=https://a:1,1=https://b:1", "1=https://"} {
		if _, err := ParsePeers(bad); err == nil {
			t.Errorf("ParsePeers(%q) accepted", bad)
		}
	}
}

func TestConfigValidateReportsEveryError(t *testing.T) {
	_, err := Open(Config{Peers: map[uint64]string{2: "nope"}})
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{"FELIX_RAFT_NODE_ID", "FELIX_RAFT_DATA_DIR", "member 2", "FSM"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestSingleMember(t *testing.T) {
	c := newTestCluster(t, 1, 0)
	c.leader()
	res, err := c.nodes[1].Propose(context.Background(), KVPut([]byte("a"), []byte("1")))
	if err != nil || len(res) != 0 {
		t.Fatalf("propose: %q %v", res, err)
	}
	_, err = c.nodes[1].Propose(context.Background(), KVDelete([]byte("missing")))
	if !errors.Is(err, ErrKVNotFound) {
		t.Fatalf("deterministic error not returned: %v", err)
	}
	if !c.nodes[1].Ready() {
		t.Fatal("single leader not ready")
	}
	var buf bytes.Buffer
	metrics.WritePrometheus(&buf, false)
	for _, want := range []string{`felix_raft_is_leader{member="1"} 1`, `felix_raft_proposals_total{member="1"} 2`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if err := c.nodes[1].ReadIndex(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.stop(1)
	c.start(1)
	c.leader()
	if got := c.get(1, "a"); got != "1" {
		t.Fatalf("after restart a=%q", got)
	}
	prev, err := c.nodes[1].Propose(context.Background(), KVPut([]byte("a"), []byte("2")))
	if err != nil || string(prev) != "1" {
		t.Fatalf("propose after restart: %q %v", prev, err)
	}
}

func TestReplicatesAndForwards(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	c.leader()
	for id := uint64(1); id <= 3; id++ {
		c.put(id, keyN(int(id)), "from-member")
		// Propose returns after the LOCAL apply, so the member that took
		// the write can read it at once.
		if got := c.get(id, keyN(int(id))); got != "from-member" {
			t.Fatalf("member %d does not see its own write: %q", id, got)
		}
	}
	c.converged()
	for id := uint64(1); id <= 3; id++ {
		st := c.nodes[id].Status()
		if !st.Voter || len(st.Members) != 3 {
			t.Fatalf("status %+v", st)
		}
	}
}

func TestLeaderFailover(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	old := c.leader()
	c.put(old, "before", "1")
	c.stop(old)
	lead := c.leader()
	if lead == old {
		t.Fatal("stopped leader still leads")
	}
	for i := range 20 {
		c.put(lead, keyN(i), "after")
	}
	c.start(old)
	c.leader()
	c.converged()
	if got := c.get(old, keyN(19)); got != "after" {
		t.Fatalf("old leader did not catch up: %q", got)
	}
}

func TestSnapshotInstall(t *testing.T) {
	c := newTestCluster(t, 3, 50)
	lead := c.leader()
	var lagging uint64 = 1
	if lead == lagging {
		lagging = 2
	}
	c.put(lead, "first", "1")
	c.stop(lagging)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sem := make(chan struct{}, 64)
	errc := make(chan error, 600)
	for i := range 600 {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := c.nodes[lead].Propose(ctx, KVPut([]byte(keyN(i)), []byte("v")))
			errc <- err
		}()
	}
	for range 600 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if c.nodes[lead].storage.SnapshotIndex() == 0 {
		t.Fatal("leader took no snapshot")
	}
	c.start(lagging)
	c.converged()
	n := c.nodes[lagging]
	// The state machine is restored before the node counts the install, so
	// converged can see the state a moment before the count.
	installed := func() int {
		n.mu.Lock()
		defer n.mu.Unlock()
		return int(n.installed)
	}
	deadline := time.Now().Add(10 * time.Second)
	for installed() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if installed() == 0 {
		first, _ := n.storage.FirstIndex()
		lfirst, _ := c.nodes[lead].storage.FirstIndex()
		t.Fatalf("lagging member %d caught up without a snapshot: status %+v, first index %d; leader %d first index %d, status %+v",
			lagging, n.Status(), first, lead, lfirst, c.nodes[lead].Status())
	}
	c.put(lagging, "last", "1")
	c.converged()
}

func TestReadIndexOnFollower(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	lead := c.leader()
	follower := lead%3 + 1
	for i := range 30 {
		c.put(lead, "k", keyN(i))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.nodes[follower].ReadIndex(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if got := c.get(follower, "k"); got != keyN(i) {
			t.Fatalf("follower read %q after ReadIndex, want %q", got, keyN(i))
		}
	}
}

func TestReadyFollowsQuorum(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	c.leader()
	waitFor(t, "all ready", func() bool {
		return c.nodes[1].Ready() && c.nodes[2].Ready() && c.nodes[3].Ready()
	})
	c.stop(2)
	c.stop(3)
	waitFor(t, "member 1 not ready without a quorum", func() bool { return !c.nodes[1].Ready() })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := c.nodes[1].ReadIndex(ctx); err == nil {
		t.Fatal("read barrier passed without a quorum")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	_, err := c.nodes[1].Propose(ctx2, KVPut([]byte("x"), []byte("y")))
	var we *wire.Error
	if !errors.As(err, &we) {
		t.Fatalf("propose without a quorum: %v, want a *wire.Error", err)
	}
	c.start(2)
	c.start(3)
	waitFor(t, "member 1 ready again", func() bool { return c.nodes[1].Ready() })
}

func TestWipedMemberRejoinsAsLearner(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	lead := c.leader()
	wiped := lead%3 + 1
	for i := range 50 {
		c.put(lead, keyN(i), "v")
	}
	c.converged()
	c.wipe(wiped)
	// Writes the wiped member never saw.
	for i := 50; i < 100; i++ {
		c.put(lead, keyN(i), "v")
	}
	c.start(wiped)
	n := c.nodes[wiped]
	sawLearner := false
	waitFor(t, "wiped member to become a voter again", func() bool {
		st := n.Status()
		if st.Role == "StateLeader" || st.Role == "StateCandidate" {
			if st.CatchingUp || st.Learner {
				t.Fatalf("catching-up member campaigned: %+v", st)
			}
		}
		if st.Learner {
			sawLearner = true
		}
		if st.CatchingUp && n.Ready() {
			t.Fatal("catching-up member reports ready")
		}
		return st.Voter && !st.CatchingUp
	})
	if !sawLearner {
		t.Log("learner phase was too short to observe through Status")
	}
	if got := c.get(wiped, keyN(99)); got != "v" {
		t.Fatalf("wiped member is a voter without the latest writes: %q", got)
	}
	c.put(wiped, "after", "1")
	c.converged()
	// The rejoined member can now take over.
	c.stop(c.leader())
	c.leader()
	c.put(wiped, "after-failover", "1")
}

func TestWipedMemberRestartedMidCatchUpStillDoesNotVote(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	lead := c.leader()
	wiped := lead%3 + 1
	other := wiped%3 + 1
	if other == lead {
		other = other%3 + 1
	}
	for i := range 20 {
		c.put(lead, keyN(i), "v")
	}
	c.converged()
	c.wipe(wiped)
	c.stop(other) // without it the leader cannot re-add the wiped member
	c.start(wiped)
	waitFor(t, "wiped member catching up with a saved term", func() bool {
		st := c.nodes[wiped].Status()
		return st.CatchingUp && st.Term > 0
	})
	c.stop(wiped)
	if c.storageEmpty(wiped) {
		t.Fatal("catching-up member saved nothing; the restart would not test the marker")
	}
	c.start(wiped)
	waitFor(t, "restarted member initialized", func() bool { return c.nodes[wiped].Status().Initialized })
	if st := c.nodes[wiped].Status(); !st.CatchingUp {
		t.Fatalf("restart forgot the catch-up: %+v", st)
	}
	c.start(other)
	waitFor(t, "wiped member to become a voter", func() bool {
		st := c.nodes[wiped].Status()
		return st.Voter && !st.CatchingUp
	})
	c.converged()
}
