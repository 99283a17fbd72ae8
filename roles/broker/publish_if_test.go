package broker

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

const pubIfFeatures = durableFeatures | wire.FeaturePublishConditional

func publishIf(stream string, reqID, expected uint64, payloads ...[]byte) *wire.PublishIf {
	return &wire.PublishIf{TenantID: testTenant, Namespace: "prod", Stream: stream, Payloads: payloads, ExpectedOffset: &expected, RequestID: reqID}
}

// wantWritten checks m is the publish_ok of request id at offset.
func wantWritten(t *testing.T, m wire.Message, id, offset uint64) {
	t.Helper()
	ok, isOK := m.(*wire.PublishOK)
	if !isOK || ok.RequestID != id || ok.Offset == nil || *ok.Offset != offset {
		t.Fatalf("want publish_ok %d at %d, got %#v", id, offset, m)
	}
}

// wantRefused checks m is the publish_refused of request id naming tail.
func wantRefused(t *testing.T, m wire.Message, id, tail uint64) {
	t.Helper()
	r, ok := m.(*wire.PublishRefused)
	if !ok || r.RequestID != id || r.OffsetMismatch == nil || r.OffsetMismatch.Tail != tail {
		t.Fatalf("want publish_refused %d with tail %d, got %#v", id, tail, m)
	}
}

// readLog reads every record of shard 0 of stream over the wire.
func readLog(t *testing.T, s *tstream, stream string) []wire.StreamRecord {
	t.Helper()
	var got []wire.StreamRecord
	for from, i := uint64(0), 0; i < 1000; i++ {
		s.send(&wire.StreamRead{TenantID: testTenant, Namespace: "prod", Stream: stream, From: from, MaxRecords: 100, RequestID: 1})
		page, ok := s.recv().(*wire.StreamRecords)
		if !ok {
			t.Fatalf("stream_read answered %#v", page)
		}
		if len(page.Records) == 0 {
			return got
		}
		got = append(got, page.Records...)
		from = page.NextOffset
	}
	t.Fatal("stream_read never reached the end")
	return nil
}

// TestPublishIfWritesAtTheExpectedOffset: publish_if is advertised with
// storage, is answered with publish_ok and its offset (even to a client
// that did not ask for offsets, and under ack-on-enqueue, since the answer
// comes once durable), and a mismatch with publish_refused and the tail.
func TestPublishIfWritesAtTheExpectedOffset(t *testing.T) {
	cfg := testConfig()
	cfg.AckOnEnqueue = true
	e := startDurable(t, cfg)
	if e.srv.serverFeatures()&wire.FeaturePublishConditional == 0 {
		t.Fatal("FEATURE_PUBLISH_CONDITIONAL not advertised with storage")
	}
	s := e.authed(e.dial(0), 0, pubIfFeatures, pubAll)
	s.send(publishIf("log", 1, 0, []byte("a"), []byte("b")))
	wantWritten(t, s.recv(), 1, 0)
	s.send(publishIf("log", 2, 0, []byte("late")))
	wantRefused(t, s.recv(), 2, 2)
	s.send(publishIf("log", 3, 7, []byte("ahead")))
	wantRefused(t, s.recv(), 3, 2)
	s.send(publishIf("log", 4, 2, []byte("c")))
	wantWritten(t, s.recv(), 4, 2)
	recs := readLog(t, s, "log")
	if len(recs) != 3 || string(recs[0].Payload) != "a" || string(recs[1].Payload) != "b" || string(recs[2].Payload) != "c" {
		t.Fatalf("log holds %+v", recs)
	}
}

