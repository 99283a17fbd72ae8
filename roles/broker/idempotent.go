package broker

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// Idempotent producers (FEATURE_IDEMPOTENT_PRODUCER, advertised always).
//
// producer_init hands out a producer id: 64 random bits (never 0), so ids
// are unique across brokers and restarts without any coordination, and
// the broker keeps nothing for them. A shard's owner learns a producer
// when its sequence 0 lands there (core/producer.go).
//
// publish_idempotent takes the path of an acked publish (authorization as
// stream.publish, the same budgets, the shard's lane) with the
// differences of publish_if: it is never forwarded (a broker that does not
// own the shard answers not_leader, with the owner when it knows it: the
// spec has the leader answer a re-send, and a forward would hide which
// leader holds the sequences), and it is always answered after the write,
// with its offset. Its claim is core.Shard.ClaimIdempotent (durable) or
// PublishIdempotent (in memory), which the lane runs in publish order, so
// the sequence check and the append are one step on the shard. A refusal
// is publish_refused with a producer reason.

// handleProducerInit answers producer_init with a fresh producer id.
func (cs *controlStream) handleProducerInit(m *wire.ProducerInit) {
	rid := m.RequestID
	if err := m.Validate(); err != nil {
		cs.sendError(asWireError(err), &rid)
		return
	}
	if e := cs.authorize(m.TenantID, auth.ActionStreamPublish, auth.StreamResource(m.TenantID, m.Namespace, m.Stream)); e != nil {
		cs.sendError(e, &rid)
		return
	}
	if _, e := cs.srv.resolveStream(m.TenantID, m.Namespace, m.Stream); e != nil {
		cs.sendError(e, &rid)
		return
	}
	cs.sendMsg(&wire.ProducerInitOK{ProducerID: newProducerID(), RequestID: rid})
}

// newProducerID returns 64 random bits other than 0.
func newProducerID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// handlePublishIdempotent serves one publish_idempotent.
func (cs *controlStream) handlePublishIdempotent(m *wire.PublishIdempotent) {
	r := &pubRequest{tenant: m.TenantID, ns: m.Namespace, stream: m.Stream, key: m.Key, shard: m.Shard,
		payloads: m.Payloads, acked: true, requestID: m.RequestID}
	if m.Sequence != nil {
		r.idem = &idemSeq{producer: m.ProducerID, seq: *m.Sequence}
	} else {
		r.idem = &idemSeq{producer: m.ProducerID}
	}
	cs.publishValidated(r, m)
}
