package felix

import "github.com/felixmq/felix/wire"

// Writing batches.
//
// The sender encodes each batch it sends into its lane's buffer (out) and
// writes the buffer with one Write when it is about to wait (nothing else
// is ready at once: no batch to take, no answer to handle), before any
// call that may block (opening a lane, producer_init, stream_shards, a
// back-off, following a redirect), and as soon as the buffer holds
// idemWriteBytes. Batches ready together thus leave in one write, as
// plain publishes do (publish_worker.go), in the order they were sent:
// the window, the numbering and the re-sends are unchanged, since a batch
// joins its lane's unanswered when it is buffered.
//
// A batch still buffered when its lane fails was never written: it goes
// in doubt with the others (to be sent again in numbering order) but is
// not marked maybeLanded by that lane. A failed Write marks every batch it
// carried, since part of it may have reached the broker.

// idemWriteBytes is the buffer size from which a lane writes at once: a
// write carries at most this plus one batch.
const idemWriteBytes = 256 << 10

// write encodes j into l's buffer and adds it to l's unanswered; it is
// written by the next flush of l. A batch that cannot be encoded fails the
// lane (j is then in doubt). It goes as a binary frame
// (FLAG_BINARY_PUBLISH_IDEMPOTENT) when the broker advertised one and the
// batch needs no explicit shard, as publish_idempotent otherwise.
func (p *IdempotentProducer) write(l *idemLane, j *idemJob) {
	c := l.c
	// A broker that checks widths is told the one that numbered the batch
	// and routes the key itself (refusing it, stale_width, under another
	// width); an older one is told the shard when it takes explicit shards.
	declare := j.key != nil && c.serverFeatures&wire.FeaturePublishWidth != 0
	explicit := j.key != nil && !declare && c.serverFeatures&wire.FeatureExplicitShard != 0
	start := len(l.out)
	frame := l.out
	var err error
	if k := j.name; declare && l.widths[k] != j.width {
		frame, err = wire.AppendMessageFrame(frame, &wire.PublishWidth{TenantID: p.cfg.Tenant, Namespace: j.ns, Stream: j.stream, Width: j.width})
		if err == nil {
			if l.widths == nil {
				l.widths = map[string]uint32{}
			}
			l.widths[k] = j.width
		}
	}
	if c.serverFlags&wire.FlagBinaryPublishIdempotent != 0 && !explicit {
		b := wire.BinaryPublish{RequestID: c.newRequestID(), ProducerID: j.id, Sequence: j.seq, Key: j.key,
			TenantID: p.cfg.Tenant, Namespace: j.ns, Stream: j.stream, Payloads: j.payloads}
		j.reqID = b.RequestID
		if err == nil {
			frame = b.AppendFrame(frame, wire.PublishFlags(true, j.key != nil)|wire.FlagBinaryPublishIdempotent)
		}
	} else {
		seq := j.seq
		m := &wire.PublishIdempotent{TenantID: p.cfg.Tenant, Namespace: j.ns, Stream: j.stream, Payloads: j.payloads,
			ProducerID: j.id, Sequence: &seq, RequestID: c.newRequestID()}
		if explicit {
			shard := j.shard
			m.Shard = &shard // checked against the stream's width, never wrapped
		} else {
			m.Key = j.key
		}
		j.reqID = m.RequestID
		if err == nil {
			frame, err = wire.AppendMessageFrame(frame, m)
		}
	}
	l.inflight = append(l.inflight, j)
	if err != nil {
		l.out = l.out[:start]
		p.flush(l)
		p.laneFailed(l)
		return
	}
	l.out = frame
	l.buffered++
	if len(l.out) >= idemWriteBytes {
		p.flush(l)
	}
}

// flush writes l's buffered batches with one Write; a failed write fails
// the lane (its batches are then in doubt). It reports whether l failed.
func (p *IdempotentProducer) flush(l *idemLane) bool {
	if len(l.out) == 0 {
		return false
	}
	_, err := l.st.s.Write(l.out)
	l.out, l.buffered = l.out[:0], 0
	if cap(l.out) > 4*idemWriteBytes {
		l.out = nil
	}
	if err != nil {
		p.laneFailed(l)
		return true
	}
	return false
}

// flushAll flushes every lane; it reports whether one failed.
func (p *IdempotentProducer) flushAll() bool {
	failed := false
	for _, l := range p.lanes {
		if p.flush(l) {
			failed = true
		}
	}
	return failed
}
