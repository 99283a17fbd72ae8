package broker

import (
	"testing"

	"github.com/felixmq/felix/wire"
)

const idemFeatures = durableFeatures | wire.FeatureIdempotentProducer

func pubIdem(stream string, reqID, producer, seq uint64, payloads ...string) *wire.PublishIdempotent {
	m := &wire.PublishIdempotent{TenantID: testTenant, Namespace: "prod", Stream: stream, ProducerID: producer, Sequence: &seq, RequestID: reqID}
	for _, p := range payloads {
		m.Payloads = append(m.Payloads, []byte(p))
	}
	return m
}

// producerInit takes a producer id for stream over s.
func producerInit(t *testing.T, s *tstream, stream string) uint64 {
	t.Helper()
	s.send(&wire.ProducerInit{TenantID: testTenant, Namespace: "prod", Stream: stream, RequestID: 100})
	ok, isOK := s.recv().(*wire.ProducerInitOK)
	if !isOK || ok.RequestID != 100 || ok.ProducerID == 0 {
		t.Fatalf("producer_init answered %#v", ok)
	}
	return ok.ProducerID
}

// wantProducerRefused checks m is the publish_refused of request id with
// a producer refusal of reason.
func wantProducerRefused(t *testing.T, m wire.Message, id uint64, reason string) *wire.ProducerRefusal {
	t.Helper()
	r, ok := m.(*wire.PublishRefused)
	if !ok || r.RequestID != id || r.Producer == nil || r.Producer.Reason != reason {
		t.Fatalf("want publish_refused %d for %s, got %#v", id, reason, m)
	}
	return r.Producer
}

// TestIdempotentPublishOverTheWire: FEATURE_IDEMPOTENT_PRODUCER is
// advertised; on a durable and an in-memory stream, batches under a
// producer's sequences are answered with their offsets, a re-send with
// the first copy's offset and nothing appended, and each refusal is
// publish_refused with its producer reason and writes nothing.
func TestIdempotentPublishOverTheWire(t *testing.T) {
	e := startDurable(t, testConfig(), wire.StreamSpec{Stream: "mem"})
	if e.srv.serverFeatures()&wire.FeatureIdempotentProducer == 0 {
		t.Fatal("FEATURE_IDEMPOTENT_PRODUCER not advertised")
	}
	s := e.authed(e.dial(0), 0, idemFeatures, pubAll)
	for _, stream := range []string{"log", "mem"} {
		id := producerInit(t, s, stream)
		if other := producerInit(t, s, stream); other == id {
			t.Fatalf("two producer_init answered the same id %d", id)
		}
		s.send(pubIdem(stream, 1, id, 0, "a", "b"))
		wantWritten(t, s.recv(), 1, 0)
		s.send(pubIdem(stream, 2, id, 1, "c"))
		wantWritten(t, s.recv(), 2, 2)
		s.send(pubIdem(stream, 3, id, 0, "a", "b")) // a re-send
		wantWritten(t, s.recv(), 3, 0)
		s.send(pubIdem(stream, 4, id, 1, "not c"))
		wantProducerRefused(t, s.recv(), 4, wire.ReasonSequenceReused)
		s.send(pubIdem(stream, 5, id, 5, "d"))
		if r := wantProducerRefused(t, s.recv(), 5, wire.ReasonSequenceGap); r.Expected == nil || *r.Expected != 2 {
			t.Fatalf("gap expects %v, want 2", r.Expected)
		}
		s.send(pubIdem(stream, 6, id+1, 3, "e"))
		wantProducerRefused(t, s.recv(), 6, wire.ReasonUnknownProducer)
		s.send(pubIdem(stream, 7, id, 2, "d"))
		wantWritten(t, s.recv(), 7, 3)
	}
	recs := readLog(t, s, "log")
	if len(recs) != 4 || string(recs[0].Payload) != "a" || string(recs[2].Payload) != "c" || string(recs[3].Payload) != "d" {
		t.Fatalf("log holds %+v", recs)
	}
	// Bad requests are refused as such.
	s.send(&wire.PublishIdempotent{TenantID: testTenant, Namespace: "prod", Stream: "log", Payloads: [][]byte{[]byte("x")}, RequestID: 8})
	if pe, ok := s.recv().(*wire.PublishError); !ok || pe.RequestID != 8 || pe.Code != wire.CodeInvalidRequest {
		t.Fatalf("publish_idempotent without a producer: %#v", pe)
	}
	s.send(&wire.ProducerInit{TenantID: testTenant, Namespace: "prod", Stream: "nope", RequestID: 9})
	if em, ok := s.recv().(*wire.ErrorMsg); !ok || em.Code != wire.CodeNotFound {
		t.Fatalf("producer_init of an unknown stream: %#v", em)
	}
	if n := e.metric(`felix_idempotent_duplicates_total`); n != 2 {
		t.Fatalf("felix_idempotent_duplicates_total %v, want 2", n)
	}
	// Re-sends are not counted as published again: 4 records per stream.
	if n := e.metric("felix_publish_messages_total"); n != 8 {
		t.Fatalf("felix_publish_messages_total %v, want 8", n)
	}
}

