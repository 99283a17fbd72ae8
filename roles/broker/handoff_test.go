package broker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// handoffCP is the control plane of in-process brokers that hand shards
// off: one view every broker polls, and the planned handoff applied to
// it with the control plane's checks (owner, generation, follower).
type handoffCP struct {
	mu       sync.Mutex
	v        wire.ClusterView
	n        int
	handoffs []wire.HandoffRequest
}

func (c *handoffCP) ClusterView(_ context.Context, known string) (wire.ClusterView, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.v.Tag == "" || known == c.v.Tag {
		return wire.ClusterView{}, false, nil
	}
	return c.v, true, nil
}

func (c *handoffCP) set(v wire.ClusterView) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.v = v
}

func (c *handoffCP) view() wire.ClusterView {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v
}

func (c *handoffCP) HandOffShard(_ context.Context, req wire.HandoffRequest) (wire.ShardAssignment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handoffs = append(c.handoffs, req)
	refuse := func(why string) error {
		return &wire.Error{Code: "conflict", Retry: wire.RetryFatal, Message: why}
	}
	last := uint64(0)
	for _, a := range c.v.Assignments {
		last = max(last, a.Generation)
	}
	for i, a := range c.v.Assignments {
		if a.Kind != req.Kind || a.Name != req.Name || a.Shard != req.Shard {
			continue
		}
		if a.NodeID != req.From || a.Generation != req.Generation {
			return wire.ShardAssignment{}, refuse("not the owner at that generation")
		}
		j := slices.IndexFunc(a.Replicas, func(r wire.ShardReplica) bool { return r.NodeID == req.To })
		if j < 0 {
			return wire.ShardAssignment{}, refuse("not a follower")
		}
		a.Replicas = slices.Clone(a.Replicas)
		to := a.Replicas[j]
		a.Replicas[j] = wire.ShardReplica{NodeID: a.NodeID, StorageID: a.StorageID}
		a.NodeID, a.StorageID, a.Generation = to.NodeID, to.StorageID, last+1
		v := c.v
		v.Assignments = slices.Clone(v.Assignments)
		v.Assignments[i] = a
		c.n++
		v.Tag, v.PlacementRevision = fmt.Sprintf("handoff-%d", c.n), v.PlacementRevision+1
		c.v = v
		return a, nil
	}
	return wire.ShardAssignment{}, refuse("no such shard")
}

// pubOutcome is what the publisher saw: the offsets of the publishes
// acknowledged, in order, and any refusal.
type pubOutcome struct {
	acked   []uint64
	refused []string
	err     error
	// redirected is the node a not_leader answer named: the publish was
	// not taken, and the client sends it there (a ClusterClient follows
	// it on its own).
	redirected string
	next       int // the publish to send next
}

// publishUntilClosed publishes numbered(first), numbered(first+1), ...
// on s one at a time, each acknowledged before the next, until the
// connection ends, stop is closed, or a bound is reached.
func publishUntilClosed(s *tstream, stream string, first int, stop <-chan struct{}) pubOutcome {
	var out pubOutcome
	for i := first; i < first+100_000; i++ {
		select {
		case <-stop:
			return out
		default:
		}
		if _, err := s.st.Write(binPublish(stream, true, uint64(i+1), numbered(i))); err != nil {
			out.err = err
			return out
		}
		f, err := s.next()
		if err != nil {
			out.err = err
			return out
		}
		m, err := wire.ParseMessage(f.Payload)
		if err != nil {
			out.err = err
			return out
		}
		out.next = i
		if nl, isNL := m.(*wire.NotLeader); isNL && nl.RequestID != nil && *nl.RequestID == uint64(i+1) {
			out.redirected = nl.NodeID
			return out
		}
		if pe, isPE := m.(*wire.PublishError); isPE && pe.RequestID == uint64(i+1) && pe.Code == wire.CodeNotLeader {
			out.redirected, _ = pe.Err().Detail[wire.DetailNodeID].(string)
			return out
		}
		ok, isOK := m.(*wire.PublishOK)
		if !isOK || ok.RequestID != uint64(i+1) || ok.Offset == nil {
			out.refused = append(out.refused, fmt.Sprintf("publish %d: %#v", i, m))
			return out
		}
		out.acked = append(out.acked, *ok.Offset)
		out.next = i + 1
	}
	return out
}

