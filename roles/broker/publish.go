package broker

import (
	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/roles/broker/sched"
	"github.com/felixmq/felix/wire"
)

// pubRequest is one decoded publish.
type pubRequest struct {
	tenant, ns, stream string
	key                []byte
	shard              *uint32  // an explicit shard (JSON publishes only), else the key picks
	payloads           [][]byte // owned by the request; the core retains them
	acked              bool
	requestID          uint64
	// ticket is the answer's slot on a pipelining stream (held while
	// ticketHeld): taken as the publish is read, so the answer is written
	// in request order whichever path gives it (pipeline.go).
	ticket     owedTicket
	ticketHeld bool
	// expected is a publish_if's expected offset (publish_if.go): the
	// batch is written only at the shard's next offset, never forwarded,
	// and always answered once durable. Nil for every other publish.
	expected *uint64
	// idem is a publish_idempotent's producer and sequence
	// (idempotent.go): checked against the shard's producer table at
	// claim time, never forwarded, always answered once written. Nil for
	// every other publish.
	idem *idemSeq
	// commit is an atomic commit's state ops (commit.go): payloads is its
	// one event; never forwarded, always answered once written. Nil for
	// every other publish.
	commit *commitOps
}

// idemSeq is an idempotent publish's producer id and sequence; dup is
// set, before the publish settles, when the batch was a re-send answered
// from the shard's producer table (not counted as published again).
type idemSeq struct {
	producer, seq uint64
	dup           bool
}

// ownerOnly reports whether the publish is served by the shard's owner
// alone (a conditional or idempotent publish).
func (r *pubRequest) ownerOnly() bool { return r.expected != nil || r.idem != nil || r.commit != nil }

func (r *pubRequest) bytes() int64 {
	return int64(core.BatchBytes(r.payloads))
}

// handleJSONPublish serves publish and publish_batch. On an ingress stream
// the ack mode is ignored.
func (cs *controlStream) handleJSONPublish(tenant, ns, stream string, key []byte, shard *uint32, payloads [][]byte,
	requestID uint64, ack wire.AckMode, v wire.Validator) {
	acked := cs.out != nil && ack != "" && ack != wire.AckNone
	r := &pubRequest{tenant: tenant, ns: ns, stream: stream, key: key, shard: shard, payloads: payloads, acked: acked, requestID: requestID}
	if !cs.takeTicket(r) {
		return // the stream is ending
	}
	if err := v.Validate(); err != nil {
		e := asWireError(err)
		if acked || (cs.out != nil && requestID != 0) {
			cs.answerPublish(r, cs.publishErrorFrame(requestID, e))
		} else {
			cs.sendError(e, nil)
		}
		return
	}
	cs.publish(r)
}

// handleBinary serves a binary publish; any other binary frame, or one
// that does not decode, refuses the stream.
func (cs *controlStream) handleBinary(f wire.Frame) bool {
	if f.Flags&wire.FlagBinaryPublishBatch == 0 || f.Flags&^binaryPublishFlags != 0 {
		cs.sendError(wire.NewError(wire.CodeInvalidRequest, "unsupported frame flags %#04x", f.Flags), nil)
		return false
	}
	p, err := wire.ParseBinaryPublish(f.Flags, f.Payload)
	if err != nil {
		cs.sendError(asWireError(err), nil)
		return false
	}
	if p.TenantID == "" || p.Namespace == "" || p.Stream == "" {
		cs.sendError(wire.NewError(wire.CodeInvalidRequest, "binary publish: empty tenant, namespace or stream"), nil)
		return false
	}
	acked := cs.out != nil && f.Flags&wire.FlagBinaryPublishAcked != 0
	r := &pubRequest{tenant: p.TenantID, ns: p.Namespace, stream: p.Stream, key: p.Key,
		payloads: p.Payloads, acked: acked, requestID: p.RequestID}
	if f.Flags&wire.FlagBinaryPublishIdempotent != 0 {
		// An idempotent batch is answered, so it needs a control stream
		// (ParseBinaryPublish has checked it is acked) and a producer.
		if !acked || p.ProducerID == 0 {
			cs.sendError(wire.NewError(wire.CodeInvalidRequest, "binary idempotent publish: needs a control stream and a producer id other than 0 (take one with producer_init)"), nil)
			return false
		}
		r.idem = &idemSeq{producer: p.ProducerID, seq: p.Sequence}
	}
	if cs.takeTicket(r) {
		cs.publish(r)
	}
	return true
}

