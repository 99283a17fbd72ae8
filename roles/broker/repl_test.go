package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/felixmq/felix/core"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// startReplicated starts three brokers with durable storage, places
// stream name's one shard on broker-a, followed by broker-b and broker-c,
// with the consistency given, and waits until broker-a has taken the
// shard over (until then a publish is refused not_ready). The quorum
// timeout is 2 s, long enough for a loaded machine; tests of the timeout
// itself set a shorter one.
func startReplicated(t *testing.T, name, consistency string, tune func(*Config)) []*env {
	t.Helper()
	envs := startBrokers(t, 3, func(cfg *Config) {
		cfg.Durable.StorageDir = t.TempDir()
		cfg.QuorumTimeout = 2 * time.Second
		if tune != nil {
			tune(cfg)
		}
	}, wire.StreamSpec{Stream: name, Durable: true})
	place(envs, replicatedAssignment(name, consistency))
	waitFor(t, "broker-a to take shard 0 of "+name+" over", func() bool {
		st, ok := envs[0].srv.core.Stream(core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: name})
		if !ok {
			return false
		}
		_, err := st.Shard(0)
		return err == nil
	})
	return envs
}

// replicatedAssignment is startReplicated's assignment of stream name's
// one shard: led by broker-a, followed by broker-b and broker-c.
func replicatedAssignment(name, consistency string) wire.ShardAssignment {
	a := owned(wire.ShardKindStream, name, 0, "broker-a")
	a.StorageID = "sa"
	a.Consistency = consistency
	a.Replicas = []wire.ShardReplica{{NodeID: "broker-b", StorageID: "sb"}, {NodeID: "broker-c", StorageID: "sc"}}
	return a
}