// subOutcome is what a subscription received before it ended.
type subOutcome struct {
	payloads [][]byte
	moved    *wire.ShardMoved
	err      error
}

// readUntilMoved reads s until shard_moved ends it (or anything else).
func readUntilMoved(s *tsub) subOutcome {
	var out subOutcome
	for range 1_000_000 {
		f, err := s.next()
		if err != nil {
			out.err = err
			return out
		}
		if f.Flags != 0 {
			b, err := wire.ParseSharedEventBatch(f.Flags, f.Payload)
			if err != nil {
				out.err = err
				return out
			}
			out.payloads = append(out.payloads, b.Payloads...)
			continue
		}
		m, err := wire.ParseMessage(f.Payload)
		switch x := m.(type) {
		case *wire.EventBatch:
			out.payloads = append(out.payloads, x.Payloads...)
			continue
		case *wire.ShardMoved:
			out.moved = x
		default:
			out.err = fmt.Errorf("the subscription ended with %#v (%v)", m, err)
		}
		return out
	}
	return out
}

func TestAStoppingLeaderHandsItsShardToACaughtUpFollower(t *testing.T) {
	for _, consistency := range []string{"quorum", "leader"} {
		t.Run(consistency, func(t *testing.T) { testHandoff(t, consistency) })
	}
}

// testHandoff: three brokers, an RF3 stream led by broker-a, a publisher
// on broker-a publishing acknowledged records one after another and a
// subscriber on broker-a; broker-a is shut down gracefully. No publish is
// refused, the shard ends led by a follower at a new generation, every
// acknowledged record reads back once, in order, from the new leader,
// and the subscription resumes there without a gap.
func testHandoff(t *testing.T, consistency string) {
	cp := &handoffCP{}
	envs := startBrokersWith(t, 3, func(cfg *Config) {
		cfg.Durable.StorageDir = t.TempDir()
		cfg.QuorumTimeout = 5 * time.Second
		cfg.ClusterViewInterval = 20 * time.Millisecond
		cfg.HandoffTimeout = 5 * time.Second // what the cleanup waits for a broker whose followers are gone
	}, cp, wire.StreamSpec{Stream: "h", Durable: true})
	a := owned(wire.ShardKindStream, "h", 0, "broker-a")
	a.StorageID, a.Consistency = "sa", consistency
	a.Replicas = []wire.ShardReplica{{NodeID: "broker-b", StorageID: "sb"}, {NodeID: "broker-c", StorageID: "sc"}}
	v := viewOf("v1", envs, a)
	cp.set(v)
	for _, e := range envs {
		e.srv.applyView(v)
	}
	old := envs[0]
	qc := old.dial(0)
	subReq := subscribeShard("h", 0)
	subReq.Start = &wire.StartPosition{Kind: wire.StartOffset, Offset: 0}
	sub, _ := old.subscribeWith(qc, old.authed(qc, 0, clusterFeatures, "stream.*:stream:acme"), subReq)
	subC := make(chan subOutcome, 1)
	go func() { subC <- readUntilMoved(sub) }()

	pub := old.authed(old.dial(0), durableFlags, durableFeatures, "stream.publish:*")
	const warm = 20
	publishAcked(t, pub, "h", 0, warm)
	stop := make(chan struct{})
	pubC := make(chan pubOutcome, 1)
	go func() { pubC <- publishUntilClosed(pub, "h", warm, stop) }()
	defer close(stop)
	waitFor(t, "publishes to go on", func() bool { return old.metric("felix_publish_messages_total") >= warm+20 })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // the drain's budget, after the handoff
	defer cancel()
	shutErr := make(chan error, 1)
	go func() { shutErr <- old.srv.Shutdown(ctx) }()
	var po pubOutcome
	select {
	case po = <-pubC:
	case <-time.After(40 * time.Second):
		t.Fatal("the publisher did not end with the old leader's connection")
	}
	if err := <-shutErr; err != nil {
		t.Logf("shutdown: %v", err) // a drain cut short by the publisher that never stops is fine
	}
	if len(po.refused) > 0 {
		t.Fatalf("publishes refused during the handoff: %v", po.refused)
	}
	if got := old.metric(`felix_shutdown_handoffs_total{result="handed_off"}`); got != 1 {
		t.Fatalf("handoffs handed_off: %v", got)
	}
	if old.metric("felix_broker_forwarded_publishes_total") == 0 {
		t.Fatal("no publish reached the new owner through the old one (the window after the handoff was not exercised)")
	}
	after := cp.view().Assignments[0]
	if after.NodeID == "broker-a" || after.Generation <= a.Generation || !replicaOf(after, "broker-a") {
		t.Fatalf("after the handoff: %+v", after)
	}
	var next *env
	for _, e := range envs[1:] {
		if e.srv.nodeID() == after.NodeID {
			next = e
		}
	}
	// Once the publishes it held were answered, the old leader redirects
	// the publisher to the new owner (before its drain closes the
	// connection): it goes on there from the publish it was told to
	// send again.
	if po.redirected != after.NodeID {
		t.Fatalf("the publisher ended with %v after %d acknowledged, not a redirect to %s", po.err, len(po.acked), after.NodeID)
	}
	npub := next.authed(next.dial(0), durableFlags, durableFeatures, "stream.publish:*")
	po.acked = append(po.acked, publishAcked(t, npub, "h", po.next, 10)...)
	acked := warm + len(po.acked)
	for i := 1; i < len(po.acked); i++ {
		if po.acked[i] <= po.acked[i-1] {
			t.Fatalf("acknowledged offsets go back: %d then %d", po.acked[i-1], po.acked[i])
		}
	}

	// Every acknowledged record, once, in order, from the new leader.
	rqc := next.dial(0)
	all, _ := next.subscribeWith(rqc, next.authed(rqc, 0, clusterFeatures, "stream.*:stream:acme"), subReq)
	checkOrder(t, all.payloads(acked), acked)

	// The subscription on the old leader ended with shard_moved naming the
	// new owner; resumed there it goes on without a gap.
	so := <-subC
	if so.moved == nil || so.moved.NodeID != after.NodeID || so.moved.ResumeFrom == nil {
		t.Fatalf("the old leader's subscription ended with %+v (%v) after %d payloads", so.moved, so.err, len(so.payloads))
	}
	checkOrder(t, so.payloads, len(so.payloads))
	resume := subscribeShard("h", 0)
	resume.Start = &wire.StartPosition{Kind: wire.StartOffset, Offset: *so.moved.ResumeFrom}
	rs, _ := next.subscribeWith(rqc, next.authed(rqc, 0, clusterFeatures, "stream.*:stream:acme"), resume)
	rest := rs.payloads(acked - len(so.payloads))
	for i, p := range rest {
		if want := numbered(len(so.payloads) + i); string(p) != string(want) {
			t.Fatalf("resumed payload %d is %q, want %q", i, p, want)
		}
	}
}

