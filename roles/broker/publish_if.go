package broker

import "github.com/felixmq/felix/wire"

// The conditional publish, publish_if (FEATURE_PUBLISH_CONDITIONAL,
// advertised with durable storage).
//
// It takes the path of an acked publish (authorization as stream.publish,
// the same budgets, the shard's lane) with three differences: it is never
// forwarded (a broker that does not own the shard answers not_leader), it
// needs a durable shard, and its claim is core.Shard.ClaimIf, which the
// lane runs in publish order, so the check of the shard's next offset and
// the taking of offsets are one step against every other publish to the
// shard. Written, it is answered with publish_ok carrying its offset once
// durable; refused, with publish_refused naming the tail.

// handlePublishIf serves one publish_if.
func (cs *controlStream) handlePublishIf(m *wire.PublishIf) {
	cs.publishValidated(&pubRequest{tenant: m.TenantID, ns: m.Namespace, stream: m.Stream, key: m.Key, shard: m.Shard,
		payloads: m.Payloads, acked: true, requestID: m.RequestID, expected: m.ExpectedOffset}, m)
}

// publishValidated publishes r, an acked JSON publish decoded from v,
// once v validates, refusing it otherwise; on a pipelining stream it
// takes r's answer slot first, so either answer keeps its place.
func (cs *controlStream) publishValidated(r *pubRequest, v wire.Validator) {
	if !cs.takeTicket(r) {
		return // the stream is ending
	}
	if err := v.Validate(); err != nil {
		cs.answerPublish(r, cs.publishErrorFrame(r.requestID, asWireError(err)))
		return
	}
	cs.publish(r)
}

// refuseRedirect refuses a publish that is never forwarded: as a
// not_leader message naming the owner when the client offered
// FEATURE_REDIRECT and the refusal is a redirect, as publish_error
// otherwise.
func (cs *controlStream) refuseRedirect(r *pubRequest, e *wire.Error) {
	if cs.features&wire.FeatureRedirect != 0 {
		if nl, ok := wire.NotLeaderFromError(e); ok && nl.Addr != "" {
			id := r.requestID
			nl.RequestID = &id
			if b, err := wire.AppendMessageFrame(nil, nl); err == nil {
				cs.answerPublish(r, b)
				return
			}
		}
	}
	cs.refuse(r, e)
}

// errConditionalNotDurable refuses a publish_if to an in-memory stream,
// which keeps no offsets to compare.
func errConditionalNotDurable(stream string) *wire.Error {
	return wire.NewError(wire.CodeInvalidRequest, "stream %s is not durable: a conditional publish (publish_if) needs a durable stream, whose log assigns the offsets it compares", stream).
		WithDetail(wire.DetailReason, "not_durable")
}