// replicaRecords reads every record of e's copy of shard 0 of name from
// its files (a replica's or, after a promotion, the shard's).
func replicaRecords(t *testing.T, e *env, name string) []flog.Record {
	t.Helper()
	dir := core.ShardDir(e.srv.cfg.Durable.StorageDir, core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: name}, 0)
	var recs []flog.Record
	if _, err := flog.ScanRecords(dir, func(ri flog.RecordInfo) error {
		recs = append(recs, flog.Record{Offset: ri.Offset, Kind: ri.Kind, Generation: ri.Generation, TimeMicros: ri.TimeMicros,
			Publisher: ri.Publisher, Payload: bytes.Clone(ri.Payload)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

// waitReplicated waits until e's replica of name holds n records.
func waitReplicated(t *testing.T, e *env, name string, n uint64) {
	t.Helper()
	k := core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: name}
	waitFor(t, fmt.Sprintf("%s to hold %d records of %s", e.srv.nodeID(), n, name), func() bool {
		r, ok := e.srv.core.StreamReplica(k, 0)
		return ok && r.DurableOffset() >= n
	})
}

func TestTheLeaderShipsItsLogToBothFollowers(t *testing.T) {
	envs := startReplicated(t, "rep", "leader", nil)
	s := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	offs := publishAcked(t, s, "rep", 0, 50)
	if offs[49] != 49 {
		t.Fatalf("offsets %v", offs)
	}
	for _, e := range envs[1:] {
		waitReplicated(t, e, "rep", 50)
	}
	// Each follower's copy is the leader's, record for record.
	leaderDir := core.ShardDir(envs[0].srv.cfg.Durable.StorageDir, core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "rep"}, 0)
	var want []flog.RecordInfo
	if _, err := flog.ScanRecords(leaderDir, func(ri flog.RecordInfo) error {
		ri.Payload = bytes.Clone(ri.Payload)
		want = append(want, ri)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, e := range envs[1:] {
		got := replicaRecords(t, e, "rep")
		if len(got) != len(want) {
			t.Fatalf("%s holds %d records, the leader %d", e.srv.nodeID(), len(got), len(want))
		}
		for i := range got {
			if got[i].Offset != want[i].Offset || got[i].TimeMicros != want[i].TimeMicros || !bytes.Equal(got[i].Payload, want[i].Payload) {
				t.Fatalf("%s record %d: %+v, leader %+v", e.srv.nodeID(), i, got[i], want[i])
			}
		}
	}
	var rep ReplicationReport
	waitFor(t, "the leader to hear both followers hold 50", func() bool {
		getJSON(t, envs[0].srv.HTTPHandler(), "/replication", &rep)
		return len(rep.Followers) == 2 && rep.Followers[0].Durable == 50 && rep.Followers[1].Durable == 50
	})
	if len(rep.Followers) != 2 || rep.Followers[0].Follower != "broker-b" || rep.Followers[1].Durable != 50 ||
		rep.Followers[1].Lag != 0 || rep.Followers[0].LeaderNext != 50 || rep.Followers[0].Committed != nil {
		t.Fatalf("/replication: %+v", rep)
	}
	getJSON(t, envs[0].srv.HTTPHandler(), "/replication/halted", &rep)
	if len(rep.Followers) != 0 {
		t.Fatalf("/replication/halted: %+v", rep)
	}
	getJSON(t, envs[2].srv.HTTPHandler(), "/replication", &rep)
	if len(rep.Replicas) != 1 || rep.Replicas[0].Durable != 50 || rep.Replicas[0].Generation != 1 {
		t.Fatalf("follower's /replication: %+v", rep)
	}
	if got := envs[0].metric("felix_replication_followers"); got != 2 {
		t.Fatalf("felix_replication_followers %v", got)
	}
	if got := envs[1].metric("felix_replication_replicas"); got != 1 {
		t.Fatalf("felix_replication_replicas %v", got)
	}
	// A follower refuses to serve the shard: it is not its leader.
	bs := envs[1].authed(envs[1].dial(0), durableFlags, durableFeatures|ClusterFeatures, "stream.*:stream:acme")
	bs.send(&wire.StreamRead{TenantID: testTenant, Namespace: "prod", Stream: "rep", RequestID: 3})
	if nl, ok := bs.recv().(*wire.NotLeader); !ok || nl.NodeID != "broker-a" {
		t.Fatalf("a follower answered a read with %#v, want not_leader to broker-a", nl)
	}
}

func TestAQuorumPublishNeedsAMajorityAndTimesOutWithout(t *testing.T) {
	envs := startReplicated(t, "q", "quorum", nil)
	s := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, s, "q", 0, 20)
	// Acknowledged means a follower holds it too (with the leader, a majority).
	held := 0
	for _, e := range envs[1:] {
		if r, ok := e.srv.core.StreamReplica(core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "q"}, 0); ok && r.DurableOffset() >= 20 {
			held++
		}
	}
	if held == 0 {
		t.Fatal("acknowledged before any follower held the records")
	}
	// One follower down: still a majority.
	if err := envs[2].shutdown(); err != nil {
		t.Fatal(err)
	}
	publishAcked(t, s, "q", 20, 10)
	waitReplicated(t, envs[1], "q", 30)
	// Both down: the leader alone is no majority.
	if err := envs[1].shutdown(); err != nil {
		t.Fatal(err)
	}
	s.write(binPublish("q", true, 99, numbered(30)))
	e := expectCode(t, s.recv(), wire.CodeQuorumTimeout)
	if e.Retry != wire.RetryOutcomeUnknown {
		t.Fatalf("quorum_timeout retry class %q", e.Retry)
	}
	if got := envs[0].metric("felix_publish_quorum_timeouts_total"); got != 1 {
		t.Fatalf("felix_publish_quorum_timeouts_total %v", got)
	}
	// Nothing past the committed mark is served to readers.
	st, _ := envs[0].srv.core.Stream(core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "q"})
	sh, _ := st.Shard(0)
	if recs, _, err := sh.Read(0, 100, 100, 0); err != nil || len(recs) != 30 {
		t.Fatalf("leader serves %d records (%v), want the 30 committed", len(recs), err)
	}
	if sh.LogNextOffset() != 31 {
		t.Fatalf("leader's log ends at %d", sh.LogNextOffset())
	}
}

func TestAFollowerBackFromAnOutageCatchesUp(t *testing.T) {
	// Under fsync always: the leader's own fsync and the followers'
	// answers both move the committed mark.
	envs := startReplicated(t, "c", "quorum", func(c *Config) { c.Durable.Fsync = "always" })
	s := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, s, "c", 0, 10)
	waitReplicated(t, envs[2], "c", 10)
	// broker-c stops taking calls for a while: the shipper to it fails
	// and retries; b and a keep the majority.
	unblock := blockAppends(envs[2])
	publishAcked(t, s, "c", 10, 200)
	unblock()
	waitReplicated(t, envs[2], "c", 210)
	got := replicaRecords(t, envs[2], "c")
	if len(got) != 210 {
		t.Fatalf("c holds %d records", len(got))
	}
	for i, r := range got {
		if r.Offset != uint64(i) || !bytes.Equal(r.Payload, numbered(i)) {
			t.Fatalf("record %d: offset %d payload %q", i, r.Offset, r.Payload)
		}
	}
}

