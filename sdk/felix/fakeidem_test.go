package felix

import (
	"fmt"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// fakeIdem is the fake broker's producer table: per producer and shard,
// the next sequence and every batch it wrote. Guarded by fakeBroker.mu.
type fakeIdem struct {
	nextID  uint64
	inits   int
	sends   int                               // publish_idempotent requests received
	binary  int                               // of them, binary frames
	seqs    map[fakeIdemKey]*fakeIdemProducer // by producer and shard
	sendLog []fakeIdemSend                    // every publish_idempotent, in arrival order
	// widths is the publish_width declared on each stream, by "ns/stream"
	// (with FEATURE_PUBLISH_WIDTH); stale counts the batches refused
	// stale_width.
	widths map[transport.Stream]map[string]uint32
	stale  int
}

type fakeIdemKey struct {
	id    uint64
	shard uint32
}

type fakeIdemProducer struct {
	next    uint64
	batches map[uint64]fakeIdemBatch
}

type fakeIdemBatch struct {
	base   uint64
	digest uint64
}

type fakeIdemSend struct {
	id, seq uint64
	shard   uint32
	node    int // the index of the cluster node that took it (0 outside a cluster)
}

// idemHome is the fake whose producer table and records a publish uses:
// fb itself, or, in a fake cluster, its first node, standing for one
// replicated log whichever node owns the shard now.
func (fb *fakeBroker) idemHome() *fakeBroker {
	if cl := fb.opts.cluster; cl != nil {
		return cl.node(0)
	}
	return fb
}

// idemOp answers producer_init and publish_idempotent as a shard owner
// would (without the 64-sequence bound).
func (fb *fakeBroker) idemOp(s transport.Stream, msg wire.Message) bool {
	switch m := msg.(type) {
	case *wire.ProducerInit:
		if g := fb.opts.initGate; g != nil {
			select {
			case <-g:
			case <-fb.ctx.Done():
				return false
			}
		}
		fb := fb.idemHome()
		fb.mu.Lock()
		fb.idem.nextID++
		fb.idem.inits++
		id := 1000 + fb.idem.nextID
		fb.notifyLocked()
		fb.mu.Unlock()
		return writeMsg(s, &wire.ProducerInitOK{ProducerID: id, RequestID: m.RequestID}) == nil
	case *wire.PublishWidth:
		fb.mu.Lock()
		if fb.idem.widths == nil {
			fb.idem.widths = map[transport.Stream]map[string]uint32{}
		}
		if fb.idem.widths[s] == nil {
			fb.idem.widths[s] = map[string]uint32{}
		}
		fb.idem.widths[s][m.Namespace+"/"+m.Stream] = m.Width
		fb.mu.Unlock()
		return true
	case *wire.PublishIdempotent:
		if err := m.Validate(); err != nil {
			return writeMsg(s, wire.NewError(wire.CodeInvalidRequest, "%v", err).PublishErrorMessage(m.RequestID, true)) == nil
		}
		if e := fb.staleWidth(s, m); e != nil {
			return writeMsg(s, e.PublishErrorMessage(m.RequestID, true)) == nil
		}
		if m.Stream == "hold" && fb.opts.hold != nil {
			select {
			case <-fb.opts.hold:
			case <-fb.ctx.Done():
				return false
			}
		}
		var shard uint32
		if m.Shard != nil {
			shard = *m.Shard
		}
		node := 0
		if cl := fb.opts.cluster; cl != nil {
			node = cl.indexOf(fb)
			if n := cl.shardCount(KindStream, m.Namespace, m.Stream); m.Shard == nil && len(m.Key) > 0 && n > 0 {
				shard = wire.ShardForKey(m.Key, n)
			}
		}
		seq := *m.Sequence
		digest := wire.BatchDigest(m.Payloads)
		k := fakeIdemKey{m.ProducerID, shard}
		fb := fb.idemHome()
		fb.mu.Lock()
		fb.idem.sends++
		fb.idem.sendLog = append(fb.idem.sendLog, fakeIdemSend{m.ProducerID, seq, shard, node})
		if fb.idem.seqs == nil {
			fb.idem.seqs = map[fakeIdemKey]*fakeIdemProducer{}
		}
		p := fb.idem.seqs[k]
		var refusal *wire.ProducerRefusal
		var base uint64
		wrote := false
		switch {
		case p == nil && seq != 0:
			refusal = &wire.ProducerRefusal{Reason: wire.ReasonUnknownProducer}
		case p != nil && seq > p.next:
			exp := p.next
			refusal = &wire.ProducerRefusal{Reason: wire.ReasonSequenceGap, Expected: &exp}
		case p != nil && seq < p.next:
			if b := p.batches[seq]; b.digest == digest {
				base = b.base
			} else {
				refusal = &wire.ProducerRefusal{Reason: wire.ReasonSequenceReused}
			}
		default:
			if p == nil {
				p = &fakeIdemProducer{batches: map[uint64]fakeIdemBatch{}}
				fb.idem.seqs[k] = p
			}
			base = uint64(len(fb.published[m.Namespace+"/"+m.Stream]))
			for _, pl := range m.Payloads {
				fb.published[m.Namespace+"/"+m.Stream] = append(fb.published[m.Namespace+"/"+m.Stream], pubRecord{payload: pl, key: m.Key})
			}
			p.batches[seq] = fakeIdemBatch{base: base, digest: digest}
			p.next = seq + 1
			wrote = true
		}
		fb.notifyLocked()
		fb.mu.Unlock()
		if refusal != nil {
			return writeMsg(s, &wire.PublishRefused{RequestID: m.RequestID, Producer: refusal}) == nil
		}
		if wrote && fb.opts.loseAnswer != nil && fb.opts.loseAnswer(m) {
			fb.closeConns("answer lost")
			return false
		}
		return writeMsg(s, &wire.PublishOK{RequestID: m.RequestID, Offset: &base}) == nil
	}
	panic(fmt.Sprintf("idemOp: %T", msg))
}

// staleWidth refuses, as a broker with FEATURE_PUBLISH_WIDTH does, a
// keyed batch routed by a width declared on s that its stream (in the
// fake cluster) no longer has.
func (fb *fakeBroker) staleWidth(s transport.Stream, m *wire.PublishIdempotent) *wire.Error {
	cl := fb.opts.cluster
	if cl == nil || m.Shard != nil || len(m.Key) == 0 || fb.opts.features&wire.FeaturePublishWidth == 0 {
		return nil
	}
	n := cl.shardCount(KindStream, m.Namespace, m.Stream)
	fb.mu.Lock()
	defer fb.mu.Unlock()
	w, ok := fb.idem.widths[s][m.Namespace+"/"+m.Stream]
	if !ok || w == n {
		return nil
	}
	fb.idem.stale++
	fb.notifyLocked()
	return wire.NewStaleWidth(m.Stream, w, n)
}