// refuse answers a publish the broker will not take: publish_error when
// acked, error otherwise.
func (cs *controlStream) refuse(r *pubRequest, e *wire.Error) {
	if r.acked {
		cs.answerPublish(r, cs.publishErrorFrame(r.requestID, e))
		return
	}
	cs.sendError(e, nil)
}

// publish authorizes, resolves and admits one publish, then hands it to
// the scheduler.
func (cs *controlStream) publish(r *pubRequest) {
	if e := cs.authorize(r.tenant, auth.ActionStreamPublish, auth.StreamResource(r.tenant, r.ns, r.stream)); e != nil {
		cs.refuse(r, e)
		return
	}
	st, e := cs.srv.resolveStream(r.tenant, r.ns, r.stream)
	if e == nil {
		e = cs.staleWidth(r, st)
	}
	if e != nil {
		cs.refuse(r, e)
		return
	}
	idx := st.ShardForKey(r.key)
	if r.shard != nil { // FEATURE_EXPLICIT_SHARD: refused when out of range, never wrapped
		if err := wire.CheckShard("stream", r.stream, *r.shard, st.Shards()); err != nil {
			cs.refuse(r, asWireError(err))
			return
		}
		idx = *r.shard
	}
	if rt := cs.srv.route(cs.ctx, wire.ShardKindStream, r.tenant, r.ns, r.stream, idx); !rt.Local {
		if r.ownerOnly() { // a conditional or idempotent publish is served by the owner alone
			cs.refuseRedirect(r, rt.Err(wire.ShardKindStream, r.stream, idx))
			return
		}
		if cs.srv.redirectHandedOff(st.Key(), idx, r.acked) {
			// A shard this broker handed off as it stops, with nothing of
			// it in flight here: publish_error not_leader, naming the new
			// owner (handoff.go).
			cs.refuse(r, rt.Err(wire.ShardKindStream, r.stream, idx))
			return
		}
		cs.forwardPublish(r, st, idx, rt) // forward.go
		return
	}
	sh, err := cs.srv.servedShard(st, idx)
	if err != nil {
		cs.refuse(r, asWireError(err))
		return
	}
	lk := sched.LaneKey{Stream: st.Key(), Shard: idx}
	durable := sh.Durable()
	if r.commit != nil && !durable {
		cs.refuse(r, errCommitNotDurable(r.stream))
		return
	}
	if r.expected != nil && !durable {
		cs.refuse(r, errConditionalNotDurable(r.stream))
		return
	}
	commit := cs.ackOnCommit || (durable && !cs.srv.cfg.AckOnEnqueue) || r.ownerOnly()
	p := &admitted{cs: cs, req: r, shard: sh, lane: lk, policy: st.Policy(), durable: durable, commitAck: r.acked && commit}
	if !p.admit() {
		cs.queueFull(r)
		return
	}
	if r.acked && !p.commitAck {
		cs.answerPublish(r, wire.AppendPublishOKFrame(nil, r.requestID, nil))
	}
}

// queueFull refuses an acked publish with overloaded, or drops and counts
// a fire-and-forget one.
func (cs *controlStream) queueFull(r *pubRequest) {
	cs.srv.metrics.queueFullByTenant.get(r.tenant).Inc()
	if r.acked {
		cs.answerPublish(r, cs.publishErrorFrame(r.requestID, queueFullError()))
		return
	}
	cs.srv.metrics.ingressDropped.Inc()
}

