package broker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/wire"
)

// groupOK sends a group change and checks it is answered cache_ok.
func groupOK(t *testing.T, s *tstream, m wire.Message, rid uint64) {
	t.Helper()
	s.send(m)
	if ok, isOK := s.recv().(*wire.CacheOK); !isOK || ok.RequestID != rid {
		t.Fatalf("group request %d answered %#v", rid, ok)
	}
}

// consumeAndAck publishes n records to shard 0 of name on s's broker and,
// in the group "workers", polls them, acks 0-4 and 7 and dead-letters 5:
// the cursor ends at 6.
func consumeAndAck(t *testing.T, s *tstream, name string, n int) {
	t.Helper()
	publishAcked(t, s, name, 0, n)
	sc := gscope(name, 0)
	recs := groupRecords(t, s, &wire.GroupPoll{GroupScope: sc, MaxRecords: uint32(n), RequestID: 100})
	if len(recs) != n {
		t.Fatalf("polled %d records, want %d", len(recs), n)
	}
	rid := uint64(101)
	for _, o := range []uint64{0, 1, 2, 3, 4, 7} {
		groupOK(t, s, &wire.GroupAck{GroupScope: sc, Offset: u64(o), RequestID: rid}, rid)
		rid++
	}
	groupOK(t, s, &wire.GroupDeadLetter{GroupScope: sc, Offset: u64(5), RequestID: rid}, rid)
}

// describeOn asks s's broker for the group until it serves the shard.
func describeOn(t *testing.T, s *tstream, name string) *wire.GroupInfo {
	t.Helper()
	var info *wire.GroupInfo
	rid := uint64(500)
	waitFor(t, "the new leader to serve the group", func() bool {
		rid++
		s.send(&wire.GroupDescribe{GroupScope: gscope(name, 0), RequestID: rid})
		var ok bool
		info, ok = s.recv().(*wire.GroupInfo)
		return ok
	})
	return info
}

// checkResumed checks, on the shard's new leader, that the group starts
// at the cursor the acks left (6), keeps dead letter 5, and hands out
// every record from 6 on (7, acked above an unfinished record, may come
// again) and none below it.
func checkResumed(t *testing.T, s *tstream, name string, n int) {
	t.Helper()
	info := describeOn(t, s, name)
	if info.Committed == nil || *info.Committed != 6 || info.DeadLetters != 1 {
		t.Fatalf("the new leader's group: %#v (committed %v)", info, info.Committed)
	}
	sc := gscope(name, 0)
	s.send(&wire.GroupDeadLetters{GroupScope: sc, RequestID: 600})
	if l, ok := s.recv().(*wire.GroupDeadLetterList); !ok || !slices.Equal(l.Offsets, []uint64{5}) {
		t.Fatalf("dead letters on the new leader: %#v", l)
	}
	var recs []wire.GroupRecord
	rid := uint64(601)
	waitFor(t, "the new leader to serve a poll", func() bool {
		rid++
		s.send(&wire.GroupPoll{GroupScope: sc, MaxRecords: 100, RequestID: rid})
		switch m := s.recv().(type) {
		case *wire.GroupRecords:
			recs = m.Records
			return true
		case *wire.ErrorMsg:
			if m.Err().Code == wire.CodeShardUnavailable {
				return false // the generation start is not on a majority yet
			}
			t.Fatalf("poll on the new leader answered %v", m.Err())
		default:
			t.Fatalf("poll on the new leader answered %#v", m)
		}
		return false
	})
	var got []uint64
	for _, r := range recs {
		got = append(got, r.Offset)
	}
	for o := uint64(6); o < uint64(n); o++ {
		if !slices.Contains(got, o) && o != 7 {
			t.Fatalf("the new leader skipped offset %d: delivered %v", o, got)
		}
	}
	for _, o := range got {
		if o < 6 {
			t.Fatalf("the new leader redelivered offset %d, below the cursor: %v", o, got)
		}
	}
}

// TestGroupStateFollowsItsShardAcrossAFailover: a group's cursor and dead
// letters on a Quorum shard reach its followers; after the leader dies
// and a follower is promoted, the group goes on from where the acks left
// it, with its dead letter.
func TestGroupStateFollowsItsShardAcrossAFailover(t *testing.T) {
	envs := startReplicated(t, "g", "quorum", nil)
	s := envs[0].authed(envs[0].dial(0), durableFlags, groupFeatures, pubAll, groupAll)
	consumeAndAck(t, s, "g", 10)
	if err := envs[0].shutdown(); err != nil {
		t.Fatal(err)
	}
	v := viewWithDown("v2", envs, map[string]bool{"broker-a": true}, promoted("g", "quorum", "broker-b", 2))
	apply(envs[1], v)
	apply(envs[2], v)
	b := envs[1].authed(envs[1].dial(0), durableFlags, groupFeatures, pubAll, groupAll)
	checkResumed(t, b, "g", 10)
}