func TestReplAppendIsRefusedUnlessTheViewBacksIt(t *testing.T) {
	envs := startReplicated(t, "v", "leader", nil)
	b := envs[1].srv
	ref := shardRef{kind: wire.ShardKindStream, tenant: testTenant, ns: "prod", name: "v", shard: 0}
	h := replAppend{TenantID: testTenant, Namespace: "prod", Stream: "v", Generation: 1}
	for _, c := range []struct {
		leader string
		gen    uint64
		reason string
	}{
		{"broker-c", 1, replReasonStale}, // not the leader
		{"broker-a", 0, replReasonStale}, // an older generation
		{"broker-a", 2, core.ReasonNotReady},
	} {
		h.Generation = c.gen
		e := b.checkShipper(ref, c.leader, h)
		if e == nil || e.Detail[wire.DetailReason] != c.reason {
			t.Fatalf("%s at %d: %v, want %s", c.leader, c.gen, e, c.reason)
		}
	}
	// broker-a is no follower of its own shard.
	h.Generation = 1
	if e := envs[0].srv.checkShipper(ref, "broker-a", h); e == nil || e.Detail[wire.DetailReason] != replReasonNotReplica {
		t.Fatalf("leader as its own follower: %v", e)
	}
}

func TestReplRecordsRoundTrip(t *testing.T) {
	recs := []flog.Record{
		{Offset: 7, TimeMicros: 1, Publisher: "alice", Payload: []byte("a")},
		{Offset: 8, TimeMicros: 2, Kind: flog.KindGenerationStart, Generation: 3},
		{Offset: 9, TimeMicros: 3, Payload: []byte("ccc"), Producer: &flog.Producer{ID: 1, Sequence: 2, Count: 1, Digest: 4}},
	}
	b, err := appendReplRecords(nil, recs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseReplRecords(b, 7, 10)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v %+v", got[:2], *got[2].Producer) != fmt.Sprintf("%+v %+v", []flog.Record{
		{Offset: 7, TimeMicros: 1, Publisher: "alice", Payload: []byte("a")},
		{Offset: 8, TimeMicros: 2, Kind: flog.KindGenerationStart, Generation: 3, Payload: []byte{}},
	}, *recs[2].Producer) || string(got[2].Payload) != "ccc" || got[2].Offset != 9 {
		t.Fatalf("round trip: %+v", got)
	}
	if _, err := parseReplRecords(b, 7, 2); err == nil {
		t.Fatal("more records than allowed were accepted")
	}
	for i := 1; i < len(b); i++ {
		if _, err := parseReplRecords(b[:i], 0, 10); err == nil && i != 21+1+4+1 {
			// Cuts at a record boundary decode to fewer records; others fail.
			recs, _ := parseReplRecords(b[:i], 0, 10)
			if len(recs) == 3 {
				t.Fatalf("a body cut at %d decoded whole", i)
			}
		}
	}
}

func FuzzParseReplRecords(f *testing.F) {
	b, _ := appendReplRecords(nil, []flog.Record{{Payload: []byte("x"), Publisher: "p"},
		{Producer: &flog.Producer{ID: 1}, Payload: []byte("yy")}})
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := parseReplRecords(b, 0, 64)
		if err != nil {
			return
		}
		again, err := appendReplRecords(nil, recs)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs: %v", err)
		}
	})
}

