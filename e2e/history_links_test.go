package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// linkSuspectAfter is FELIX_LEADER_SUSPECT_AFTER_MS on the link-fault
// cluster: its minimum, so that the followers' suspicion, the only way a
// leader that still heartbeats loses its shards, promotes one within the
// test's patience.
const linkSuspectAfter = "FELIX_LEADER_SUSPECT_AFTER_MS=2000"

// Faults on the links between brokers (issue #18), on one cluster whose
// brokers reach each other's peer listeners, and each other's control
// planes' Raft listeners, through linkNet's proxies only. Every round
// runs four faults in turn, each on the leader of another shard, healing
// each and waiting until every shard's followers have caught up before
// the next:
//
//  1. cut: the leader's peer links are cut both ways while it still
//     heartbeats to the control plane. Its followers stop hearing from
//     it, report it, and a majority's suspicion promotes one of them; the
//     old leader, with no follower answering, must acknowledge nothing
//     (quorum_timeout, then not_leader). Healed, it rejoins as a follower
//     and its copy converges.
//  2. one way: the bytes the leader sends to its followers are held (its
//     shipping never arrives) while theirs still reach it: the same
//     suspicion and promotion, and the same silence from the old leader.
//  3. answers held: the reverse, the followers' bytes to the leader are
//     held while its shipping reaches them. Nothing need fail over (the
//     leader's shipper may give its links up and fail to dial new ones,
//     and then the followers do suspect it); it holds no majority and
//     must acknowledge nothing while the fault lasts.
//  4. control plane cut off: the leader's node's Raft links are cut both
//     ways while its peer links stay up. Its heartbeats no longer commit,
//     so its lease lapses and it must stop acknowledging before the
//     others' control plane marks it down and promotes a follower: no
//     publish to it started after that promotion was seen may be
//     acknowledged.
//
// Publishes sent to each victim alone (a client connected to it only)
// while its fault lasts are part of the history, and any of them
// acknowledged before the fault healed fails the test for faults 1 to 3
// (the victim never holds a majority). Faults 1, 2 and 4 must each move
// every shard their victim led, and 1 and 2 must be seen suspected by
// the followers (felix_replication_leaders_suspected_total), so each
// round adds at least three generation starts.
func TestHistoryPeerLinkFaults(t *testing.T) {
	dir := t.TempDir()
	peers, env := newLinkNet(t, filepath.Join(dir, "felix-dev"), 3, peerLinks)
	raft, raftEnv := newLinkNet(t, filepath.Join(dir, "felix-dev"), 3, raftLinks)
	d := startDevIn(t, dir, 3, slices.Concat(historyEnv, env, raftEnv, []string{linkSuspectAfter})...)
	runHistoryOn(t, d, historyScenario{shards: 3, failovers: 3, round: func(ctx context.Context, r *historyRun, round int) {
		r.linkFault(ctx, round, 0, linkFault{what: "peer links cut both ways", net: peers, moves: true, suspected: true, neverAcks: true,
			set: func(victim string, others []string) { peers.cut(victim, others...) }})
		r.linkFault(ctx, round, 1, linkFault{what: "its bytes to its followers held", net: peers, moves: true, suspected: true, neverAcks: true,
			set: func(victim string, others []string) { peers.oneWay(victim, others...) }})
		r.linkFault(ctx, round, 2, linkFault{what: "its followers' bytes to it held", net: peers, neverAcks: true,
			set: func(victim string, others []string) {
				for _, o := range others {
					peers.oneWay(o, victim)
				}
			}})
		r.linkFault(ctx, round, 3, linkFault{what: "its control plane's Raft links cut both ways", net: raft, moves: true, leaseLapses: true,
			set: func(victim string, others []string) { raft.cut(victim, others...) }})
	}})
	for _, ln := range []*linkNet{peers, raft} {
		if n := ln.unknown.Load(); n != 0 {
			t.Errorf("%d connections through the link proxies came from no node they could find: a fault may have missed them", n)
		}
		t.Logf("link proxies (%d): %d chunks held, %d connections refused by a cut", ln.kind, ln.heldChunks.Load(), ln.refused.Load())
	}
}

// linkFault is one fault of TestHistoryPeerLinkFaults.
type linkFault struct {
	what string
	net  *linkNet
	set  func(victim string, others []string) // injects it; net.heal lifts it
	// moves: the fault lasts until every shard the victim led is led by
	// another node (else until a few probes were answered).
	moves bool
	// suspected: the other nodes must have reported a silent leader
	// meanwhile (the fast path moved the shards, not an expiry).
	suspected bool
	// neverAcks: no probe to the victim answered before the heal may be
	// acknowledged (without it: none started after the move was seen).
	neverAcks bool
	// leaseLapses: the victim's lease must have lapsed (felix_broker_lease_held
	// 0) by the time its shards are seen led by others.
	leaseLapses bool
}