// A leader whose followers are gone cannot hand its shard off: the
// handoff gives up once its calls to every follower have failed (not at
// the end of its budget), asks the control plane nothing, and leaves the
// shard where it is (failover takes it later).
func TestAHandoffWithoutACaughtUpFollowerLeavesTheShard(t *testing.T) {
	cp := &handoffCP{}
	envs := startBrokersWith(t, 3, func(cfg *Config) {
		cfg.Durable.StorageDir = t.TempDir()
		cfg.ClusterViewInterval = 20 * time.Millisecond
		cfg.HandoffTimeout = time.Minute
	}, cp, wire.StreamSpec{Stream: "h", Durable: true})
	a := owned(wire.ShardKindStream, "h", 0, "broker-a")
	a.StorageID, a.Consistency = "sa", "leader"
	a.Replicas = []wire.ShardReplica{{NodeID: "broker-b", StorageID: "sb"}, {NodeID: "broker-c", StorageID: "sc"}}
	v := viewOf("v1", envs, a)
	cp.set(v)
	for _, e := range envs {
		e.srv.applyView(v)
	}
	pub := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, pub, "h", 0, 5)
	for _, e := range envs[1:] {
		if err := e.shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	if err := envs[0].shutdown(); err != nil {
		t.Fatal(err)
	}
	if got := envs[0].metric(`felix_shutdown_handoffs_total{result="failed"}`); got != 1 {
		t.Fatalf("handoffs given up: %v (timed out: %v)", got, envs[0].metric(`felix_shutdown_handoffs_total{result="timeout"}`))
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if len(cp.handoffs) != 0 || cp.v.Assignments[0].NodeID != "broker-a" {
		t.Fatalf("asked for %+v; the shard is %+v", cp.handoffs, cp.v.Assignments[0])
	}
}
