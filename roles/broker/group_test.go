package broker

import (
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

const (
	groupFeatures = durableFeatures | GroupFeatures
	groupAll      = "group.*:stream:acme"
)

func gscope(stream string, shard uint32) wire.GroupScope {
	return wire.GroupScope{TenantID: testTenant, Namespace: "prod", Stream: stream, Shard: shard, Group: "workers"}
}

func u64(v uint64) *uint64 { return &v }

// groupRecords polls and checks the answer is group_records.
func groupRecords(t *testing.T, s *tstream, m *wire.GroupPoll) []wire.GroupRecord {
	t.Helper()
	s.send(m)
	r, ok := s.recv().(*wire.GroupRecords)
	if !ok || r.RequestID != m.RequestID {
		t.Fatalf("group_poll %d answered %#v", m.RequestID, r)
	}
	return r.Records
}

// TestGroupPollAckNackOverTheWire: the group messages are advertised with
// storage and served end to end: a poll claims, a second poll gets
// nothing while claimed, a nack hands back, an ack finishes, describe
// reports the cursor, dead letters and seek/delete work.
func TestGroupPollAckNackOverTheWire(t *testing.T) {
	e := startDurable(t, testConfig())
	if e.srv.serverFeatures()&GroupFeatures != GroupFeatures {
		t.Fatal("group features not advertised with storage")
	}
	s := e.authed(e.dial(0), durableFlags, groupFeatures, pubAll, groupAll)
	publishAcked(t, s, "log", 0, 3)
	sc := gscope("log", 0)
	recs := groupRecords(t, s, &wire.GroupPoll{GroupScope: sc, MaxRecords: 2, RequestID: 1})
	if len(recs) != 2 || recs[0].Offset != 0 || recs[0].Attempts != 1 || string(recs[0].Payload) != string(numbered(0)) {
		t.Fatalf("first poll %+v", recs)
	}
	one := uint32(1)
	s.send(&wire.GroupNack{GroupScope: sc, Offset: u64(0), Attempts: &one, RequestID: 2})
	if ok, isOK := s.recv().(*wire.CacheOK); !isOK || ok.RequestID != 2 {
		t.Fatalf("nack answered %#v", ok)
	}
	s.send(&wire.GroupAck{GroupScope: sc, Offset: u64(1), RequestID: 3})
	if _, ok := s.recv().(*wire.CacheOK); !ok {
		t.Fatal("ack not answered cache_ok")
	}
	recs = groupRecords(t, s, &wire.GroupPoll{GroupScope: sc, MaxRecords: 5, RequestID: 4})
	if len(recs) != 2 || recs[0].Offset != 0 || recs[0].Attempts != 2 || recs[1].Offset != 2 {
		t.Fatalf("after nack %+v", recs)
	}
	s.send(&wire.GroupNack{GroupScope: sc, Offset: u64(0), Attempts: &one, RequestID: 5})
	expectCode(t, s.recv(), wire.CodeStaleClaim)
	s.send(&wire.GroupDeadLetter{GroupScope: sc, Offset: u64(0), RequestID: 6})
	if _, ok := s.recv().(*wire.CacheOK); !ok {
		t.Fatal("dead_letter not answered cache_ok")
	}
	s.send(&wire.GroupDeadLetters{GroupScope: sc, RequestID: 7})
	if l, ok := s.recv().(*wire.GroupDeadLetterList); !ok || len(l.Offsets) != 1 || l.Offsets[0] != 0 {
		t.Fatalf("dead letters %#v", l)
	}
	s.send(&wire.GroupAck{GroupScope: sc, Offset: u64(2), RequestID: 8})
	s.recv()
	s.send(&wire.GroupDescribe{GroupScope: sc, RequestID: 9})
	info, ok := s.recv().(*wire.GroupInfo)
	if !ok || info.Committed == nil || *info.Committed != 3 || info.Tail != 3 || info.DeadLetters != 1 || info.InFlight != 0 {
		t.Fatalf("describe %#v", info)
	}
	s.send(&wire.GroupSeek{GroupScope: sc, Start: &wire.GroupSeekStart{Earliest: true}, RequestID: 10})
	if p, ok := s.recv().(*wire.GroupPosition); !ok || p.Offset != 0 || !p.Moved {
		t.Fatalf("seek %#v", p)
	}
	s.send(&wire.GroupDelete{GroupScope: sc, RequestID: 11})
	if d, ok := s.recv().(*wire.GroupDeleted); !ok || !d.Existed {
		t.Fatalf("delete %#v", d)
	}
}

// A poll with wait_ms is answered when a record arrives, not before, and
// a poll that waits out its wait is answered empty.
func TestGroupPollWaitsForARecord(t *testing.T) {
	cfg := testConfig()
	cfg.GroupMaxWait = 10 * time.Second
	e := startDurable(t, cfg)
	qc := e.dial(0)
	s := e.authed(qc, 0, groupFeatures, pubAll, groupAll)
	pub := e.authed(qc, durableFlags, groupFeatures, pubAll)
	sc := gscope("log", 0)
	if recs := groupRecords(t, s, &wire.GroupPoll{GroupScope: sc, MaxRecords: 1, WaitMS: 1, RequestID: 1}); len(recs) != 0 {
		t.Fatalf("an empty shard gave %+v", recs)
	}
	s.send(&wire.GroupPoll{GroupScope: sc, MaxRecords: 1, WaitMS: 60000, RequestID: 2})
	time.Sleep(50 * time.Millisecond) // the poll is waiting (not asserted: either order passes below)
	publishAcked(t, pub, "log", 0, 1)
	r, ok := s.recv().(*wire.GroupRecords)
	if !ok || r.RequestID != 2 || len(r.Records) != 1 || r.Records[0].Offset != 0 {
		t.Fatalf("waiting poll answered %#v", r)
	}
}

// Seek and delete need group.manage; a poll needs group.consume.
func TestGroupPermissions(t *testing.T) {
	e := startDurable(t, testConfig())
	s := e.authed(e.dial(0), 0, groupFeatures, "group.consume:stream:acme")
	sc := gscope("log", 0)
	s.send(&wire.GroupSeek{GroupScope: sc, Start: &wire.GroupSeekStart{Latest: true}, RequestID: 1})
	expectCode(t, s.recv(), wire.CodeForbidden)
	s.send(&wire.GroupDelete{GroupScope: sc, RequestID: 2})
	expectCode(t, s.recv(), wire.CodeForbidden)
	groupRecords(t, s, &wire.GroupPoll{GroupScope: sc, MaxRecords: 1, RequestID: 3})
	n := e.authed(e.dial(0), 0, groupFeatures, pubAll)
	n.send(&wire.GroupPoll{GroupScope: sc, MaxRecords: 1, RequestID: 4})
	expectCode(t, n.recv(), wire.CodeForbidden)
}

// Without storage no group feature is advertised and group_poll is an
// unknown request.
func TestGroupsNeedStorage(t *testing.T) {
	bare := startEnv(t, testConfig(), wire.StreamSpec{Stream: "log"})
	if bare.srv.serverFeatures()&GroupFeatures != 0 {
		t.Fatal("group features advertised without storage")
	}
	b := bare.authed(bare.dial(0), 0, allFeatures, pubAll, groupAll)
	b.send(&wire.GroupPoll{GroupScope: gscope("log", 0), MaxRecords: 1, RequestID: 9})
	if u, ok := b.recv().(*wire.Unsupported); !ok || u.RequestType != "group_poll" {
		t.Fatalf("group_poll without storage: %#v", u)
	}
}

// A broker that does not own the shard answers not_leader and never
// forwards; the owned shard is served.
func TestGroupPollNotForwarded(t *testing.T) {
	e := halfOwnedOrders(t)
	s := e.authed(e.dial(0), 0, groupFeatures|clusterFeatures, pubAll, groupAll)
	s.send(&wire.GroupPoll{GroupScope: gscope("orders", 1), MaxRecords: 1, RequestID: 1})
	nl, ok := s.recv().(*wire.NotLeader)
	if !ok || nl.NodeID != otherNode || nl.RequestID == nil || *nl.RequestID != 1 {
		t.Fatalf("group_poll to another broker's shard: %#v", nl)
	}
	groupRecords(t, s, &wire.GroupPoll{GroupScope: gscope("orders", 0), MaxRecords: 1, RequestID: 2})
}