// getJSON GETs path from h and decodes the 200 answer into v.
func getJSON(t *testing.T, h http.Handler, path string, v any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if rec.Code != 200 {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// restartBroker starts e's broker again on the same storage and node id
// (new ports), as a process restart would.
func restartBroker(t *testing.T, e *env) *env {
	t.Helper()
	cfg := e.srv.cfg
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.Peer.Addr = "127.0.0.1:0"
	tlsCfg, roots := testTLS(t)
	deps := Deps{Catalog: e.src, TLS: tlsCfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Cluster: &viewSource{}}
	return startServer(t, cfg, deps, e.signer, roots, e.src)
}

// promoted is the assignment of stream name's shard 0 led by leader at
// generation gen, followed by the others of a, b, c.
func promoted(name, consistency, leader string, gen uint64) wire.ShardAssignment {
	a := owned(wire.ShardKindStream, name, 0, leader)
	a.Generation = gen
	a.StorageID = "s-" + leader
	a.Consistency = consistency
	for _, n := range []string{"broker-a", "broker-b", "broker-c"} {
		if n != leader {
			a.Replicas = append(a.Replicas, wire.ShardReplica{NodeID: n, StorageID: "s-" + n})
		}
	}
	return a
}

// viewWithDown is viewOf with the brokers named in down marked down.
func viewWithDown(tag string, brokers []*env, down map[string]bool, asg ...wire.ShardAssignment) wire.ClusterView {
	v := viewOf(tag, brokers, asg...)
	for i := range v.Brokers {
		if down[v.Brokers[i].NodeID] {
			v.Brokers[i].State = wire.BrokerDown
		}
	}
	return v
}

func TestAPromotedFollowerFencesAMajorityAndServesEveryAcknowledgedRecord(t *testing.T) {
	envs := startReplicated(t, "f", "quorum", nil)
	s := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, s, "f", 0, 30)
	// broker-a dies; the control plane names broker-b at generation 2,
	// keeping a in the set (a majority of three is still two).
	if err := envs[0].shutdown(); err != nil {
		t.Fatal(err)
	}
	v := viewWithDown("v2", envs, map[string]bool{"broker-a": true}, promoted("f", "quorum", "broker-b", 2))
	apply(envs[1], v)
	apply(envs[2], v)
	b := envs[1].authed(envs[1].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	var offs []uint64
	waitFor(t, "broker-b to take the shard over", func() bool {
		b.write(binPublish("f", true, 1000, numbered(30)))
		ok, isOK := b.recv().(*wire.PublishOK)
		if isOK && ok.Offset != nil {
			offs = append(offs, *ok.Offset)
		}
		return isOK
	})
	// The generation start took offset 30.
	if offs[0] != 31 {
		t.Fatalf("the first publish after the takeover landed at %d, want 31", offs[0])
	}
	st, _ := envs[1].srv.core.Stream(core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "f"})
	sh, _ := st.Shard(0)
	recs, _, err := sh.Read(0, 100, 100, 0)
	if err != nil || len(recs) != 32 {
		t.Fatalf("broker-b serves %d records (%v)", len(recs), err)
	}
	for i, r := range recs[:30] {
		if !bytes.Equal(r.Payload, numbered(i)) || r.Generation != 1 {
			t.Fatalf("record %d: %q generation %d", i, r.Payload, r.Generation)
		}
	}
	if recs[30].Kind != flog.KindGenerationStart || recs[30].Generation != 2 || recs[31].Generation != 2 {
		t.Fatalf("after the takeover: %+v %+v", recs[30], recs[31])
	}
	waitReplicated(t, envs[2], "f", 32)
	// broker-c's copy is fenced at 2: a write of the old generation is refused.
	r, _ := envs[2].srv.core.StreamReplica(core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "f"}, 0)
	if r.Fenced() != 2 {
		t.Fatalf("broker-c fenced at %d", r.Fenced())
	}
}

