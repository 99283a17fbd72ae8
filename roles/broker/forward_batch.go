package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/roles/broker/peer"
	"github.com/felixmq/felix/roles/broker/sched"
	"github.com/felixmq/felix/wire"
)

// Batched forwards. The entry broker keeps, per ordered channel to a
// shard's owner (a stream shard's forwarded lane; a client stream's cache
// shard), a queue of the forwards waiting to be sent, and one sender per
// non-empty queue: it takes what is queued (consecutive forwards to the
// same owner and generation, at most fwdBatchMax of them and about a
// frame's bytes), sends them as one call, and hands each its own answer,
// in order, before it sends the next call. So there is one call in flight
// per channel, its order is the order of the calls, and a burst costs one
// round trip per batch rather than per request. Memory stays bounded by
// what admitted the requests in the first place: the lane's depth and the
// byte budgets for publishes, the stream's owed-answer slots for cache
// operations.

// Peer call types of batched forwarding (docs/protocol.md).
const (
	TypeFwdPublishBatch = "fwd_publish_batch"
	TypeFwdCacheBatch   = "fwd_cache_batch"
)

// fwdBatchMax bounds the requests of one batched call.
const fwdBatchMax = 256

// fwdQueues are the entry's per-channel queues of forwards of one kind.
// The zero value is ready.
type fwdQueues[T any] struct {
	mu sync.Mutex
	m  map[any]*fwdQueue[T]
}

type fwdQueue[T any] struct {
	items []T
}

// push queues it on key's channel; when no sender runs for the channel,
// it starts one. take says how many of the queued items (at least one)
// go in the next call; send makes the call and answers each of them.
func (qs *fwdQueues[T]) push(key any, it T, take func([]T) int, send func([]T)) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if q := qs.m[key]; q != nil {
		q.items = append(q.items, it)
		return
	}
	if qs.m == nil {
		qs.m = map[any]*fwdQueue[T]{}
	}
	q := &fwdQueue[T]{items: []T{it}}
	qs.m[key] = q
	go qs.drain(key, q, take, send)
}

// drain sends q's items in batches until it is empty, then drops it: the
// next push starts a fresh queue and sender, whose first call follows the
// last one of this one (answered before drain looked for more).
func (qs *fwdQueues[T]) drain(key any, q *fwdQueue[T], take func([]T) int, send func([]T)) {
	for {
		qs.mu.Lock()
		if len(q.items) == 0 {
			delete(qs.m, key)
			qs.mu.Unlock()
			return
		}
		n := max(1, min(take(q.items), len(q.items)))
		batch := slices.Clone(q.items[:n])
		clear(q.items[:n])
		q.items = q.items[n:]
		qs.mu.Unlock()
		send(batch)
	}
}

// fwdBatchResult is one request's answer in a batched call's reply
// header: the publish's base offset, or the refusal.
type fwdBatchResult struct {
	Offset *uint64   `json:"offset,omitempty"`
	Error  *fwdError `json:"error,omitempty"`
}

