package broker

import (
	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/wire"
)

// maxPublishWidths bounds the streams one QUIC stream may declare a
// publish width for; a publish_width past it is refused.
const maxPublishWidths = 4096

// handlePublishWidth remembers, for this QUIC stream, the width the
// client routes its keyed batches to one stream by. It is not answered;
// past maxPublishWidths streams it is refused with an error (nothing on
// an ingress stream, which has no answers).
func (cs *controlStream) handlePublishWidth(m *wire.PublishWidth) {
	if err := m.Validate(); err != nil {
		cs.sendError(asWireError(err), nil)
		return
	}
	k := core.StreamKey{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}
	if cs.widths == nil {
		cs.widths = map[core.StreamKey]uint32{}
	}
	if _, ok := cs.widths[k]; !ok && len(cs.widths) >= maxPublishWidths {
		cs.sendError(wire.NewError(wire.CodeInvalidRequest, "publish_width declared for more than %d streams on one stream", maxPublishWidths).
			WithDetail(wire.DetailReason, "too_many_widths"), nil)
		return
	}
	cs.widths[k] = m.Width
}

// staleWidth refuses a keyed batch to st routed by a declared width the
// stream does not have (stale_width); nil for unkeyed and explicit-shard
// batches, and when no width was declared.
func (cs *controlStream) staleWidth(r *pubRequest, st *core.Stream) *wire.Error {
	if len(r.key) == 0 || r.shard != nil || cs.widths == nil {
		return nil
	}
	w, ok := cs.widths[st.Key()]
	if !ok || w == st.Shards() {
		return nil
	}
	return wire.NewStaleWidth(r.stream, w, st.Shards())
}