// admitted is a publish on its way through admission, the scheduler and
// the core. Whatever it holds is released by finish.
type admitted struct {
	cs        *controlStream
	req       *pubRequest
	shard     *core.Shard
	lane      sched.LaneKey
	policy    core.QueuePolicy
	durable   bool // the shard writes a log: claim here, finish on a goroutine
	commitAck bool // answer after the core publish rather than on enqueue
	// fwd is the owner to forward to (forward.go); nil: publish here.
	fwd *Route

	n          int64 // bytes charged to both budgets
	connHeld   bool
	globalHeld bool
	owedHeld   bool
	ticket     owedTicket // the answer's slot, while owedHeld
	l          *lane
}

// admit takes the owed-answer slot, the connection and process byte
// budgets and a place in the lane, then enqueues the job. Fire-and-forget
// publishes wait for room when PubIngressWait is set; everything else is
// refused at once. It reports whether the job was queued; when not,
// everything taken has been given back.
func (p *admitted) admit() bool {
	cs, srv := p.cs, p.cs.srv
	wait := !p.req.acked && srv.cfg.PubIngressWait
	ctx := cs.ctx
	if p.commitAck {
		if p.req.ticketHeld { // a pipelining stream's: taken as it was read
			p.ticket, p.req.ticketHeld = p.req.ticket, false
		} else {
			t, err := cs.out.reserveOwed(ctx)
			if err != nil {
				return false
			}
			p.ticket = t
		}
		p.owedHeld = true
	}
	p.n = max(1, min(p.req.bytes(), srv.cfg.PublishConnInflightBytes, srv.cfg.PublishTotalInflightBytes))
	if wait {
		p.connHeld = cs.c.budget.Acquire(ctx, p.n) == nil
		p.globalHeld = p.connHeld && srv.pubBytes.Acquire(ctx, p.n) == nil
	} else {
		p.connHeld = cs.c.budget.TryAcquire(p.n)
		p.globalHeld = p.connHeld && srv.pubBytes.TryAcquire(p.n)
	}
	if p.globalHeld {
		p.l, _ = srv.lanes.admit(ctx, p.lane, wait)
	}
	if p.l == nil {
		p.release()
		return false
	}
	srv.publishes.add(1)
	job := sched.Job{Tenant: p.req.tenant, Lane: p.lane, Bytes: int(p.n), Run: p.run}
	if p.fwd != nil && srv.sched.RunNow(job) {
		// An idle forwarded lane hands the publish to its sender right
		// here: the forward's round trip is the latency that counts.
		return true
	}
	var err error
	if wait {
		err = srv.sched.Enqueue(ctx, job)
	} else {
		err = srv.sched.TryEnqueue(job)
	}
	if err != nil {
		p.release()
		srv.publishes.done()
		return false
	}
	return true
}

// release gives back what admit took, except the answer slot once the
// answer has been queued.
func (p *admitted) release() {
	srv := p.cs.srv
	if p.l != nil {
		srv.lanes.release(p.l)
		p.l = nil
	}
	if p.globalHeld {
		srv.pubBytes.Release(p.n)
		p.globalHeld = false
	}
	if p.connHeld {
		p.cs.c.budget.Release(p.n)
		p.connHeld = false
	}
	if p.owedHeld {
		if p.cs.pipelined {
			// Not answered: the slot goes back to the request, whose
			// refusal is written in its place.
			p.req.ticket, p.req.ticketHeld = p.ticket, true
		} else {
			p.cs.out.cancelOwed(p.ticket)
		}
		p.owedHeld = false
	}
}

