package broker

import (
	"errors"
	"math"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	flog "github.com/felixmq/felix/log"
	"github.com/felixmq/felix/wire"
)

// handleStreamRead answers one page of a durable shard's committed
// records. No subscriber is registered.
func (cs *controlStream) handleStreamRead(m *wire.StreamRead) {
	rid := m.RequestID
	sh, e := cs.readableShard(m, m.TenantID, m.Namespace, m.Stream, m.Shard)
	if e != nil {
		cs.sendRefusal(e, &rid)
		return
	}
	end := uint64(math.MaxUint64)
	if m.End != nil {
		end = *m.End
	}
	limit := cs.srv.cfg.MaxRecordsPerRead
	if m.MaxRecords > 0 {
		limit = min(limit, int(m.MaxRecords))
	}
	recs, next, err := sh.Read(m.From, end, limit, readPageBytes)
	if err != nil {
		cs.answerReadError(err, rid)
		return
	}
	out := &wire.StreamRecords{Records: make([]wire.StreamRecord, 0, len(recs)), NextOffset: next, RequestID: rid}
	for _, r := range recs {
		if r.Kind != flog.KindData {
			continue // a generation start takes an offset but is no event
		}
		sr := wire.StreamRecord{Offset: r.Offset, Payload: r.Payload, TimestampMicros: r.TimeMicros, Publisher: r.Publisher}
		if sr.Payload == nil {
			sr.Payload = []byte{}
		}
		out.Records = append(out.Records, sr)
	}
	cs.sendMsg(out)
}

// handleOffsetForTime answers the first committed offset of a shard
// appended at or after a time.
func (cs *controlStream) handleOffsetForTime(m *wire.OffsetForTime) {
	rid := m.RequestID
	sh, e := cs.readableShard(m, m.TenantID, m.Namespace, m.Stream, m.Shard)
	if e != nil {
		cs.sendRefusal(e, &rid)
		return
	}
	off, ok, err := sh.OffsetForTime(m.AtMicros)
	if err != nil {
		cs.sendError(asWireError(err), &rid)
		return
	}
	ans := &wire.OffsetValue{RequestID: rid}
	if ok {
		ans.Offset = &off
	}
	cs.sendMsg(ans)
}

// readableShard validates and authorizes a read of one shard and resolves
// it.
func (cs *controlStream) readableShard(v wire.Validator, tenant, ns, stream string, shard uint32) (*core.Shard, *wire.Error) {
	if err := v.Validate(); err != nil {
		return nil, asWireError(err)
	}
	if e := cs.authorize(tenant, auth.ActionStreamSubscribe, auth.StreamResource(tenant, ns, stream)); e != nil {
		return nil, e
	}
	st, e := cs.srv.resolveStream(tenant, ns, stream)
	if e != nil {
		return nil, e
	}
	if err := wire.CheckShard("stream", stream, shard, st.Shards()); err != nil {
		return nil, asWireError(err)
	}
	if e := cs.srv.routeRefusal(wire.ShardKindStream, tenant, ns, stream, shard); e != nil {
		return nil, e
	}
	sh, err := cs.srv.servedShard(st, shard)
	if err != nil {
		return nil, asWireError(err)
	}
	return sh, nil
}

// answerReadError sends a refused read's answer: a cursor error carrying
// the request id, or an error.
func (cs *controlStream) answerReadError(err error, rid uint64) {
	var ce *wire.SubscribeCursorError
	if errors.As(err, &ce) {
		c := *ce
		c.RequestID = &rid
		cs.sendMsg(&c)
		return
	}
	cs.sendError(asWireError(err), &rid)
}