// TestGroupStateFollowsItsShardToAPromotedLaggingFollower: broker-c
// misses the group state (its repl_groups calls are held) while broker-b
// gets it; promoted, broker-c takes the newest state among the copies it
// fenced, broker-b's.
func TestGroupStateFollowsItsShardToAPromotedLaggingFollower(t *testing.T) {
	envs := startReplicated(t, "l", "quorum", nil)
	release := holdGroups(t, envs[2])
	s := envs[0].authed(envs[0].dial(0), durableFlags, groupFeatures, pubAll, groupAll)
	consumeAndAck(t, s, "l", 10)
	waitReplicated(t, envs[2], "l", 10)
	waitGroupsAt(t, envs[1], "l", 6)
	if err := envs[0].shutdown(); err != nil {
		t.Fatal(err)
	}
	k := core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "l"}
	if r, ok := envs[2].srv.core.StreamReplica(k, 0); !ok {
		t.Fatal("broker-c holds no replica")
	} else if c, ok := r.GroupCursor("workers"); ok && c >= 6 {
		t.Fatalf("broker-c got the group state (cursor %d) though its calls were held", c)
	}
	v := viewWithDown("v2", envs, map[string]bool{"broker-a": true}, promoted("l", "quorum", "broker-c", 2))
	apply(envs[1], v)
	apply(envs[2], v)
	c := envs[2].authed(envs[2].dial(0), durableFlags, groupFeatures, pubAll, groupAll)
	checkResumed(t, c, "l", 10)
	release() // the held calls of the old leader are refused now
}

// holdGroups holds every repl_groups call e receives until the returned
// function (or the test's end) releases them.
func holdGroups(t *testing.T, e *env) (release func()) {
	blocked := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(blocked) }) }
	t.Cleanup(release)
	hook := func(_ context.Context, typ string) {
		if typ == TypeReplGroups {
			<-blocked
		}
	}
	e.srv.fwd.callHook.Store(&hook)
	return release
}

// TestGroupStateFollowsItsShardThroughAHandoff: the shard moves to
// broker-b while broker-a stays up as a follower (what a planned handoff
// does); broker-b's takeover starts the group at its cursor.
func TestGroupStateFollowsItsShardThroughAHandoff(t *testing.T) {
	for _, consistency := range []string{"quorum", "leader"} {
		t.Run(consistency, func(t *testing.T) {
			envs := startReplicated(t, "h", consistency, nil)
			s := envs[0].authed(envs[0].dial(0), durableFlags, groupFeatures, pubAll, groupAll)
			consumeAndAck(t, s, "h", 10)
			if consistency == "leader" {
				// Nothing waits for the followers: wait until broker-b
				// holds the state the acks left.
				waitGroupsAt(t, envs[1], "h", 6)
			}
			v := viewOf("v2", envs, promoted("h", consistency, "broker-b", 2))
			for _, e := range envs {
				apply(e, v)
			}
			b := envs[1].authed(envs[1].dial(0), durableFlags, groupFeatures, pubAll, groupAll)
			checkResumed(t, b, "h", 10)
		})
	}
}

// waitGroupsAt waits until e's replica of shard 0 of name holds group
// state whose "workers" cursor is at least cursor.
func waitGroupsAt(t *testing.T, e *env, name string, cursor uint64) {
	t.Helper()
	k := core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: name}
	waitFor(t, fmt.Sprintf("%s to hold the group at %d", e.srv.nodeID(), cursor), func() bool {
		r, ok := e.srv.core.StreamReplica(k, 0)
		if !ok {
			return false
		}
		c, ok := r.GroupCursor("workers")
		return ok && c >= cursor
	})
}