func TestANewLeaderCatchesUpFromTheFurthestCopyAndCutsAnUncommittedSuffix(t *testing.T) {
	envs := startReplicated(t, "d", "quorum", func(c *Config) { c.QuorumTimeout = 300 * time.Millisecond })
	s := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, s, "d", 0, 10)
	waitReplicated(t, envs[2], "d", 10)
	// broker-c stops taking records; 10 more are acknowledged by a and b.
	unblockC := blockAppends(envs[2])
	publishAcked(t, s, "d", 10, 10)
	waitReplicated(t, envs[1], "d", 20)
	// broker-b stops too: one more publish reaches only a's log (b's
	// handler gives the call up when a's link dies).
	unblockB := blockAppends(envs[1])
	s.write(binPublish("d", true, 99, numbered(20)))
	expectCode(t, s.recv(), wire.CodeQuorumTimeout)
	if err := envs[0].shutdown(); err != nil {
		t.Fatal(err)
	}
	unblockB()
	unblockC()
	// broker-c is promoted: it fences itself and b, finds b's copy
	// further (20 records to its 10), fetches the rest and serves.
	v := viewWithDown("v2", envs, map[string]bool{"broker-a": true}, promoted("d", "quorum", "broker-c", 2))
	apply(envs[1], v)
	apply(envs[2], v)
	c := envs[2].authed(envs[2].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	waitFor(t, "broker-c to take the shard over", func() bool {
		c.write(binPublish("d", true, 1000, numbered(21)))
		ok, isOK := c.recv().(*wire.PublishOK)
		return isOK && ok.Offset != nil && *ok.Offset == 21
	})
	// broker-a comes back as a follower: its record 20, never committed,
	// is cut and replaced by c's generation start.
	a := restartBroker(t, envs[0])
	all := []*env{a, envs[1], envs[2]}
	v = viewOf("v3", all, promoted("d", "quorum", "broker-c", 2))
	for _, e := range all {
		apply(e, v)
	}
	waitFor(t, "broker-a's copy to match c's", func() bool {
		r, ok := a.srv.core.StreamReplica(core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "d"}, 0)
		return ok && r.DurableOffset() == 22
	})
	for _, e := range all {
		got := replicaRecords(t, e, "d")
		if len(got) != 22 {
			t.Fatalf("%s holds %d records", e.srv.nodeID(), len(got))
		}
		for i := range 20 {
			if !bytes.Equal(got[i].Payload, numbered(i)) {
				t.Fatalf("%s record %d is %q", e.srv.nodeID(), i, got[i].Payload)
			}
		}
		if got[20].Kind != flog.KindGenerationStart || !bytes.Equal(got[21].Payload, numbered(21)) {
			t.Fatalf("%s records 20, 21: %+v %+v", e.srv.nodeID(), got[20], got[21])
		}
	}
}

func TestFollowersReportASilentQuorumLeader(t *testing.T) {
	envs := startReplicated(t, "s", "quorum", func(c *Config) { c.Node.LeaderSuspectAfter = 2 * time.Second })
	s := envs[0].authed(envs[0].dial(0), durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, s, "s", 0, 3)
	// An idle leader keeps its followers hearing from it.
	time.Sleep(2500 * time.Millisecond)
	if got := envs[1].srv.repl.suspects(); len(got) != 0 {
		t.Fatalf("an idle but live leader is suspected: %+v", got)
	}
	if err := envs[0].shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, e := range envs[1:] {
		waitFor(t, e.srv.nodeID()+" to suspect broker-a", func() bool {
			got := e.srv.repl.suspects()
			return len(got) == 1 && got[0].Leader == "broker-a" && got[0].Generation == 1 && got[0].Name == "s" &&
				e.metric("felix_replication_leaders_suspected_total") == 1
		})
		// The silence watch asks at its next check (every silenceCheck);
		// the suspects() calls above may have counted the silence first.
		select {
		case <-e.srv.repl.soonC:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not ask for a heartbeat at once", e.srv.nodeID())
		}
	}
}

// blockAppends holds every repl_append e is asked to serve until the
// returned func is called or the caller gives the call up.
func blockAppends(e *env) (unblock func()) {
	blocked := make(chan struct{})
	hook := func(ctx context.Context, typ string) {
		if typ == TypeReplAppend {
			select {
			case <-blocked:
			case <-ctx.Done():
			}
		}
	}
	e.srv.fwd.callHook.Store(&hook)
	return func() { e.srv.fwd.callHook.Store(nil); close(blocked) }
}
