package raftmeta

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Only a leader's appends and heartbeats may leave before the save, and
// the order of each group is the Ready's.
func TestSplitBySave(t *testing.T) {
	var msgs []*pb.Message
	for v := range pb.MessageType_name {
		msgs = append(msgs, &pb.Message{Type: pb.MessageType(v).Enum(), Index: new(uint64(len(msgs)))})
	}
	early, late := splitBySave(msgs)
	if len(early)+len(late) != len(msgs) {
		t.Fatalf("%d early + %d late of %d messages", len(early), len(late), len(msgs))
	}
	for _, m := range early {
		if m.GetType() != pb.MsgApp && m.GetType() != pb.MsgHeartbeat {
			t.Errorf("%s may leave before the save", m.GetType())
		}
	}
	for _, m := range late {
		if m.GetType() == pb.MsgApp || m.GetType() == pb.MsgHeartbeat {
			t.Errorf("%s waits for the save", m.GetType())
		}
	}
	for _, group := range [][]*pb.Message{early, late} {
		for i := 1; i < len(group); i++ {
			if group[i-1].GetIndex() > group[i].GetIndex() {
				t.Fatalf("messages reordered: %v before %v", group[i-1], group[i])
			}
		}
	}
}

// A follower acknowledges an append, and a voter grants a vote, only once
// raft.db holds what the answer promises: while a member's save is held,
// none of its answers that depend on it leaves.
func TestAnswersLeaveOnlyAfterTheSave(t *testing.T) {
	d := &durabilityChecker{}
	c := startTestCluster(t, 3, 0, nil, d.hooks(), func(_ uint64, addr string) string { return "http://" + addr })
	lead := c.leader()
	c.put(lead, "a", "1")
	var f uint64
	for id := range c.nodes {
		if id != lead {
			f = id
		}
	}

	// An append: hold f's next save of entries.
	held := d.holdOnce(t, func(n *Node, _ *pb.HardState, ents []*pb.Entry) bool {
		return n.cfg.ID == f && len(ents) > 0
	})
	leader := c.nodes[lead]
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = leader.Propose(ctx, KVPut([]byte("b"), []byte("2"))) // checked below through f's state
	}()
	h := held.wait(t)
	idx := h.ents[len(h.ents)-1].GetIndex()
	if d.acked(f, idx) {
		t.Fatalf("member %d acknowledged index %d before saving it", f, idx)
	}
	held.release()
	waitFor(t, "the acknowledgement after the save", func() bool { return d.acked(f, idx) })
	waitFor(t, "the write on the follower", func() bool { return c.get(f, "b") == "2" })

	// A vote: stop the leader and hold the first save of a vote for
	// another member. The two left need each other, so the election waits.
	term := c.nodes[f].Status().Term
	c.stop(lead)
	held = d.holdOnce(t, func(n *Node, hs *pb.HardState, _ []*pb.Entry) bool {
		return hs.GetTerm() > term && hs.GetVote() != 0 && hs.GetVote() != n.cfg.ID
	})
	h = held.wait(t)
	if d.granted(h.id, h.hs.GetTerm(), h.hs.GetVote()) {
		t.Fatalf("member %d granted its vote in term %d before saving it", h.id, h.hs.GetTerm())
	}
	held.release()
	c.leader()
	if !d.granted(h.id, h.hs.GetTerm(), h.hs.GetVote()) {
		t.Fatalf("member %d's vote in term %d was never sent", h.id, h.hs.GetTerm())
	}
	d.check(t)
}

// durabilityChecker records what members send, checks as each message
// leaves that the sender's raft.db already holds what it promises, and
// can hold one save.
type durabilityChecker struct {
	mu         sync.Mutex
	sent       []*pb.Message
	violations []string
	hold       func(n *Node, hs *pb.HardState, ents []*pb.Entry)
}