// TestADeposedCoordinatorRefusesAGroupAck (the spec's
// a_deposed_coordinator_refuses_a_group_ack): broker-a still believes it
// leads the shard, but the control plane promoted broker-b, which fenced
// broker-c. An ack sent to broker-a is refused (not_leader), never
// acknowledged, even one that changes no persisted state; so are later
// acks and polls. The new leader's group has not moved, and it takes the
// ack for the claim broker-a made.
func TestADeposedCoordinatorRefusesAGroupAck(t *testing.T) {
	envs := startReplicated(t, "x", "quorum", nil)
	s := envs[0].authed(envs[0].dial(0), durableFlags, groupFeatures, pubAll, groupAll)
	publishAcked(t, s, "x", 0, 3)
	sc := gscope("x", 0)
	if recs := groupRecords(t, s, &wire.GroupPoll{GroupScope: sc, MaxRecords: 3, RequestID: 1}); len(recs) != 3 {
		t.Fatalf("polled %+v", recs)
	}
	// The group made by the poll reaches the followers (a poll is not
	// held for them).
	waitGroupsAt(t, envs[1], "x", 0)
	waitGroupsAt(t, envs[2], "x", 0)
	// broker-b is promoted; broker-a's view is left behind (cut off from
	// the control plane).
	v := viewWithDown("v2", envs, map[string]bool{"broker-a": true}, promoted("x", "quorum", "broker-b", 2))
	apply(envs[1], v)
	apply(envs[2], v)
	b := envs[1].authed(envs[1].dial(0), durableFlags, groupFeatures, pubAll, groupAll)
	if info := describeOn(t, b, "x"); info.Committed == nil || *info.Committed != 0 {
		t.Fatalf("the new leader's group before the ack: %#v", info)
	}
	// An ack above an unfinished record changes no persisted state; it
	// is refused all the same, by the round.
	s.send(&wire.GroupAck{GroupScope: sc, Offset: u64(2), RequestID: 2})
	switch m := s.recv().(type) {
	case *wire.NotLeader:
	case *wire.ErrorMsg:
		if e := m.Err(); e.Code != wire.CodeNotLeader {
			t.Fatalf("the deposed leader answered the ack %v", e)
		}
	default:
		t.Fatalf("the deposed leader answered the ack %#v", m)
	}
	// Refused before anything is applied, from now on.
	s.send(&wire.GroupAck{GroupScope: sc, Offset: u64(0), RequestID: 3})
	if _, ok := s.recv().(*wire.CacheOK); ok {
		t.Fatal("the deposed leader acknowledged a second ack")
	}
	s.send(&wire.GroupPoll{GroupScope: sc, MaxRecords: 3, RequestID: 4})
	if _, ok := s.recv().(*wire.GroupRecords); ok {
		t.Fatal("the deposed leader served a poll")
	}
	if info := describeOn(t, b, "x"); info.Committed == nil || *info.Committed != 0 {
		t.Fatalf("the new leader's group after the refused ack: %#v", info)
	}
	// The new leader takes the ack for broker-a's claim.
	groupOK(t, b, &wire.GroupAck{GroupScope: sc, Offset: u64(0), RequestID: 5}, 5)
	if info := describeOn(t, b, "x"); info.Committed == nil || *info.Committed != 1 {
		t.Fatalf("the new leader's group after its ack: %#v", info)
	}
}

// TestGroupStateFollowsItsShardThroughAStoppingLeadersHandoff: broker-a,
// shut down gracefully, hands its shard to a follower (handoff.go); the
// new owner's group starts at the cursor the acks left, with its dead
// letter, on quorum and leader shards alike (no wait for the state on a
// leader shard: the takeover fences broker-a, still running, and takes
// its state, the newest).
func TestGroupStateFollowsItsShardThroughAStoppingLeadersHandoff(t *testing.T) {
	for _, consistency := range []string{"quorum", "leader"} {
		t.Run(consistency, func(t *testing.T) {
			cp := &handoffCP{}
			envs := startBrokersWith(t, 3, func(cfg *Config) {
				cfg.Durable.StorageDir = t.TempDir()
				cfg.QuorumTimeout = 5 * time.Second
				cfg.ClusterViewInterval = 20 * time.Millisecond
				cfg.HandoffTimeout = 5 * time.Second
			}, cp, wire.StreamSpec{Stream: "s", Durable: true})
			a := replicatedAssignment("s", consistency)
			v := viewOf("v1", envs, a)
			cp.set(v)
			for _, e := range envs {
				e.srv.applyView(v)
			}
			old := envs[0]
			s := old.authed(old.dial(0), durableFlags, groupFeatures, pubAll, groupAll)
			consumeAndAck(t, s, "s", 10)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := old.srv.Shutdown(ctx); err != nil {
				t.Logf("shutdown: %v", err)
			}
			if got := old.metric(`felix_shutdown_handoffs_total{result="handed_off"}`); got != 1 {
				t.Fatalf("handoffs handed_off: %v", got)
			}
			after := cp.view().Assignments[0]
			var next *env
			for _, e := range envs[1:] {
				if e.srv.nodeID() == after.NodeID {
					next = e
				}
			}
			if next == nil {
				t.Fatalf("after the handoff: %+v", after)
			}
			checkResumed(t, next.authed(next.dial(0), durableFlags, groupFeatures, pubAll, groupAll), "s", 10)
		})
	}
}
