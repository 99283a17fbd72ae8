package broker

import "github.com/felixmq/felix/wire"

// Pipelined publishes. A client that offers FEATURE_PUBLISH_PIPELINE is
// granted a publish_window on each control stream (Config.PublishWindow).
// Each acked publish it sends takes one of the stream's window slots as
// the read loop reads it (takeTicket), before anything else is decided,
// and whichever path answers it (a refusal at once, an acknowledgement on
// enqueue, a commit acknowledgement from the core or from a forward's
// owner) writes its answer into that slot. The stream's writer writes the
// slots in the order they were taken, so the client reads its answers in
// the order it sent the publishes, and holds a slot until its answer is
// written: while the window is full the read loop waits in takeTicket, and
// the client is slowed by flow control instead of filling its tenant's
// share of the publish queue. Each stream has its own window and writer,
// so a stream held up behind a stalled shard never holds up the others on
// the connection. Other streams answer acked publishes as they complete,
// as before.

// grantWindow is the auth_ok's publish_window: set, and the stream's
// answers put in order, when the client offered FEATURE_PUBLISH_PIPELINE
// on a control stream and the broker pipelines.
func (cs *controlStream) grantWindow() *uint32 {
	w := cs.srv.cfg.PublishWindow
	if cs.out == nil || w <= 0 || cs.features&wire.FeaturePublishPipeline == 0 {
		return nil
	}
	cs.out.pipeline(w)
	cs.pipelined = true
	window := uint32(w)
	return &window
}

// takeTicket takes r's answer slot on a pipelining stream, waiting while
// the window is full. False when the stream ended meanwhile: nothing more
// is answered.
func (cs *controlStream) takeTicket(r *pubRequest) bool {
	if !cs.pipelined || !r.acked {
		return true
	}
	t, err := cs.out.reserveOwed(cs.ctx)
	if err != nil {
		return false
	}
	r.ticket, r.ticketHeld = t, true
	return true
}

// answerPublish sends b, the answer to r: in r's slot on a pipelining
// stream, else at once.
func (cs *controlStream) answerPublish(r *pubRequest, b []byte) {
	if r.ticketHeld {
		r.ticketHeld = false
		cs.out.sendOwed(r.ticket, b)
		return
	}
	cs.out.send(cs.ctx, b)
}