func (d *durabilityChecker) hooks() *readyHooks {
	return &readyHooks{
		beforeSave: func(n *Node, hs *pb.HardState, ents []*pb.Entry) {
			d.mu.Lock()
			hold := d.hold
			d.mu.Unlock()
			if hold != nil {
				hold(n, hs, ents)
			}
		},
		onSend: func(n *Node, m *pb.Message) {
			broken := brokenPromise(n.storage, m)
			d.mu.Lock()
			defer d.mu.Unlock()
			d.sent = append(d.sent, m)
			if broken != "" {
				d.violations = append(d.violations, broken)
			}
		},
	}
}

// brokenPromise says what m promises that st does not hold yet ("" when
// nothing is missing).
func brokenPromise(st *Storage, m *pb.Message) string {
	switch m.GetType() {
	case pb.MsgAppResp:
		if last, _ := st.LastIndex(); !m.GetReject() && last < m.GetIndex() {
			return fmt.Sprintf("%d acknowledged index %d to %d holding only %d", m.GetFrom(), m.GetIndex(), m.GetTo(), last)
		}
	case pb.MsgVoteResp:
		hs, _, _ := st.InitialState()
		if !m.GetReject() && (hs.GetTerm() < m.GetTerm() || hs.GetTerm() == m.GetTerm() && hs.GetVote() != m.GetTo()) {
			return fmt.Sprintf("%d granted %d its vote in term %d holding term %d vote %d", m.GetFrom(), m.GetTo(), m.GetTerm(), hs.GetTerm(), hs.GetVote())
		}
	case pb.MsgVote:
		hs, _, _ := st.InitialState()
		if hs.GetTerm() < m.GetTerm() || hs.GetTerm() == m.GetTerm() && hs.GetVote() != m.GetFrom() {
			return fmt.Sprintf("%d campaigned in term %d holding term %d vote %d", m.GetFrom(), m.GetTerm(), hs.GetTerm(), hs.GetVote())
		}
	}
	return ""
}

// acked reports whether member id acknowledged an append up to index.
func (d *durabilityChecker) acked(id, index uint64) bool {
	return d.anySent(func(m *pb.Message) bool {
		return m.GetFrom() == id && m.GetType() == pb.MsgAppResp && !m.GetReject() && m.GetIndex() >= index
	})
}

// granted reports whether member id granted its vote in term to cand.
func (d *durabilityChecker) granted(id, term, cand uint64) bool {
	return d.anySent(func(m *pb.Message) bool {
		return m.GetFrom() == id && m.GetTo() == cand && m.GetType() == pb.MsgVoteResp && !m.GetReject() && m.GetTerm() == term
	})
}

func (d *durabilityChecker) anySent(match func(*pb.Message) bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range d.sent {
		if match(m) {
			return true
		}
	}
	return false
}

func (d *durabilityChecker) check(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, v := range d.violations {
		t.Error(v)
	}
}

// heldSave is one save held in its member's Ready loop.
type heldSave struct {
	id   uint64
	hs   *pb.HardState
	ents []*pb.Entry
}

// saveHold holds the first save that match selects until release.
type saveHold struct {
	heldC     chan heldSave
	releaseC  chan struct{}
	releaseMu sync.Once
}

// holdOnce makes the first save match selects wait, in its Ready loop,
// until the returned hold is released (at the latest when the test ends).
func (d *durabilityChecker) holdOnce(t *testing.T, match func(n *Node, hs *pb.HardState, ents []*pb.Entry) bool) *saveHold {
	h := &saveHold{heldC: make(chan heldSave, 1), releaseC: make(chan struct{})}
	t.Cleanup(h.release)
	var once sync.Once
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hold = func(n *Node, hs *pb.HardState, ents []*pb.Entry) {
		if !match(n, hs, ents) {
			return
		}
		first := false
		once.Do(func() { first = true })
		if !first {
			return
		}
		h.heldC <- heldSave{id: n.cfg.ID, hs: hs, ents: ents}
		<-h.releaseC
	}
	return h
}

func (h *saveHold) wait(t *testing.T) heldSave {
	t.Helper()
	select {
	case s := <-h.heldC:
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("no save was held")
		return heldSave{}
	}
}

func (h *saveHold) release() { h.releaseMu.Do(func() { close(h.releaseC) }) }