// TestOfWritersRacingAtOneOffsetExactlyOneWins ports the spec's
// `of_writers_racing_at_one_offset_exactly_one_wins`: writers on separate
// connections race publish_if at the same expected offset; exactly one is
// written, every other is refused with offset_mismatch naming the new
// tail, and the log holds exactly the winner's record there.
func TestOfWritersRacingAtOneOffsetExactlyOneWins(t *testing.T) {
	e := startDurable(t, testConfig())
	const writers, rounds = 8, 10
	ss := make([]*tstream, writers)
	for i := range ss {
		ss[i] = e.authed(e.dial(0), 0, pubIfFeatures, pubAll)
	}
	type answer struct {
		w   int
		msg wire.Message
		err error
	}
	winners := map[uint64]int{}
	for round := range uint64(rounds) {
		answers := make(chan answer, writers)
		var wg sync.WaitGroup
		for w, s := range ss {
			frame, err := wire.AppendMessageFrame(nil, publishIf("log", round+1, round, fmt.Appendf(nil, "r%d-w%d", round, w)))
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() { // no t.Fatal off the test goroutine: errors go to answers
				defer wg.Done()
				if _, err := s.st.Write(frame); err != nil {
					answers <- answer{w: w, err: err}
					return
				}
				s.st.SetReadDeadline(time.Now().Add(20 * time.Second))
				f, err := s.fr.NextOwned()
				if err != nil {
					answers <- answer{w: w, err: err}
					return
				}
				m, err := wire.ParseMessage(f.Payload)
				answers <- answer{w: w, msg: m, err: err}
			}()
		}
		wg.Wait()
		close(answers)
		won := -1
		for a := range answers {
			if a.err != nil {
				t.Fatalf("round %d writer %d: %v", round, a.w, a.err)
			}
			if _, ok := a.msg.(*wire.PublishOK); ok {
				if won >= 0 {
					t.Fatalf("round %d: writers %d and %d both won", round, won, a.w)
				}
				won = a.w
				wantWritten(t, a.msg, round+1, round)
				continue
			}
			wantRefused(t, a.msg, round+1, round+1)
		}
		if won < 0 {
			t.Fatalf("round %d: nobody won", round)
		}
		winners[round] = won
	}
	recs := readLog(t, ss[0], "log")
	if len(recs) != rounds {
		t.Fatalf("log holds %d records after %d rounds", len(recs), rounds)
	}
	for i, r := range recs {
		if want := fmt.Sprintf("r%d-w%d", i, winners[uint64(i)]); r.Offset != uint64(i) || string(r.Payload) != want {
			t.Fatalf("record %d: %q at %d, want %q", i, r.Payload, r.Offset, want)
		}
	}
}

// TestARefusedPublishLeavesNoRecordAndNoGap ports the spec's
// `a_refused_publish_leaves_no_record_and_no_gap`: after refusals, the
// next successful publish (conditional or plain) takes the very next
// offset, and nothing of the refused batches is in the log.
func TestARefusedPublishLeavesNoRecordAndNoGap(t *testing.T) {
	e := startDurable(t, testConfig())
	s := e.authed(e.dial(0), durableFlags, pubIfFeatures, pubAll)
	publishAcked(t, s, "log", 0, 2) // offsets 0 and 1
	for i, exp := range []uint64{0, 1, 3, 100} {
		s.send(publishIf("log", uint64(10+i), exp, []byte("refused-a"), []byte("refused-b")))
		wantRefused(t, s.recv(), uint64(10+i), 2)
	}
	s.send(publishIf("log", 20, 2, []byte("fenced")))
	wantWritten(t, s.recv(), 20, 2)
	for i := range 3 {
		s.send(publishIf("log", uint64(30+i), 2, []byte("stale")))
		wantRefused(t, s.recv(), uint64(30+i), 3)
	}
	if offs := publishAcked(t, s, "log", 3, 1); offs[0] != 3 {
		t.Fatalf("plain publish after refusals at %d, want 3", offs[0])
	}
	recs := readLog(t, s, "log")
	if len(recs) != 4 {
		t.Fatalf("log holds %d records, want 4", len(recs))
	}
	for i, r := range recs {
		if r.Offset != uint64(i) || string(r.Payload) == "stale" || string(r.Payload) == "refused-a" || string(r.Payload) == "refused-b" {
			t.Fatalf("record %d: %q at %d", i, r.Payload, r.Offset)
		}
	}
	if string(recs[2].Payload) != "fenced" {
		t.Fatalf("offset 2 holds %q", recs[2].Payload)
	}
}