// run is the scheduler's ordered step: it links the publish behind the
// lane's previous one. When nothing is ahead and the stream's policy
// cannot block, it publishes right here; otherwise the core publish runs
// on its own goroutine so a blocked fanout holds only its shard.
func (p *admitted) run() {
	if p.fwd != nil {
		if p.cs.srv.handsOff() && p.cs.srv.handoffs.parkIfHeld(p.ref(), p.resume) {
			return // handoff_gate.go
		}
		p.runForward()
		return
	}
	if p.durable {
		p.runDurable()
		return
	}
	prev, done := p.cs.srv.lanes.link(p.l)
	if isClosed(prev) && p.policy != core.Block {
		p.publish(nil, done)
		return
	}
	go p.publish(prev, done)
}

func (p *admitted) publish(prev <-chan struct{}, done chan struct{}) {
	srv := p.cs.srv
	defer srv.publishes.done()
	if prev != nil {
		select {
		case <-prev:
		case <-srv.workCtx.Done():
		}
	}
	if id := p.req.idem; id != nil {
		off, dup, err := p.shard.PublishIdempotentReport(srv.workCtx, p.req.payloads, p.cs.id.Subject, id.producer, id.seq)
		id.dup = dup
		close(done)
		p.settle(err, &off)
		return
	}
	_, err := p.shard.Publish(srv.workCtx, p.req.payloads, p.cs.id.Subject)
	close(done)
	p.settle(err, nil)
}

// runDurable claims the publish's offsets in the log right here, in lane
// order, then waits for the write under the fsync policy and delivers on
// a goroutine of its own, so that the publishes behind it can claim and
// share the next fsync (group commit). Once claimed, the batch is
// finished even if its publisher has gone.
func (p *admitted) runDurable() {
	srv := p.cs.srv
	if !srv.handsOff() {
		srv.runDurableClaim(p.shard, p.req.payloads, p.cs.id.Subject, p.policy, p.req.expected, p.req.idem, p.req.commit, p.settle)
		return
	}
	ref := p.ref()
	if !srv.handoffs.enter(ref, p.resume) {
		return // parked while the shard is handed off (handoff_gate.go)
	}
	srv.runDurableClaim(p.shard, p.req.payloads, p.cs.id.Subject, p.policy, p.req.expected, p.req.idem, p.req.commit, p.settleAt(ref))
}

// ref is the stream shard the publish goes to.
func (p *admitted) ref() shardRef {
	return shardRef{kind: wire.ShardKindStream, tenant: p.req.tenant, ns: p.req.ns, name: p.req.stream, shard: p.lane.Shard}
}

// settleAt is settle for a publish that passed ref's handoff gate: it
// leaves the gate once answered.
func (p *admitted) settleAt(ref shardRef) func(error, *uint64) {
	return func(err error, offset *uint64) {
		p.settle(err, offset)
		p.cs.srv.handoffs.leave(ref)
	}
}

// resume routes a publish parked during a handoff again, once the
// handoff ended: claimed here when the shard stayed, forwarded to its
// new owner when it moved (in the order it was parked), refused with the
// route's answer otherwise (a conditional or idempotent publish, served
// by the owner alone, is redirected).
func (p *admitted) resume(refuse *wire.Error) {
	srv, r := p.cs.srv, p.req
	if refuse != nil {
		srv.publishes.done()
		p.settle(refuse, nil)
		return
	}
	rt := srv.route(srv.workCtx, wire.ShardKindStream, r.tenant, r.ns, r.stream, p.lane.Shard)
	switch {
	case rt.Local && p.shard != nil:
		p.fwd = nil
		ref := p.ref()
		srv.handoffs.enterNow(ref)
		srv.runDurableClaim(p.shard, r.payloads, p.cs.id.Subject, p.policy, r.expected, r.idem, r.commit, p.settleAt(ref))
	case !rt.Local && rt.NodeID != "" && !r.ownerOnly() && srv.canForward(rt):
		p.fwd = &rt
		p.lane.Forwarded = true
		p.queueForward()
	default:
		e := rt.Err(wire.ShardKindStream, r.stream, p.lane.Shard)
		if e == nil { // local again, but it was parked on its way to another owner
			e = wire.NewError(wire.CodeShardUnavailable, "shard %d of %s changed owner twice while the publish waited", p.lane.Shard, r.stream).
				WithDetail(wire.DetailReason, core.ReasonNotReady)
		}
		srv.publishes.done()
		p.settle(e, nil)
	}
}

