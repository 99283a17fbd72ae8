package broker

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/felixmq/felix/core"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// delayAppends makes e answer each repl_append only after d (or when the
// call ends).
func delayAppends(e *env, d time.Duration) {
	hook := func(ctx context.Context, typ string) {
		if typ != TypeReplAppend {
			return
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	e.srv.fwd.callHook.Store(&hook)
}

// pairAppends makes e hold each repl_append until two calls have been
// held at once, or until d passes (or the call ends), and counts the
// calls it holds at once: max is the most seen. Once two were held
// together calls pass unheld, still counted. A shipper that keeps several
// calls in flight reaches 2 however fast or slow the machine is; one that
// waits for each answer never does.
func pairAppends(e *env, d time.Duration) (max *atomic.Int64) {
	var held atomic.Int64
	max = new(atomic.Int64)
	hook := func(ctx context.Context, typ string) {
		if typ != TypeReplAppend {
			return
		}
		n := held.Add(1)
		defer held.Add(-1)
		for {
			m := max.Load()
			if n <= m || max.CompareAndSwap(m, n) {
				break
			}
		}
		for deadline := time.Now().Add(d); max.Load() < 2 && time.Now().Before(deadline) && ctx.Err() == nil; {
			time.Sleep(time.Millisecond)
		}
	}
	e.srv.fwd.callHook.Store(&hook)
	return max
}

// onShip sets the leader e's ship hook.
func onShip(e *env, hook func(ctx context.Context, node string, from uint64, records int) error) {
	e.srv.repl.shipHook.Store(&hook)
}

// checkCopies fails unless every env holds n records of name, the
// numbered payloads in offset order.
func checkCopies(t *testing.T, envs []*env, name string, n int) {
	t.Helper()
	for _, e := range envs {
		got := replicaRecords(t, e, name)
		if len(got) != n {
			t.Fatalf("%s holds %d records, want %d", e.srv.nodeID(), len(got), n)
		}
		for i, r := range got {
			if r.Offset != uint64(i) || !bytes.Equal(r.Payload, numbered(i)) {
				t.Fatalf("%s record %d: offset %d payload %q", e.srv.nodeID(), i, r.Offset, r.Payload)
			}
		}
	}
}

// startShipping publishes records 0..9 of name on s and waits until
// every follower holds them: the shippers run, and what is published next
// is shipped while it is published.
func startShipping(t *testing.T, envs []*env, s *tstream, name string) {
	t.Helper()
	publishAcked(t, s, name, 0, 10)
	for _, e := range envs[1:] {
		waitReplicated(t, e, name, 10)
	}
}

func TestThePipelinedShipperKeepsSeveralCallsInFlight(t *testing.T) {
	envs := startReplicated(t, "p", "leader", nil)
	// Each follower holds every call until the next one arrives: the
	// leader, acknowledging after its own write, goes on appending, and
	// ships the new records without waiting for the answers before.
	s := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	startShipping(t, envs, s, "p")
	maxB, maxC := pairAppends(envs[1], time.Second), pairAppends(envs[2], time.Second)
	// At most 40 records a call, so that the 290 take several calls
	// even when the publisher outruns the shipper and every record is in
	// the log before the first call is sent.
	envs[0].srv.repl.shipRecords.Store(40)
	publishAcked(t, s, "p", 10, 290)
	for _, e := range envs[1:] {
		waitReplicated(t, e, "p", 300)
	}
	checkCopies(t, envs, "p", 300)
	for i, m := range []int64{maxB.Load(), maxC.Load()} {
		if m < 2 || m > shipWindow {
			t.Fatalf("follower %d held at most %d calls at once, want 2..%d", i+1, m, shipWindow)
		}
	}
	if got := envs[0].metric("felix_replication_ship_failures_total"); got != 0 {
		t.Fatalf("felix_replication_ship_failures_total %v: a call of a window was refused", got)
	}
}

func TestACallOvertakenByTheNextIsWaitedFor(t *testing.T) {
	envs := startReplicated(t, "o", "leader", nil)
	// The leader holds one call back before sending it, once per
	// follower: the calls after it reach the follower first, and must
	// wait for it rather than be refused.
	var mu sync.Mutex
	held := map[string]bool{}
	onShip(envs[0], func(ctx context.Context, node string, from uint64, records int) error {
		mu.Lock()
		hold := records > 0 && from >= 20 && !held[node]
		held[node] = held[node] || hold
		mu.Unlock()
		if hold {
			t := time.NewTimer(200 * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
		return nil
	})
	s := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	startShipping(t, envs, s, "o")
	publishAcked(t, s, "o", 10, 190)
	for _, e := range envs[1:] {
		waitReplicated(t, e, "o", 200)
	}
	checkCopies(t, envs, "o", 200)
	if got := envs[0].metric("felix_replication_ship_failures_total"); got != 0 {
		t.Fatalf("felix_replication_ship_failures_total %v: a call that overtook another was refused", got)
	}
}

func TestAFailedCallMidWindowIsShippedAgainWithWhatFollowedIt(t *testing.T) {
	envs := startReplicated(t, "e", "quorum", nil)
	delayAppends(envs[1], 10*time.Millisecond)
	delayAppends(envs[2], 10*time.Millisecond)
	// One call to each follower fails before it is sent, while others
	// are in flight behind it: they are dropped (the follower waits for
	// the missing call and is told the leader gave them up) and shipped
	// again after it, with no further refusal.
	var mu sync.Mutex
	failed := map[string]bool{}
	onShip(envs[0], func(ctx context.Context, node string, from uint64, records int) error {
		mu.Lock()
		defer mu.Unlock()
		if records == 0 || from < 20 || failed[node] {
			return nil
		}
		failed[node] = true
		return errors.New("injected: the call failed")
	})
	startShipping(t, envs, envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*"), "e")
	// Many publishers at once, so that the window fills.
	const writers, each = 8, 40
	var wg sync.WaitGroup
	for w := range writers {
		st := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
		wg.Go(func() {
			for i := range each {
				n := 10 + w*each + i
				st.write(binPublish("e", true, uint64(n+1), numbered(n)))
			}
			for range each {
				if m, ok := st.recv().(*wire.PublishOK); !ok {
					t.Errorf("writer %d: a publish answered %#v", w, m)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, e := range envs[1:] {
		waitReplicated(t, e, "e", 10+writers*each)
	}
	if got := envs[0].metric("felix_replication_ship_failures_total"); got != 2 {
		t.Fatalf("felix_replication_ship_failures_total %v, want the 2 injected", got)
	}
	// Every copy is the leader's, record for record.
	want := replicaRecords(t, envs[0], "e")
	if len(want) != 10+writers*each {
		t.Fatalf("the leader holds %d records", len(want))
	}
	for _, e := range envs[1:] {
		got := replicaRecords(t, e, "e")
		if len(got) != len(want) {
			t.Fatalf("%s holds %d records, the leader %d", e.srv.nodeID(), len(got), len(want))
		}
		for i := range got {
			if got[i].Offset != want[i].Offset || !bytes.Equal(got[i].Payload, want[i].Payload) {
				t.Fatalf("%s record %d differs from the leader's", e.srv.nodeID(), i)
			}
		}
	}
}

func TestAFollowerRestartingMidWindowCatchesUp(t *testing.T) {
	envs := startReplicated(t, "r", "leader", nil)
	delayAppends(envs[2], 20*time.Millisecond)
	s := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	startShipping(t, envs, s, "r")
	publishAcked(t, s, "r", 10, 90)
	// broker-c stops with calls of a window in flight and comes back on
	// the same storage (new ports): the leader's shipper drops its
	// window and ships from where c's copy ends.
	if err := envs[2].shutdown(); err != nil {
		t.Fatal(err)
	}
	publishAcked(t, s, "r", 100, 100)
	c := restartBroker(t, envs[2])
	all := []*env{envs[0], envs[1], c}
	v := viewOf("v2", all, replicatedAssignment("r", "leader"))
	for _, e := range all {
		apply(e, v)
	}
	delayAppends(c, 20*time.Millisecond)
	publishAcked(t, s, "r", 200, 100)
	for _, e := range all[1:] {
		waitReplicated(t, e, "r", 300)
	}
	checkCopies(t, all, "r", 300)
	k := core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "r"}
	if r, ok := c.srv.core.StreamReplica(k, 0); !ok || r.NextOffset() != 300 {
		t.Fatal("broker-c's replica is not open at 300")
	}
}

func TestADivergedFollowerIsCutBackAndCaughtUpInWindows(t *testing.T) {
	envs := startReplicated(t, "dw", "quorum", func(c *Config) { c.QuorumTimeout = 300 * time.Millisecond })
	s := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, s, "dw", 0, 10)
	waitReplicated(t, envs[2], "dw", 10)
	// broker-c misses 10 records that a and b acknowledge; then b misses
	// one that only a's log gets, never committed.
	unblockC := blockAppends(envs[2])
	publishAcked(t, s, "dw", 10, 10)
	waitReplicated(t, envs[1], "dw", 20)
	unblockB := blockAppends(envs[1])
	s.write(binPublish("dw", true, 99, numbered(20)))
	expectCode(t, s.recv(), wire.CodeQuorumTimeout)
	if err := envs[0].shutdown(); err != nil {
		t.Fatal(err)
	}
	unblockB()
	unblockC()
	// broker-c takes over at generation 2 and goes on without a.
	v := viewWithDown("v2", envs, map[string]bool{"broker-a": true}, promoted("dw", "quorum", "broker-c", 2))
	apply(envs[1], v)
	apply(envs[2], v)
	c := envs[2].authed(envs[2].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	waitFor(t, "broker-c to take the shard over", func() bool {
		c.write(binPublish("dw", true, 1000, numbered(21)))
		ok, isOK := c.recv().(*wire.PublishOK)
		return isOK && ok.Offset != nil && *ok.Offset == 21
	})
	publishAcked(t, c, "dw", 22, 60)
	// broker-a comes back: its record 20 disagrees with c's log (a
	// diverged refusal), is cut, and the 61 records after it are shipped
	// three to a call, several calls in flight.
	envs[2].srv.repl.shipRecords.Store(3)
	a := restartBroker(t, envs[0])
	maxA := pairAppends(a, time.Second)
	all := []*env{a, envs[1], envs[2]}
	v = viewOf("v3", all, promoted("dw", "quorum", "broker-c", 2))
	for _, e := range all {
		apply(e, v)
	}
	waitFor(t, "broker-a's copy to match c's", func() bool {
		r, ok := a.srv.core.StreamReplica(core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "dw"}, 0)
		return ok && r.DurableOffset() == 82
	})
	for _, e := range all {
		got := replicaRecords(t, e, "dw")
		if len(got) != 82 {
			t.Fatalf("%s holds %d records", e.srv.nodeID(), len(got))
		}
		for i, r := range got {
			if i == 20 {
				if r.Kind != flog.KindGenerationStart {
					t.Fatalf("%s record 20: %+v, want c's generation start", e.srv.nodeID(), r)
				}
				continue
			}
			if r.Offset != uint64(i) || !bytes.Equal(r.Payload, numbered(i)) {
				t.Fatalf("%s record %d: offset %d payload %q", e.srv.nodeID(), i, r.Offset, r.Payload)
			}
		}
	}
	if m := maxA.Load(); m < 2 {
		t.Fatalf("broker-a held at most %d calls at once while catching up", m)
	}
}