// TestPublishIfRefusals: an in-memory stream is refused (not_durable), a
// token without stream.publish is forbidden, bad requests are
// invalid_request, a shard out of range is refused, and a broker
// without storage does not serve publish_if at all.
func TestPublishIfRefusals(t *testing.T) {
	e := startDurable(t, testConfig(), wire.StreamSpec{Stream: "mem"}, wire.StreamSpec{Stream: "wide", Durable: true, Shards: 2})
	qc := e.dial(0)
	s := e.authed(qc, 0, pubIfFeatures, pubAll)
	s.send(publishIf("mem", 1, 0, []byte("x")))
	if we := expectCode(t, s.recv(), wire.CodeInvalidRequest); we.Reason() != "not_durable" {
		t.Fatalf("in-memory stream: %v", we)
	}
	reader := e.authed(qc, 0, pubIfFeatures, "stream.subscribe:*")
	reader.send(publishIf("log", 2, 0, []byte("x")))
	expectCode(t, reader.recv(), wire.CodeForbidden)
	s.send(publishIf("log", 3, 0))
	if pe, ok := s.recv().(*wire.PublishError); !ok || pe.RequestID != 3 || pe.Code != wire.CodeInvalidRequest {
		t.Fatalf("empty batch: %#v", pe)
	}
	s.send(&wire.PublishIf{TenantID: testTenant, Namespace: "prod", Stream: "log", Payloads: [][]byte{[]byte("x")}, RequestID: 4})
	expectCode(t, s.recv(), wire.CodeInvalidRequest)
	s.write(wire.AppendFrame(nil, 0, []byte(`{"type":"publish_if","request_id":5,"payloads":["!!"]}`)))
	if pe, ok := s.recv().(*wire.PublishError); !ok || pe.RequestID != 5 {
		t.Fatalf("undecodable publish_if: %#v", pe)
	}
	nine := uint32(9)
	out := publishIf("wide", 6, 0, []byte("x"))
	out.Shard = &nine
	s.send(out)
	if we := expectCode(t, s.recv(), wire.CodeInvalidRequest); we.Reason() != wire.ReasonShardOutOfRange {
		t.Fatalf("out-of-range shard: %v", we)
	}
	one := uint32(1)
	on1 := publishIf("wide", 7, 0, []byte("x"))
	on1.Shard = &one
	s.send(on1)
	wantWritten(t, s.recv(), 7, 0)
	s.send(publishIf("wide", 8, 0, []byte("y"))) // shard 0 is still empty
	wantWritten(t, s.recv(), 8, 0)
	s.send(on1)
	wantRefused(t, s.recv(), 7, 1)
	// Nothing was written to the in-memory stream or by the refusals.
	if got := readLog(t, s, "log"); len(got) != 0 {
		t.Fatalf("log holds %d records", len(got))
	}

	bare := startEnv(t, testConfig(), wire.StreamSpec{Stream: "log", Durable: true})
	if bare.srv.serverFeatures()&wire.FeaturePublishConditional != 0 {
		t.Fatal("FEATURE_PUBLISH_CONDITIONAL advertised without storage")
	}
	b := bare.authed(bare.dial(0), 0, allFeatures, pubAll)
	b.send(publishIf("log", 9, 0, []byte("x")))
	if u, ok := b.recv().(*wire.Unsupported); !ok || u.RequestType != "publish_if" || u.RequestID == nil || *u.RequestID != 9 {
		t.Fatalf("publish_if without storage: %#v", u)
	}
}

// halfOwnedOrders starts a broker with durable storage in a cluster whose
// view gives it shard 0 of the durable stream "orders" and shard 1 to
// otherNode: a request for shard 1 must be answered not_leader.
func halfOwnedOrders(t *testing.T) *env {
	t.Helper()
	cfg := testConfig()
	cfg.Durable.StorageDir = t.TempDir()
	e := startClusterEnv(t, cfg, nil, wire.StreamSpec{Stream: "orders", Shards: 2, Durable: true})
	e.srv.applyView(clusterView("v1",
		placed{kind: "stream", name: "orders", shard: 0, node: selfNode, gen: 1, durable: true},
		placed{kind: "stream", name: "orders", shard: 1, node: otherNode, gen: 2, durable: true}))
	return e
}

// TestPublishIfNotForwarded: a broker that does not own the shard answers
// not_leader naming the owner (a not_leader message to a client that
// offered FEATURE_REDIRECT, publish_error not_leader to the rest) and
// never forwards; the owned shard is served.
func TestPublishIfNotForwarded(t *testing.T) {
	e := halfOwnedOrders(t)
	qc := e.dial(0)
	redirected := e.authed(qc, 0, pubIfFeatures|clusterFeatures, pubAll)
	plain := e.authed(qc, 0, pubIfFeatures, pubAll)
	zero, one := uint32(0), uint32(1)

	m := publishIf("orders", 1, 0, []byte("x"))
	m.Shard = &one
	redirected.send(m)
	nl, ok := redirected.recv().(*wire.NotLeader)
	if !ok || nl.NodeID != otherNode || nl.Addr != otherAddr || nl.RequestID == nil || *nl.RequestID != 1 {
		t.Fatalf("publish_if to another broker's shard with FEATURE_REDIRECT: %#v", nl)
	}
	m.RequestID = 2
	plain.send(m)
	pe, ok := plain.recv().(*wire.PublishError)
	if !ok || pe.RequestID != 2 || pe.Code != wire.CodeNotLeader {
		t.Fatalf("publish_if to another broker's shard: %#v", pe)
	}
	if back, ok := wire.NotLeaderFromError(pe.Err()); !ok || back.NodeID != otherNode {
		t.Fatalf("not_leader detail %s", pe.Detail)
	}
	if n := e.metric("felix_broker_forwarded_publishes_total"); n != 0 {
		t.Fatalf("%v publishes forwarded", n)
	}
	m = publishIf("orders", 3, 0, []byte("mine"))
	m.Shard = &zero
	plain.send(m)
	wantWritten(t, plain.recv(), 3, 0)
}