// runDurablePublish claims offsets for payloads on a durable shard and
// finishes the claim, calling settle once with the outcome: a client's
// publish (admitted) and a forwarded one at its owner (ownerPublish)
// alike. With expected set the claim is conditional (core.Shard.ClaimIf):
// it runs here, in lane order, so the check sees every publish admitted
// before it on the shard.
func (s *Server) runDurablePublish(sh *core.Shard, payloads [][]byte, subject string, policy core.QueuePolicy, expected *uint64, idem *idemSeq, settle func(error, *uint64)) {
	s.runDurableClaim(sh, payloads, subject, policy, expected, idem, nil, settle)
}

// runDurableClaim is runDurablePublish for any claim: with commit set, an
// atomic commit of payloads' one event and commit's state ops
// (core.Shard.ClaimCommit, conditional when expected is set).
func (s *Server) runDurableClaim(sh *core.Shard, payloads [][]byte, subject string, policy core.QueuePolicy, expected *uint64, idem *idemSeq, commit *commitOps, settle func(error, *uint64)) {
	var c *core.Claimed
	var err error
	if commit != nil {
		c, err = sh.ClaimCommit(payloads[0], commit.ops, subject, expected)
	} else if idem != nil {
		c, err = sh.ClaimIdempotent(payloads, subject, idem.producer, idem.seq)
		if err == nil {
			idem.dup = c.Duplicate()
		}
	} else if expected != nil {
		c, err = sh.ClaimIf(payloads, subject, *expected)
	} else {
		c, err = sh.Claim(payloads, subject)
	}
	if err != nil {
		s.publishes.done()
		settle(err, nil)
		return
	}
	finish := func() {
		defer s.publishes.done()
		base := c.BaseOffset()
		if !s.awaitQuorum(sh, c, settle) {
			// Answered quorum_timeout; the batch still finishes (it is
			// delivered if a majority comes to hold it).
			_ = c.Finish(s.workCtx)
			return
		}
		settle(c.Finish(s.workCtx), &base)
	}
	// Written under a policy that does not wait for an fsync, and with no
	// subscriber able to block: nothing to wait for, so finish right here.
	if c.Durable() && policy != core.Block {
		finish()
		return
	}
	go finish()
}

// settle counts a finished publish, answers it and releases what it held.
func (p *admitted) settle(err error, offset *uint64) {
	if err == nil && (p.req.idem == nil || !p.req.idem.dup) {
		p.cs.srv.metrics.publishMessages.Add(len(p.req.payloads))
		p.cs.srv.metrics.publishBytes.Add(int(p.req.bytes()))
	}
	p.answer(err, offset)
	p.release()
}

// answer sends a commit acknowledgement, or counts an enqueue-acked
// publish that then failed.
func (p *admitted) answer(err error, offset *uint64) {
	if !p.commitAck {
		if err != nil && p.req.acked {
			p.cs.srv.metrics.ackedDropped.Inc()
		}
		return
	}
	var b []byte
	if err != nil {
		b = p.cs.publishErrorFrame(p.req.requestID, asWireError(err))
		if p.req.ownerOnly() {
			if pr, ok := wire.PublishRefusedFromError(p.req.requestID, asWireError(err)); ok {
				b, _ = wire.AppendMessageFrame(nil, pr)
			}
		}
	} else {
		// A conditional or idempotent publish's answer always names its offset.
		if p.cs.clientFlags&wire.FlagBinaryPublishAckOffset == 0 && !p.req.ownerOnly() {
			offset = nil
		}
		b = wire.AppendPublishOKFrame(nil, p.req.requestID, offset)
	}
	p.owedHeld = false
	p.cs.out.sendOwed(p.ticket, b)
}