// fwdError is a refusal in a batched reply (wire error fields).
type fwdError struct {
	Code    wire.Code       `json:"code"`
	Retry   wire.RetryClass `json:"retry,omitempty"`
	Message string          `json:"message"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}

func toFwdError(e *wire.Error) *fwdError {
	if e == nil {
		return nil
	}
	fe := &fwdError{Code: e.Code, Retry: e.Retry, Message: e.Message}
	if len(e.Detail) > 0 {
		fe.Detail, _ = json.Marshal(e.Detail)
	}
	return fe
}

func (fe *fwdError) wireError() *wire.Error {
	if fe == nil {
		return nil
	}
	return wire.ErrorFromFields(fe.Code, fe.Retry, fe.Message, fe.Detail)
}

// fwdBatchReply is the header of a batched call's reply: one result per
// request, in the order of the request.
type fwdBatchReply struct {
	Results []fwdBatchResult `json:"results"`
	// Generation is the owner's generation when the entry's is older
	// (see forward_owner.go), else absent.
	Generation uint64 `json:"generation,omitempty"`
}

// sameOwner reports whether two forwards may share a call: the same owner
// at the same generation.
func sameOwner(a, b *Route) bool {
	return a.NodeID == b.NodeID && a.PeerAddr == b.PeerAddr && a.Generation == b.Generation
}

// batchResults makes one batched call and returns each request's answer,
// or the refusal for all of them (the call failed, or the owner refused
// the batch as a whole, or its reply does not fit the request).
func (s *Server) batchResults(ctx context.Context, rt Route, req peer.Request, n int, changes bool) ([]fwdBatchResult, []byte, *wire.Error) {
	rep, e := s.forwardCall(ctx, rt, req, changes)
	if e != nil {
		return nil, nil, e
	}
	if rep.Err != nil {
		return nil, nil, rep.Err
	}
	var h fwdBatchReply
	if err := json.Unmarshal(rep.Header, &h); err != nil || len(h.Results) != n {
		if err == nil {
			err = fmt.Errorf("%d answers to %d requests", len(h.Results), n)
		}
		s.fwd.failed(fwdFailUnanswered)
		err = fmt.Errorf("the answer does not decode: %w", err)
		if !changes {
			return nil, nil, wire.NewError(wire.CodeShardUnavailable, "%s, the shard's owner, did not answer: %v", rt.NodeID, err).
				WithDetail(wire.DetailReason, fwdFailUnanswered).WithDetail("node_id", rt.NodeID)
		}
		return nil, nil, unanswered(rt, err)
	}
	if h.Generation > rt.Generation {
		s.viewSoon()
	}
	return h.Results, rep.Body, nil
}

// --- publishes, the entry broker ---

// fwdPublishBatch is the header of a fwd_publish_batch call: publishes to
// one stream shard, in order. Its body is every publish's payloads one
// after the other (appendPayloads); publishes[i].payloads says how many
// are the i-th publish's.
type fwdPublishBatch struct {
	TenantID   string            `json:"tenant_id"`
	Namespace  string            `json:"namespace"`
	Stream     string            `json:"stream"`
	Shard      uint32            `json:"shard"`
	Generation uint64            `json:"generation"`
	Tokens     []string          `json:"tokens"` // the clients' tokens, each once
	Publishes  []fwdBatchPublish `json:"publishes"`
}

type fwdBatchPublish struct {
	Token    int  `json:"token"` // index in tokens
	Acked    bool `json:"acked,omitempty"`
	Payloads int  `json:"payloads"`
}

// queueForward queues a forwarded publish on its lane's channel to the
// owner, in lane order (the scheduler's ordered step).
func (p *admitted) queueForward() {
	f := p.cs.srv.fwd
	f.pubQ.push(p.lane, p, p.cs.srv.takePublishes, p.cs.srv.sendPublishes)
}

// takePublishes is how many queued publishes go in the next call: those
// to the head's owner, within fwdBatchMax and about a frame's bytes.
func (s *Server) takePublishes(q []*admitted) int {
	limit := int64(s.cfg.MaxFrameBytes)
	var bytes int64
	tokens := map[string]bool{}
	for i, p := range q {
		if i == fwdBatchMax || !sameOwner(p.fwd, q[0].fwd) {
			return i
		}
		bytes += p.req.bytes() + 4*int64(len(p.req.payloads))
		if !tokens[p.cs.token] {
			tokens[p.cs.token] = true
			bytes += int64(len(p.cs.token))
		}
		if i > 0 && bytes > limit {
			return i
		}
	}
	return len(q)
}

// sendPublishes forwards a batch of publishes to one shard in one call
// and answers each with its own result, in order.
func (s *Server) sendPublishes(batch []*admitted) {
	first := batch[0]
	rt := *first.fwd
	if len(batch) == 1 {
		// One alone goes as a plain fwd_publish call.
		first.answerForward(s.forwardPublishCall(s.workCtx, first.cs.token, first.req, first.lane.Shard, rt))
		return
	}
	h := fwdPublishBatch{TenantID: first.req.tenant, Namespace: first.req.ns, Stream: first.req.stream, Shard: first.lane.Shard,
		Generation: rt.Generation, Publishes: make([]fwdBatchPublish, len(batch))}
	tokenAt := map[string]int{}
	var body []byte
	for i, p := range batch {
		t, ok := tokenAt[p.cs.token]
		if !ok {
			t = len(h.Tokens)
			tokenAt[p.cs.token] = t
			h.Tokens = append(h.Tokens, p.cs.token)
		}
		h.Publishes[i] = fwdBatchPublish{Token: t, Acked: p.req.acked, Payloads: len(p.req.payloads)}
		body = appendPayloads(body, p.req.payloads)
	}
	hdr, _ := json.Marshal(h)
	res, _, e := s.batchResults(s.workCtx, rt, peer.Request{Type: TypeFwdPublishBatch, Header: hdr, Body: body}, len(batch), true)
	if e != nil && e.Code == wire.CodeUnsupported {
		// An owner of an earlier release, without batches: nothing was
		// published, so each goes again on its own, in order.
		for _, p := range batch {
			p.answerForward(s.forwardPublishCall(s.workCtx, p.cs.token, p.req, p.lane.Shard, rt))
		}
		return
	}
	if e == nil {
		s.fwd.published.Add(len(batch))
	}
	for i, p := range batch {
		var (
			off *uint64
			pe  = e
		)
		if e == nil {
			off, pe = res[i].Offset, res[i].Error.wireError()
		}
		p.answerForward(off, pe)
	}
}

// answerForward answers a forwarded publish with the owner's result (an
// acked one), or counts a fire-and-forget one that failed, and releases
// what it held.
func (p *admitted) answerForward(off *uint64, e *wire.Error) {
	srv := p.cs.srv
	defer srv.publishes.done()
	if p.commitAck {
		var b []byte
		if e != nil {
			b = p.cs.publishErrorFrame(p.req.requestID, e)
		} else {
			if p.cs.clientFlags&wire.FlagBinaryPublishAckOffset == 0 {
				off = nil
			}
			b = wire.AppendPublishOKFrame(nil, p.req.requestID, off)
		}
		p.owedHeld = false
		p.cs.out.sendOwed(p.ticket, b)
	} else if e != nil {
		srv.fwd.failed(fwdFailDropped)
		srv.log.Debug("a forwarded fire-and-forget publish failed", "tenant", p.req.tenant, "stream", p.req.stream, "shard", p.lane.Shard, "err", e)
	}
	p.release()
}

// --- publishes, the owner ---

// serveForwardedPublishBatch publishes a batch of forwarded publishes as
// local ones would be, in order (each admitted to the shard's lane behind
// the one before), and answers once all are published, each with its own
// result. Every token is checked again here.
func (s *Server) serveForwardedPublishBatch(ctx context.Context, req peer.Request) peer.Reply {
	var h fwdPublishBatch
	if err := json.Unmarshal(req.Header, &h); err != nil {
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "fwd_publish_batch header: %v", err))
	}
	all, err := parsePayloads(req.Body)
	if err != nil {
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "fwd_publish_batch: %v", err))
	}
	payloads := make([][][]byte, len(h.Publishes))
	for i, p := range h.Publishes {
		if p.Payloads < 1 || p.Payloads > len(all) || p.Token < 0 || p.Token >= len(h.Tokens) {
			return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "fwd_publish_batch: publish %d: %d payloads of %d left, token %d of %d",
				i, p.Payloads, len(all), p.Token, len(h.Tokens)))
		}
		payloads[i], all = all[:p.Payloads:p.Payloads], all[p.Payloads:]
	}
	if len(all) != 0 || len(h.Publishes) == 0 {
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "fwd_publish_batch: %d publishes, %d payloads left over", len(h.Publishes), len(all)))
	}
	s.fwd.received.Add(len(h.Publishes))
	// Each client's token, checked once per batch; each publish it
	// refused is counted.
	type checked struct {
		id *auth.Identity
		e  *wire.Error
	}
	ids := make([]checked, len(h.Tokens))
	refused := make([]int, len(h.Tokens))
	for i, t := range h.Tokens {
		ids[i].id, ids[i].e = s.checkForwarded(ctx, t, h.TenantID, auth.ActionStreamPublish, auth.StreamResource(h.TenantID, h.Namespace, h.Stream))
	}
	for _, p := range h.Publishes {
		if ids[p.Token].e != nil {
			if refused[p.Token]++; refused[p.Token] > 1 {
				s.fwd.refusedAuth.Inc()
			}
		}
	}
	results := make([]fwdBatchResult, len(h.Publishes))
	// A refusal of the batch as a whole is every publish's answer.
	rt, st, sh, e := s.forwardedShard(ctx, h.TenantID, h.Namespace, h.Stream, h.Shard, h.Generation)
	if e != nil {
		return peer.ErrorReply(e)
	}
	lk := sched.LaneKey{Stream: st.Key(), Shard: h.Shard}
	pending := make([]*ownerPublish, len(h.Publishes))
	for i, bp := range h.Publishes {
		c := ids[bp.Token]
		if c.e != nil {
			results[i].Error = toFwdError(c.e)
			continue
		}
		p := &ownerPublish{srv: s, ref: shardRef{kind: wire.ShardKindStream, tenant: h.TenantID, ns: h.Namespace, name: h.Stream, shard: h.Shard},
			tenant: h.TenantID, shard: sh, policy: st.Policy(), durable: sh.Durable(),
			payloads: payloads[i], subject: c.id.Subject, res: make(chan ownerResult, 1)}
		if !p.admit(lk) {
			s.metrics.queueFullByTenant.get(h.TenantID).Inc()
			results[i].Error = toFwdError(queueFullError())
			continue
		}
		pending[i] = p
	}
	for i, p := range pending {
		if p == nil {
			continue
		}
		select {
		case r := <-p.res:
			if r.err != nil {
				results[i].Error = toFwdError(asWireError(r.err))
			} else {
				results[i].Offset = r.offset
			}
		case <-ctx.Done():
			// The entry gave up or the link ended: the publishes finish
			// all the same; the entry answers outcome_unknown.
			return peer.ErrorReply(asWireError(ctx.Err()))
		}
	}
	hdr, _ := json.Marshal(fwdBatchReply{Results: results, Generation: newerOwnGeneration(h.Generation, rt.Generation)})
	return peer.Reply{Header: hdr}
}

// --- cache operations ---

// fwdCacheBatch is the header of a fwd_cache_batch call: one client
// stream's cache operations on one cache shard, in the order it sent
// them. Its body is the requests as JSON, each as a u32 length and its
// bytes (appendPayloads); the reply's body is the answers to send the
// client, the same way, one per request (empty where the result carries
// the refusal instead).
type fwdCacheBatch struct {
	fwdCache
}

// cacheForward is one forwarded cache operation waiting in its channel.
type cacheForward struct {
	cs       *controlStream
	rt       Route
	hdr      fwdCache
	body     []byte // the request as JSON
	reqID    uint64
	readOnly bool
	ticket   owedTicket // the answer's slot
}

// cacheChannel orders one client stream's forwards to one cache shard.
type cacheChannel struct {
	cs                *controlStream
	tenant, ns, cache string
	shard             uint32
}

// queueCacheForward sends a cache operation to its owner without holding
// up the client stream: it takes one of the stream's owed-answer slots
// (waiting for one when all are taken, which bounds the forwards in flight
// per stream) and queues the request on the stream's channel to the
// cache shard; the answer is written when it comes.
func (cs *controlStream) queueCacheForward(f *cacheForward) {
	t, err := cs.out.reserveOwed(cs.ctx)
	if err != nil {
		return // the stream is ending
	}
	f.ticket = t
	key := cacheChannel{cs: cs, tenant: f.hdr.TenantID, ns: f.hdr.Namespace, cache: f.hdr.Cache, shard: f.hdr.Shard}
	cs.srv.fwd.cacheQ.push(key, f, cs.srv.takeCacheForwards, cs.srv.sendCacheForwards)
}

// takeCacheForwards is how many queued cache operations go in the next
// call: those to the head's owner, within fwdBatchMax and about a frame's
// bytes.
func (s *Server) takeCacheForwards(q []*cacheForward) int {
	limit := int64(s.cfg.MaxFrameBytes)
	var bytes int64
	for i, f := range q {
		if i == fwdBatchMax || !sameOwner(&f.rt, &q[0].rt) {
			return i
		}
		if bytes += int64(len(f.body)) + 4; i > 0 && bytes > limit {
			return i
		}
	}
	return len(q)
}

// sendCacheForwards forwards a stream's cache operations on one shard in
// one call and answers each when the reply comes.
func (s *Server) sendCacheForwards(batch []*cacheForward) {
	first := batch[0]
	cs := first.cs
	var (
		res     []fwdBatchResult
		answers [][]byte
		e       *wire.Error
	)
	if len(batch) == 1 {
		// One alone goes as a plain fwd_cache call.
		res, answers, e = s.sendCacheForward(first)
	} else {
		hdr, _ := json.Marshal(fwdCacheBatch{first.hdr})
		var body []byte
		changes := false
		for _, f := range batch {
			body = appendPayloads(body, [][]byte{f.body})
			changes = changes || !f.readOnly
		}
		var rb []byte
		res, rb, e = s.batchResults(cs.ctx, first.rt, peer.Request{Type: TypeFwdCacheBatch, Header: hdr, Body: body}, len(batch), changes)
		if e == nil {
			var err error
			if answers, err = parsePayloads(rb); err != nil || len(answers) != len(batch) {
				s.fwd.failed(fwdFailUnanswered)
				e = unanswered(first.rt, fmt.Errorf("the answers do not decode (%d of %d): %v", len(answers), len(batch), err))
			}
		}
		if e != nil && e.Code == wire.CodeUnsupported {
			// An owner of an earlier release, without batches: nothing
			// was run, so each goes again on its own, in order.
			for _, f := range batch {
				res, answers, e := s.sendCacheForward(f)
				s.answerCacheForwards([]*cacheForward{f}, res, answers, e)
			}
			return
		}
	}
	s.answerCacheForwards(batch, res, answers, e)
}

// sendCacheForward forwards one cache operation as a fwd_cache call.
func (s *Server) sendCacheForward(f *cacheForward) ([]fwdBatchResult, [][]byte, *wire.Error) {
	hdr, _ := json.Marshal(f.hdr)
	rep, e := s.forwardCall(f.cs.ctx, f.rt, peer.Request{Type: TypeFwdCache, Header: hdr, Body: f.body}, !f.readOnly)
	if e != nil {
		return nil, nil, e
	}
	return []fwdBatchResult{{Error: toFwdError(rep.Err)}}, [][]byte{rep.Body}, nil
}

// answerCacheForwards answers each forwarded cache operation of a batch
// with its result, or all of them with e.
func (s *Server) answerCacheForwards(batch []*cacheForward, res []fwdBatchResult, answers [][]byte, e *wire.Error) {
	cs := batch[0].cs
	if e == nil {
		s.fwd.cacheOps.Add(len(batch))
	}
	for i, f := range batch {
		var b []byte
		switch {
		case e != nil:
			fe := e
			if f.readOnly && e.Retry == wire.RetryOutcomeUnknown {
				// A get changes nothing: it may be retried.
				fe = wire.NewError(wire.CodeShardUnavailable, "%s", e.Message).
					WithDetail(wire.DetailReason, fwdFailUnanswered).WithDetail("node_id", f.rt.NodeID)
			}
			b = cs.errorFrame(fe, f.reqID)
		case res[i].Error != nil:
			b = cs.errorFrame(res[i].Error.wireError(), f.reqID)
		default:
			b = wire.AppendFrame(nil, 0, answers[i])
		}
		cs.out.sendOwed(f.ticket, b)
	}
}

// errorFrame is an error frame naming the request it answers.
func (cs *controlStream) errorFrame(e *wire.Error, reqID uint64) []byte {
	m := e.ErrorMessage(cs.withCodes())
	m.RequestID = &reqID
	b, _ := wire.AppendMessageFrame(nil, m)
	return b
}

// serveForwardedCacheBatch runs a batch of one stream's forwarded cache
// operations in order, each as a fwd_cache call would be, and answers
// them all at once.
func (s *Server) serveForwardedCacheBatch(ctx context.Context, req peer.Request) peer.Reply {
	var h fwdCacheBatch
	if err := json.Unmarshal(req.Header, &h); err != nil {
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "fwd_cache_batch header: %v", err))
	}
	ops, err := parsePayloads(req.Body)
	if err != nil {
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "fwd_cache_batch: %v", err))
	}
	results := make([]fwdBatchResult, len(ops))
	var (
		body []byte
		gen  uint64 // the owner's generation, when newer than the entry's
	)
	for i, op := range ops {
		s.fwd.received.Inc()
		rep := s.serveCacheOp(ctx, h.fwdCache, op)
		results[i].Error = toFwdError(rep.Err)
		body = appendPayloads(body, [][]byte{rep.Body})
		var g ownerGeneration
		if len(rep.Header) > 0 && json.Unmarshal(rep.Header, &g) == nil {
			gen = max(gen, g.Generation)
		}
	}
	hdr, _ := json.Marshal(fwdBatchReply{Results: results, Generation: gen})
	return peer.Reply{Header: hdr, Body: body}
}