// linkFault injects f on the current leader of shard (round+i) % shards,
// probes the victim while it lasts, heals it and waits until every
// shard's followers hold their leader's log.
func (r *historyRun) linkFault(ctx context.Context, round, i int, f linkFault) {
	t := r.t
	t.Helper()
	before := r.leaders(ctx)
	victim := before[(round+i)%int(r.shards)]
	var led []uint32
	for s, l := range before {
		if l == victim {
			led = append(led, uint32(s))
		}
	}
	var others []string
	for _, n := range r.d.nodes {
		if n.Name != victim {
			others = append(others, n.Name)
		}
	}
	suspected := func() float64 {
		var sum float64
		for _, o := range others {
			v, _ := r.d.metric(o, "felix_replication_leaders_suspected_total")
			sum += v
		}
		return sum
	}
	suspectedBefore := suspected()
	client := "link-probe@" + victim
	pinned := r.d.connect(ctx, victim, r.token)
	r.probeWith(ctx, pinned, "warm-"+client, led, round, i) // so the probes under the fault are past auth
	held := f.net.heldChunks.Load()
	t.Logf("round %d: %s, leader of shards %v: %s", round, victim, led, f.what)
	f.set(victim, others)
	start := time.Now()

	// Probe the victim until the fault has done its work: one publish per
	// shard it led at a time, each bounded by historyCallTimeout.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var probes []pubAttempt
	answered := func() int { mu.Lock(); defer mu.Unlock(); return len(probes) }
	wg.Go(func() {
		for n := 0; n < 500; n++ {
			select {
			case <-stop:
				return
			default:
			}
			got := r.probeWith(ctx, pinned, client, led, round, 1000*i+n)
			mu.Lock()
			probes = append(probes, got...)
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	})
	var moved time.Time
	if f.moves {
		eventually(t, failoverWait, "every shard "+victim+" led led by another node", func() bool {
			v, ok := r.placement(ctx, victim) // the victim's control plane may be the one cut off
			if !ok {
				return false
			}
			for _, a := range v.Shards {
				if slices.Contains(led, a.Shard) && (a.Unavailable != "" || a.NodeID == "" || nodeNameOf(a.NodeID) == victim) {
					return false
				}
			}
			return true
		})
		moved = time.Now()
		if f.leaseLapses {
			if held, err := r.d.metric(victim, "felix_broker_lease_held"); err != nil || held != 0 {
				t.Errorf("%s: %s's shards are led by others while it holds its lease (felix_broker_lease_held %v, %v)", f.what, victim, held, err)
			}
		}
		t.Logf("round %d: %s's shards moved %v after the fault; it is %q", round, victim, moved.Sub(start),
			r.brokerState(ctx, victim, r.d.node(victim).NodeID))
	} else {
		eventually(t, failoverWait, "two probes of every shard answered", func() bool {
			time.Sleep(100 * time.Millisecond)
			return answered() >= 2*len(led)
		})
	}
	if f.suspected {
		if n := suspected() - suspectedBefore; n < 1 {
			t.Errorf("%s: no follower reported %s silent (felix_replication_leaders_suspected_total)", f.what, victim)
		}
	}
	close(stop)
	wg.Wait()
	healed := time.Now()
	f.net.heal()
	t.Logf("round %d: %s's fault lasted %v; %d chunks held", round, victim, healed.Sub(start), f.net.heldChunks.Load()-held)
	if f.net.heldChunks.Load() == held {
		t.Errorf("%s: the proxies held nothing: the fault did nothing", f.what)
	}
	outcomes := map[string]int{}
	for _, a := range probes {
		kind := a.err
		if i := strings.IndexByte(kind, ':'); i > 0 && len(kind) > 80 {
			kind = kind[:80] + "…"
		}
		outcomes[fmt.Sprintf("%v %s", a.outcome, kind)]++
		switch {
		case a.outcome != pubAcked:
		case f.neverAcks:
			t.Errorf("%s acknowledged %s at offset %d on shard %d with %s: it held no majority", victim, a.payload, a.offset, a.shard, f.what)
		case !moved.IsZero() && a.start.After(moved):
			t.Errorf("%s acknowledged %s at offset %d on shard %d, sent %v after its shards were seen led by others (%s)",
				victim, a.payload, a.offset, a.shard, a.start.Sub(moved), f.what)
		}
	}
	t.Logf("round %d: %d probes to %s under the fault: %v", round, len(probes), victim, outcomes)
	r.waitCaughtUp(ctx)
	r.waitProgress(healed, 5, failoverWait)
}

// waitCaughtUp waits until every shard's leader ships to two followers
// that hold its whole log.
func (r *historyRun) waitCaughtUp(ctx context.Context) {
	r.t.Helper()
	eventually(r.t, replWait, "every shard's followers caught up", func() bool {
		for s, l := range r.leaders(ctx) {
			if !r.shardCaughtUp(l, uint32(s)) {
				return false
			}
		}
		return true
	})
}