// TestIdempotentPublishSurvivesARestart: a broker restarted on the same
// storage answers a re-send of a batch written before the restart with
// its offset and appends nothing.
func TestIdempotentPublishSurvivesARestart(t *testing.T) {
	cfg := testConfig()
	cfg.Durable.StorageDir = t.TempDir()
	e := startEnv(t, cfg, wire.StreamSpec{Stream: "log", Durable: true})
	s := e.authed(e.dial(0), 0, idemFeatures, pubAll)
	id := producerInit(t, s, "log")
	for seq := range uint64(3) {
		s.send(pubIdem("log", seq+1, id, seq, "r", "s"))
		wantWritten(t, s.recv(), seq+1, seq*2)
	}
	if err := e.shutdown(); err != nil {
		t.Fatal(err)
	}
	e = startEnv(t, cfg, wire.StreamSpec{Stream: "log", Durable: true})
	s = e.authed(e.dial(0), 0, idemFeatures, pubAll)
	s.send(pubIdem("log", 10, id, 2, "r", "s"))
	wantWritten(t, s.recv(), 10, 4)
	s.send(pubIdem("log", 11, id, 3, "t"))
	wantWritten(t, s.recv(), 11, 6)
	if recs := readLog(t, s, "log"); len(recs) != 7 {
		t.Fatalf("log holds %d records after the re-send, want 7", len(recs))
	}
}

// TestIdempotentPublishNotForwarded: a broker that does not own the
// shard answers not_leader and never forwards; the owned shard is served.
func TestIdempotentPublishNotForwarded(t *testing.T) {
	e := halfOwnedOrders(t)
	s := e.authed(e.dial(0), 0, idemFeatures|clusterFeatures, pubAll)
	zero, one := uint32(0), uint32(1)
	m := pubIdem("orders", 1, 42, 0, "x")
	m.Shard = &one
	s.send(m)
	nl, ok := s.recv().(*wire.NotLeader)
	if !ok || nl.NodeID != otherNode || nl.RequestID == nil || *nl.RequestID != 1 {
		t.Fatalf("publish_idempotent to another broker's shard: %#v", nl)
	}
	if n := e.metric("felix_broker_forwarded_publishes_total"); n != 0 {
		t.Fatalf("%v publishes forwarded", n)
	}
	m = pubIdem("orders", 2, 42, 0, "mine")
	m.Shard = &zero
	s.send(m)
	wantWritten(t, s.recv(), 2, 0)
}

func binIdem(stream string, reqID, producer, seq uint64, payloads ...string) []byte {
	p := wire.BinaryPublish{RequestID: reqID, ProducerID: producer, Sequence: seq, TenantID: testTenant, Namespace: "prod", Stream: stream}
	for _, pl := range payloads {
		p.Payloads = append(p.Payloads, []byte(pl))
	}
	return p.AppendFrame(nil, wire.PublishFlags(true, false)|wire.FlagBinaryPublishIdempotent)
}

// TestIdempotentBinaryPublish: FLAG_BINARY_PUBLISH_IDEMPOTENT is
// advertised and carries the producer and sequence as publish_idempotent
// does, with the same answers; a frame without a producer is refused.
func TestIdempotentBinaryPublish(t *testing.T) {
	e := startDurable(t, testConfig())
	s := e.authed(e.dial(0), 0, idemFeatures, pubAll)
	if ServerFlags&wire.FlagBinaryPublishIdempotent == 0 {
		t.Fatal("FLAG_BINARY_PUBLISH_IDEMPOTENT not advertised")
	}
	id := producerInit(t, s, "log")
	s.write(binIdem("log", 1, id, 0, "a", "b"))
	wantWritten(t, s.recv(), 1, 0)
	s.write(binIdem("log", 2, id, 1, "c"))
	wantWritten(t, s.recv(), 2, 2)
	s.write(binIdem("log", 3, id, 0, "a", "b"))
	wantWritten(t, s.recv(), 3, 0)
	s.write(binIdem("log", 4, id, 0, "a", "x"))
	wantProducerRefused(t, s.recv(), 4, wire.ReasonSequenceReused)
	// The JSON form continues the same sequence.
	s.send(pubIdem("log", 5, id, 2, "d"))
	wantWritten(t, s.recv(), 5, 3)
	if recs := readLog(t, s, "log"); len(recs) != 4 {
		t.Fatalf("log holds %d records, want 4", len(recs))
	}
	s.write(binIdem("log", 6, 0, 0, "z"))
	expectCode(t, s.recv(), wire.CodeInvalidRequest)
}
