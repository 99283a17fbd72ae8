package broker

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/felixmq/felix/core"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// positionOf finds shard 0 of stream name in ps.
func positionOf(ps []wire.ShardPosition, name string) (wire.ShardPosition, bool) {
	for _, p := range ps {
		if p.Kind == string(wire.ShardKindStream) && p.TenantID == testTenant && p.Namespace == "prod" && p.Name == name && p.Shard == 0 {
			return p, true
		}
	}
	return wire.ShardPosition{}, false
}

func TestTheHeartbeatReportsTheLeadersAndTheFollowersPositions(t *testing.T) {
	envs := startReplicated(t, "pos", "leader", nil)
	s := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, s, "pos", 0, 20)
	for _, e := range envs[1:] {
		waitReplicated(t, e, "pos", 20)
	}
	waitFor(t, "the leader to report 20 records durable", func() bool {
		p, ok := positionOf(envs[0].srv.repl.positions(), "pos")
		return ok && p.Durable == 20
	})
	lead, _ := positionOf(envs[0].srv.repl.positions(), "pos")
	if want := (wire.ShardPosition{Kind: "stream", TenantID: testTenant, Namespace: "prod", Name: "pos", Generation: 1,
		Leader: true, Durable: 20, End: 20}); lead != want {
		t.Fatalf("the leader reports %+v, want %+v", lead, want)
	}
	for _, e := range envs[1:] {
		p, ok := positionOf(e.srv.repl.positions(), "pos")
		if want := (wire.ShardPosition{Kind: "stream", TenantID: testTenant, Namespace: "prod", Name: "pos", Generation: 1,
			Durable: 20}); !ok || p != want {
			t.Fatalf("%s reports %+v, want %+v", e.srv.nodeID(), p, want)
		}
	}
	// The heartbeat task sends them on every heartbeat.
	reg := newFakeRegistry()
	r := &registration{reg: reg, every: time.Millisecond, onFatal: func(error) {}, positions: envs[1].srv.repl.positions,
		self: wire.BrokerRegistration{NodeID: "broker-b", StorageID: "sb"}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), true)
	}()
	for range 2 {
		hb := receive(t, reg.hbC, "heartbeat")
		if !reflect.DeepEqual(hb.Positions, envs[1].srv.repl.positions()) || len(hb.Positions) != 1 {
			t.Fatalf("heartbeat positions %+v", hb.Positions)
		}
	}
	cancel()
	<-done
}

// takeOver applies v to the brokers and publishes on e until it serves
// the shard, returning the first offset it acknowledged.
func takeOver(t *testing.T, e *env, name string, v wire.ClusterView, others ...*env) uint64 {
	t.Helper()
	for _, o := range append([]*env{e}, others...) {
		apply(o, v)
	}
	c := e.authed(e.dial(0), durableFlags, durableFeatures, "stream.publish:*")
	var first uint64
	waitFor(t, e.srv.nodeID()+" to take the shard over", func() bool {
		c.write(binPublish(name, true, 1000, []byte("after")))
		ok, isOK := c.recv().(*wire.PublishOK)
		if isOK && ok.Offset != nil {
			first = *ok.Offset
		}
		return isOK
	})
	return first
}

// servedRecords reads every record e serves of shard 0 of name.
func servedRecords(t *testing.T, e *env, name string) []flog.Record {
	t.Helper()
	st, _ := e.srv.core.Stream(core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: name})
	sh, err := st.Shard(0)
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := sh.Read(0, 1000, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestAPromotedLeaderShardFollowerTakesTheFurthestLiveCopy(t *testing.T) {
	envs := startReplicated(t, "lf", "leader", nil)
	s := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, s, "lf", 0, 10)
	waitReplicated(t, envs[2], "lf", 10)
	// broker-c stops taking records; 10 more reach a and b (a
	// leader-consistency ack does not wait for followers).
	unblockC := blockAppends(envs[2])
	publishAcked(t, s, "lf", 10, 10)
	waitReplicated(t, envs[1], "lf", 20)
	if err := envs[0].shutdown(); err != nil {
		t.Fatal(err)
	}
	unblockC()
	// broker-c is named leader (placement would take b, the furthest; a
	// view naming c shows c still opens no shorter copy than b's): it
	// must fence b, a live follower, and take b's 20 records, and it does
	// not wait for a, which is down.
	v := viewWithDown("v2", envs, map[string]bool{"broker-a": true}, promoted("lf", "leader", "broker-c", 2))
	if first := takeOver(t, envs[2], "lf", v, envs[1]); first != 21 {
		t.Fatalf("the first publish after the takeover landed at %d, want 21 (20 records and the generation start)", first)
	}
	recs := servedRecords(t, envs[2], "lf")
	if len(recs) != 22 {
		t.Fatalf("broker-c serves %d records", len(recs))
	}
	for i, r := range recs[:20] {
		if !bytes.Equal(r.Payload, numbered(i)) || r.Generation != 1 {
			t.Fatalf("record %d: %q generation %d", i, r.Payload, r.Generation)
		}
	}
	if recs[20].Kind != flog.KindGenerationStart || recs[20].Generation != 2 {
		t.Fatalf("record 20: %+v", recs[20])
	}
	if r, _ := envs[1].srv.core.StreamReplica(core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "lf"}, 0); r == nil || r.Fenced() != 2 {
		t.Fatal("broker-b's copy was not fenced at generation 2")
	}
}

func TestATwoCopyLeaderShardFailsOverWithItsOldLeaderDown(t *testing.T) {
	envs := startBrokers(t, 2, func(cfg *Config) { cfg.Durable.StorageDir = t.TempDir() }, wire.StreamSpec{Stream: "two", Durable: true})
	a := owned(wire.ShardKindStream, "two", 0, "broker-a")
	a.StorageID, a.Consistency = "s-broker-a", "leader"
	a.Replicas = []wire.ShardReplica{{NodeID: "broker-b", StorageID: "s-broker-b"}}
	place(envs, a)
	s := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, s, "two", 0, 5)
	waitReplicated(t, envs[1], "two", 5)
	if err := envs[0].shutdown(); err != nil {
		t.Fatal(err)
	}
	// A majority of {a, b} is both: a Quorum rule would wait for ever.
	// Only the serving copies are fenced on a leader-consistency shard.
	b := owned(wire.ShardKindStream, "two", 0, "broker-b")
	b.Generation, b.StorageID, b.Consistency = 2, "s-broker-b", "leader"
	b.Replicas = []wire.ShardReplica{{NodeID: "broker-a", StorageID: "s-broker-a"}}
	v := viewWithDown("v2", envs, map[string]bool{"broker-a": true}, b)
	if first := takeOver(t, envs[1], "two", v); first != 6 {
		t.Fatalf("the first publish after the takeover landed at %d, want 6", first)
	}
	if recs := servedRecords(t, envs[1], "two"); len(recs) != 7 || !bytes.Equal(recs[4].Payload, numbered(4)) {
		t.Fatalf("broker-b serves %d records", len(recs))
	}
}
