package broker

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/internal/metricdoc"
	"github.com/felixmq/felix/roles/broker/peer"
	"github.com/felixmq/felix/roles/broker/sched"
	"github.com/felixmq/felix/wire"
)

// Forwarding: a broker in a cluster takes publishes and cache operations
// for every shard, and sends those for a shard another broker owns on to
// that owner over the peer link (a peer call, roles/broker/peer), then
// answers its client with the owner's answer as if it had served the
// request itself (docs/protocol.md "Broker-to-broker messages").
//
// Authorized twice: the entry broker checks the client's token as for a
// local request before it forwards; the owner checks the raw token again
// with its own verifier, revocations and permissions. An owner whose own
// route for the shard is not local refuses (not_leader or
// shard_unavailable) and never forwards again.
//
// Order: the entry runs the publishes it forwards to one shard in a lane
// of their own (sched.LaneKey.Forwarded) and sends them in lane order,
// batched: what queued while one call was in flight goes in the next
// call (fwd_publish_batch, forward_batch.go), one call in flight per
// lane. So publishes keep their order across the forward, fire-and-forget
// ones included, at one round trip per batch. On the owner a forwarded
// publish takes the shard's own lane, the same admission and the same
// scheduler as a local publish. Cache operations are forwarded the same
// way per client stream and cache shard, off the stream's read loop.
//
// Outcome: a forward that was never sent is refused with
// shard_unavailable (retry); one sent but not answered (the link died,
// the owner stalled past ForwardTimeout) with retry class
// outcome_unknown, never acknowledged nor sent again.

// Peer call types of forwarding.
const (
	TypeFwdPublish = "fwd_publish"
	TypeFwdCache   = "fwd_cache"
)

// forwardTimeout bounds one forward, from the call to the owner's answer.
const forwardTimeout = 10 * time.Second

// Reasons of felix_broker_forward_failures_total.
const (
	fwdFailNoPeer     = "no_peer_link"      // no peer endpoint here, or no peer address for the owner
	fwdFailNotSent    = "owner_unreachable" // the call was never sent
	fwdFailUnanswered = "unanswered"        // sent, no answer: outcome unknown
	fwdFailNotOwner   = "not_owner"         // the owner's view disagrees: not_leader or shard_unavailable
	fwdFailDropped    = "dropped"           // a fire-and-forget publish that failed or was refused, for any of the above or by the owner: dropped
)

var forwardHelp = map[string]string{
	"felix_broker_forwarded_publishes_total":  "Publishes this broker forwarded to the shard's owner and the owner answered (successes and refusals).",
	"felix_broker_forwarded_cache_ops_total":  "Cache operations this broker forwarded to the key's owner and the owner answered.",
	"felix_broker_forward_failures_total":     "Forwards that could not be made or got no answer, by reason; reason dropped counts the fire-and-forget publishes lost so, and those the owner refused.",
	"felix_broker_forwards_received_total":    "Publishes and cache operations other brokers forwarded to this broker.",
	"felix_broker_forward_refused_auth_total": "Forwards this broker refused because the client's token did not pass its own check (authorized twice).",
}

// forwarder is a Server's forwarding state.
type forwarder struct {
	set                   *metrics.Set
	published, cacheOps   *metrics.Counter
	received, refusedAuth *metrics.Counter
	failMu                sync.Mutex
	failures              map[string]*metrics.Counter // by reason, a fixed set
	timeout               time.Duration
	// ownerHook, when set (tests), runs at the owner before a forwarded
	// publish is admitted.
	ownerHook atomic.Pointer[func(ctx context.Context)]
	// callHook, when set (tests), runs at the owner before any peer call
	// is served.
	callHook atomic.Pointer[func(ctx context.Context, typ string)]
	// noBatches, when set (tests), refuses batched forwards as a broker
	// of an earlier release would.
	noBatches atomic.Bool
	// The entry's ordered channels of forwards waiting to be sent
	// (forward_batch.go).
	pubQ   fwdQueues[*admitted]
	cacheQ fwdQueues[*cacheForward]
}

func newForwarder(set *metrics.Set) *forwarder {
	metricdoc.Describe(forwardHelp)
	return &forwarder{
		set:         set,
		published:   set.NewCounter("felix_broker_forwarded_publishes_total"),
		cacheOps:    set.NewCounter("felix_broker_forwarded_cache_ops_total"),
		received:    set.NewCounter("felix_broker_forwards_received_total"),
		refusedAuth: set.NewCounter("felix_broker_forward_refused_auth_total"),
		failures:    map[string]*metrics.Counter{},
		timeout:     forwardTimeout,
	}
}

func (f *forwarder) failed(reason string) {
	f.failMu.Lock()
	c := f.failures[reason]
	if c == nil {
		c = f.set.GetOrCreateCounter("felix_broker_forward_failures_total{reason=" + strconv.Quote(reason) + "}")
		f.failures[reason] = c
	}
	f.failMu.Unlock()
	c.Inc()
}

// fwdPublish is the header of a fwd_publish call; its body is the
// payloads (appendPayloads). Unlike other calls' headers it is binary
// (appendBinary): an acked publish sent one at a time is the path where a
// forward's own cost shows.
type fwdPublish struct {
	Token     string
	TenantID  string
	Namespace string
	Stream    string
	Shard     uint32
	// Acked: the client waits for the answer. The owner answers every
	// forward either way (the entry waits for it to keep the order).
	Acked bool
	// Generation is the shard's ownership generation in the entry's view.
	Generation uint64
}

// fwdPublished is the header of a fwd_publish reply: the base offset the
// batch was given, on a durable shard.
type fwdPublished struct {
	Offset *uint64
	// Generation is the owner's, when the entry's was older
	// (forward_owner.go); 0 otherwise.
	Generation uint64
}

// appendBinary encodes h (integers big-endian):
//
//	u8 flags (0x01 acked) | u32 shard | u64 generation |
//	u32 n, n bytes, for each of token, tenant_id, namespace, stream
func (h fwdPublish) appendBinary(dst []byte) []byte {
	var flags byte
	if h.Acked {
		flags |= 0x01
	}
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint32(dst, h.Shard)
	dst = binary.BigEndian.AppendUint64(dst, h.Generation)
	for _, f := range [...]string{h.Token, h.TenantID, h.Namespace, h.Stream} {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(f)))
		dst = append(dst, f...)
	}
	return dst
}

func parseFwdPublish(b []byte) (fwdPublish, error) {
	var h fwdPublish
	if len(b) < 13 {
		return h, fmt.Errorf("%d bytes, at least 13 needed", len(b))
	}
	if b[0]&^0x01 != 0 {
		return h, fmt.Errorf("flags %#02x", b[0])
	}
	h.Acked = b[0]&0x01 != 0
	h.Shard = binary.BigEndian.Uint32(b[1:])
	h.Generation = binary.BigEndian.Uint64(b[5:])
	b = b[13:]
	for _, f := range [...]*string{&h.Token, &h.TenantID, &h.Namespace, &h.Stream} {
		if len(b) < 4 {
			return h, fmt.Errorf("%d bytes left, a length needs 4", len(b))
		}
		n := binary.BigEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) {
			return h, fmt.Errorf("a string of %d bytes, %d left", n, len(b)-4)
		}
		*f, b = string(b[4:4+n]), b[4+n:]
	}
	if len(b) != 0 {
		return h, fmt.Errorf("%d bytes left over", len(b))
	}
	return h, nil
}

// appendBinary encodes r: u8 flags (0x01 offset present) | u64 offset |
// u64 generation.
func (r fwdPublished) appendBinary(dst []byte) []byte {
	var flags byte
	var off uint64
	if r.Offset != nil {
		flags, off = 0x01, *r.Offset
	}
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint64(dst, off)
	return binary.BigEndian.AppendUint64(dst, r.Generation)
}

func parseFwdPublished(b []byte) (fwdPublished, error) {
	var r fwdPublished
	if len(b) != 17 || b[0]&^0x01 != 0 {
		return r, fmt.Errorf("%d bytes, flags %#02x; want 17 bytes", len(b), b[0:min(1, len(b))])
	}
	off := binary.BigEndian.Uint64(b[1:])
	switch {
	case b[0]&0x01 != 0:
		r.Offset = &off
	case off != 0:
		return r, fmt.Errorf("offset %d without its flag", off)
	}
	r.Generation = binary.BigEndian.Uint64(b[9:])
	return r, nil
}

// fwdCache is the header of a fwd_cache call; its body is the client's
// request (cache_put, cache_get or cache_delete) as JSON, and the reply's
// body is the answer message (or error) to send the client unchanged.
type fwdCache struct {
	Token     string `json:"token"`
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Cache     string `json:"cache"`
	Shard     uint32 `json:"shard"`
	// WithCodes: the client negotiated FEATURE_ERROR_CODES, so errors in
	// the answer carry code, retry and detail.
	WithCodes  bool   `json:"with_codes"`
	Generation uint64 `json:"generation"`
	// Versions: the client offered FEATURE_CACHE_CONDITIONAL, so a
	// cache_value answering its get carries the value's version.
	Versions bool `json:"versions,omitempty"`
}

// appendPayloads encodes a publish's payloads: per payload a u32
// big-endian length and its bytes.
func appendPayloads(dst []byte, payloads [][]byte) []byte {
	for _, p := range payloads {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(p)))
		dst = append(dst, p...)
	}
	return dst
}

// parsePayloads decodes appendPayloads' encoding; the payloads alias b.
func parsePayloads(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("payloads: %d bytes left, a length needs 4", len(b))
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(n) > uint64(len(b)) {
			return nil, fmt.Errorf("payloads: a payload of %d bytes, %d left", n, len(b))
		}
		out = append(out, b[:n:n])
		b = b[n:]
	}
	if len(out) == 0 {
		return nil, errors.New("payloads: none")
	}
	return out, nil
}

// --- the entry broker ---

// forwardPublish sends a publish for shard idx, which this broker does not
// serve, to its owner, or refuses it when nobody serves it. It takes the
// same budgets as a local publish and a place in the shard's forwarded
// lane; the lane's job sends the forward once the one ahead is answered.
func (cs *controlStream) forwardPublish(r *pubRequest, st *core.Stream, idx uint32, rt Route) {
	srv := cs.srv
	if rt.NodeID == "" {
		cs.refuse(r, rt.Err(wire.ShardKindStream, r.stream, idx))
		return
	}
	if !srv.canForward(rt) {
		cs.refuse(r, rt.Err(wire.ShardKindStream, r.stream, idx))
		return
	}
	lk := sched.LaneKey{Stream: st.Key(), Shard: idx, Forwarded: true}
	p := &admitted{cs: cs, req: r, lane: lk, commitAck: r.acked, fwd: &rt}
	if !p.admit() {
		cs.queueFull(r)
	}
}

// canForward reports whether this broker can reach rt's owner: it runs a
// peer listener and the view names the owner's. When not, the request is
// refused with the route's not_leader, so the client goes to the owner
// itself.
func (s *Server) canForward(rt Route) bool {
	if s.Peer() == nil || rt.PeerAddr == "" {
		s.fwd.failed(fwdFailNoPeer)
		return false
	}
	return true
}

// runForward is a forwarded publish's ordered step: it queues the
// publish on its lane's channel to the owner (forward_batch.go).
func (p *admitted) runForward() {
	p.queueForward()
}

// forwardPublishCall makes the fwd_publish call and returns the owner's
// answer: the batch's base offset (nil when the shard keeps none), or the
// refusal to answer the client with.
func (s *Server) forwardPublishCall(ctx context.Context, token string, r *pubRequest, shard uint32, rt Route) (*uint64, *wire.Error) {
	hdr := fwdPublish{Token: token, TenantID: r.tenant, Namespace: r.ns, Stream: r.stream, Shard: shard,
		Acked: r.acked, Generation: rt.Generation}.appendBinary(nil)
	rep, e := s.forwardCall(ctx, rt, peer.Request{Type: TypeFwdPublish, Header: hdr, Body: appendPayloads(nil, r.payloads)}, true)
	if e != nil {
		return nil, e
	}
	s.fwd.published.Inc()
	if rep.Err != nil {
		return nil, rep.Err
	}
	ok, err := parseFwdPublished(rep.Header)
	if err != nil {
		s.fwd.failed(fwdFailUnanswered)
		return nil, unanswered(rt, fmt.Errorf("the answer does not decode: %w", err))
	}
	if ok.Generation > rt.Generation {
		s.viewSoon()
	}
	return ok.Offset, nil
}

// forwardCall makes one forward call to rt's owner. An error is the
// refusal for the client: the owner could not be asked (retry), or was
// asked and did not answer (outcome_unknown when the request changes
// something, retry otherwise). A refusal by the owner comes back in the
// reply.
func (s *Server) forwardCall(ctx context.Context, rt Route, req peer.Request, changes bool) (peer.Reply, *wire.Error) {
	ep := s.Peer()
	if ep == nil || rt.PeerAddr == "" {
		s.fwd.failed(fwdFailNoPeer)
		return peer.Reply{}, wire.NewError(wire.CodeShardUnavailable, "cannot reach %s, the shard's owner: no peer link", rt.NodeID).
			WithDetail(wire.DetailReason, fwdFailNoPeer).WithDetail("node_id", rt.NodeID)
	}
	ctx, cancel := context.WithTimeout(ctx, s.fwd.timeout)
	defer cancel()
	rep, err := ep.Call(ctx, peer.Target{NodeID: rt.NodeID, Addr: rt.PeerAddr}, req)
	switch {
	case err == nil:
		if req.Type != TypeFwdPublish { // its reply header is binary: forwardPublishCall looks
			s.noteOwnerGeneration(rt, rep)
		}
		if rep.Err != nil && (rep.Err.Code == wire.CodeNotLeader || rep.Err.Code == wire.CodeShardUnavailable) {
			s.fwd.failed(fwdFailNotOwner)
		}
		return rep, nil
	case errors.Is(err, peer.ErrUnanswered):
		s.fwd.failed(fwdFailUnanswered)
		if !changes {
			return peer.Reply{}, wire.NewError(wire.CodeShardUnavailable, "%s, the shard's owner, did not answer: %v", rt.NodeID, err).
				WithDetail(wire.DetailReason, fwdFailUnanswered).WithDetail("node_id", rt.NodeID)
		}
		return peer.Reply{}, unanswered(rt, err)
	case errors.Is(err, peer.ErrBusy):
		// As many forwards to the owner as a link may carry are in flight.
		s.fwd.failed(fwdFailNotSent)
		return peer.Reply{}, wire.NewError(wire.CodeOverloaded, "too many requests in flight to %s, the shard's owner: %v", rt.NodeID, err).
			WithDetail(wire.DetailReason, "forward_busy").WithDetail("node_id", rt.NodeID)
	}
	s.fwd.failed(fwdFailNotSent)
	return peer.Reply{}, unreachable(rt, err)
}

// unanswered is the refusal of a forward that may have been applied.
func unanswered(rt Route, err error) *wire.Error {
	return (&wire.Error{Code: wire.CodeShardUnavailable, Retry: wire.RetryOutcomeUnknown,
		Message: fmt.Sprintf("forwarded to %s, the shard's owner, which did not answer; it may have been applied: %v", rt.NodeID, err)}).
		WithDetail(wire.DetailReason, "forward_unanswered").WithDetail("node_id", rt.NodeID)
}

// forwardCache serves a cache operation whose key's shard another broker
// owns (or nobody serves): it forwards it and sends the owner's answer,
// or refuses. It reports false when the shard is local: the caller serves
// it. The entry has authorized and resolved the request already.
func (cs *controlStream) forwardCache(m wire.Message, tenant, ns, cache, key string, reqID uint64) bool {
	srv := cs.srv
	shard, rt := srv.cacheRoute(tenant, ns, cache, key)
	if rt.Local {
		return false
	}
	if rt.NodeID == "" || !srv.canForward(rt) {
		cs.sendError(rt.Err(wire.ShardKindCache, cache, shard), &reqID)
		return true
	}
	body, err := wire.MarshalMessage(m)
	if err != nil {
		cs.sendError(asWireError(err), &reqID)
		return true
	}
	cs.queueCacheForward(&cacheForward{cs: cs, rt: rt, body: body, reqID: reqID, readOnly: readOnlyCacheOp(m),
		hdr: fwdCache{Token: cs.token, TenantID: tenant, Namespace: ns, Cache: cache, Shard: shard,
			WithCodes: cs.withCodes(), Generation: rt.Generation, Versions: cs.versions()}})
	return true
}

// readOnlyCacheOp reports a cache request that changes nothing, so one
// whose forward went unanswered may be retried; every other one (a put, a
// delete, a conditional write, a counter add) may have been applied and
// is answered outcome_unknown instead.
func readOnlyCacheOp(m wire.Message) bool {
	switch m.(type) {
	case *wire.CacheGet, *wire.CacheGetVersioned, *wire.CounterGet:
		return true
	}
	return false
}

// cacheRoute is where a cache key's requests go, and its shard (by the
// cache's shard count from the catalog, cluster_msgs.go).
func (s *Server) cacheRoute(tenant, ns, cache, key string) (uint32, Route) {
	if s.routes.standalone {
		return 0, Route{Local: true}
	}
	n := s.cacheShards(tenant, ns, cache)
	if n == 0 {
		if s.routes.view.Load() == nil {
			return 0, Route{Unavailable: unavailableNotReady}
		}
		return 0, Route{Unavailable: wire.UnavailableNotAssigned}
	}
	shard := wire.ShardForKey([]byte(key), n)
	return shard, s.route(s.workCtx, wire.ShardKindCache, tenant, ns, cache, shard)
}

// --- the owner ---

// handlePeerCall answers the calls other brokers make on the peer link.
func (s *Server) handlePeerCall(ctx context.Context, from peer.Peer, req peer.Request) peer.Reply {
	if hook := s.fwd.callHook.Load(); hook != nil {
		(*hook)(ctx, req.Type)
	}
	switch req.Type {
	case TypeReplAppend:
		return s.serveReplAppend(ctx, from, req)
	case TypeReplFence:
		return s.serveReplFence(from, req)
	case TypeReplRead:
		return s.serveReplRead(from, req)
	case TypeReplGroups:
		return s.serveReplGroups(from, req)
	case TypeReplGroupsRead:
		return s.serveReplGroupsRead(from, req)
	case TypeFwdPublish:
		s.fwd.received.Inc()
		return s.serveForwardedPublish(ctx, req)
	case TypeFwdCache:
		s.fwd.received.Inc()
		return s.serveForwardedCache(ctx, req)
	case TypeFwdPublishBatch:
		if !s.fwd.noBatches.Load() {
			return s.serveForwardedPublishBatch(ctx, req)
		}
	case TypeFwdCacheBatch:
		if !s.fwd.noBatches.Load() {
			return s.serveForwardedCacheBatch(ctx, req)
		}
	}
	return peer.ErrorReply(wire.NewError(wire.CodeUnsupported, "unknown peer call %q", req.Type))
}

// checkForwarded authorizes a forwarded request again, here, as if the
// client had sent it to this broker: its token against this broker's
// verifier and revocations, the tenant, and the permission for action on
// resource.
func (s *Server) checkForwarded(ctx context.Context, token, tenant string, action auth.Action, resource string) (*auth.Identity, *wire.Error) {
	id, err := s.verifier.Verify(ctx, token, tenant)
	if err != nil {
		s.fwd.refusedAuth.Inc()
		e := asWireError(err)
		if e.Code != wire.CodeUnauthorized && e.Code != wire.CodeRevoked {
			e = wire.NewError(wire.CodeUnauthorized, "%s", e.Message)
		}
		return nil, e
	}
	if e := s.revs.Check(id); e != nil {
		s.fwd.refusedAuth.Inc()
		return nil, e
	}
	cs := &controlStream{srv: s, id: id}
	if e := cs.authorize(tenant, action, resource); e != nil {
		s.fwd.refusedAuth.Inc()
		return nil, e
	}
	return id, nil
}

// serveForwardedPublish publishes a forwarded batch as a local publish
// would be (the shard's lane, admission, the scheduler) and answers once
// it is published, with its base offset on a durable shard.
func (s *Server) serveForwardedPublish(ctx context.Context, req peer.Request) peer.Reply {
	h, err := parseFwdPublish(req.Header)
	if err != nil {
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "fwd_publish header: %v", err))
	}
	payloads, err := parsePayloads(req.Body)
	if err != nil {
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "fwd_publish: %v", err))
	}
	id, e := s.checkForwarded(ctx, h.Token, h.TenantID, auth.ActionStreamPublish, auth.StreamResource(h.TenantID, h.Namespace, h.Stream))
	if e != nil {
		return peer.ErrorReply(e)
	}
	rt, st, sh, e := s.forwardedShard(ctx, h.TenantID, h.Namespace, h.Stream, h.Shard, h.Generation)
	if e != nil {
		return peer.ErrorReply(e)
	}
	p := &ownerPublish{srv: s, ref: shardRef{kind: wire.ShardKindStream, tenant: h.TenantID, ns: h.Namespace, name: h.Stream, shard: h.Shard},
		tenant: h.TenantID, shard: sh, policy: st.Policy(), durable: sh.Durable(),
		payloads: payloads, subject: id.Subject, res: make(chan ownerResult, 1)}
	if !p.admit(sched.LaneKey{Stream: st.Key(), Shard: h.Shard}) {
		s.metrics.queueFullByTenant.get(h.TenantID).Inc()
		return peer.ErrorReply(queueFullError())
	}
	select {
	case r := <-p.res:
		if r.err != nil {
			return peer.ErrorReply(asWireError(r.err))
		}
		return peer.Reply{Header: fwdPublished{Offset: r.offset, Generation: newerOwnGeneration(h.Generation, rt.Generation)}.appendBinary(nil)}
	case <-ctx.Done():
		// The entry gave up or the link ended: the publish finishes all
		// the same; the entry answers outcome_unknown.
		return peer.ErrorReply(asWireError(ctx.Err()))
	}
}

// forwardedShard is the shard a forwarded publish (alone or in a batch)
// names, with the owner's checks: never forwarded again (a shard this
// broker does not serve now is refused, naming its owner when there is
// one), the forward's generation (checkForwardGeneration), the stream and
// the shard. The entry may have given up meanwhile (ctx): then nothing is
// published. rt is this broker's route for the shard.
func (s *Server) forwardedShard(ctx context.Context, tenant, ns, stream string, shard uint32, entryGen uint64) (Route, *core.Stream, *core.Shard, *wire.Error) {
	rt := s.route(ctx, wire.ShardKindStream, tenant, ns, stream, shard)
	if !rt.Local {
		return rt, nil, nil, rt.Err(wire.ShardKindStream, stream, shard)
	}
	if e := s.checkForwardGeneration(wire.ShardKindStream, stream, shard, rt, entryGen); e != nil {
		return rt, nil, nil, e
	}
	st, re := s.resolveStream(tenant, ns, stream)
	if re != nil {
		return rt, nil, nil, re
	}
	if err := wire.CheckShard("stream", stream, shard, st.Shards()); err != nil {
		return rt, nil, nil, asWireError(err)
	}
	sh, err := s.servedShard(st, shard)
	if err != nil {
		return rt, nil, nil, asWireError(err)
	}
	if hook := s.fwd.ownerHook.Load(); hook != nil {
		(*hook)(ctx)
	}
	if err := ctx.Err(); err != nil {
		// The entry gave up, or the link ended: nobody waits for this
		// answer, so the publish is not made.
		return rt, nil, nil, asWireError(err)
	}
	return rt, st, sh, nil
}

// ownerPublish is a forwarded publish on its way through admission, the
// scheduler and the core at the shard's owner: admitted's counterpart
// without a client stream (the answer goes back on the peer call).
type ownerPublish struct {
	srv      *Server
	ref      shardRef
	tenant   string
	shard    *core.Shard
	policy   core.QueuePolicy
	durable  bool
	payloads [][]byte
	subject  string
	res      chan ownerResult // one slot: the answer

	n          int64
	globalHeld bool
	l          *lane
}

type ownerResult struct {
	offset *uint64
	err    error
}

// admit takes the process byte budget and a place in the shard's lane and
// queues the job, never waiting; false when there is no room (everything
// given back).
func (p *ownerPublish) admit(lk sched.LaneKey) bool {
	srv := p.srv
	p.n = max(1, min(int64(core.BatchBytes(p.payloads)), srv.cfg.PublishTotalInflightBytes))
	p.globalHeld = srv.pubBytes.TryAcquire(p.n)
	if p.globalHeld {
		p.l, _ = srv.lanes.admit(srv.workCtx, lk, false)
	}
	if p.l == nil {
		p.release()
		return false
	}
	srv.publishes.add(1)
	// An idle lane publishes right here, on the call's handler: no hand-off
	// to an executor and back (sched.Scheduler.RunNow).
	job := sched.Job{Tenant: p.tenant, Lane: lk, Bytes: int(p.n), Run: p.run}
	if srv.sched.RunNow(job) {
		return true
	}
	if srv.sched.TryEnqueue(job) != nil {
		p.release()
		srv.publishes.done()
		return false
	}
	return true
}

func (p *ownerPublish) release() {
	if p.l != nil {
		p.srv.lanes.release(p.l)
		p.l = nil
	}
	if p.globalHeld {
		p.srv.pubBytes.Release(p.n)
		p.globalHeld = false
	}
}

// run is the ordered step, as admitted.run.
func (p *ownerPublish) run() {
	srv := p.srv
	if p.durable {
		if !srv.handsOff() {
			srv.runDurablePublish(p.shard, p.payloads, p.subject, p.policy, nil, nil, p.settle)
			return
		}
		if srv.handoffs.enter(p.ref, p.resume) { // else parked (handoff_gate.go)
			srv.runDurablePublish(p.shard, p.payloads, p.subject, p.policy, nil, nil, p.settleAt)
		}
		return
	}
	prev, done := srv.lanes.link(p.l)
	if isClosed(prev) && p.policy != core.Block {
		p.publish(nil, done)
		return
	}
	go p.publish(prev, done)
}

func (p *ownerPublish) publish(prev <-chan struct{}, done chan struct{}) {
	srv := p.srv
	defer srv.publishes.done()
	if prev != nil {
		select {
		case <-prev:
		case <-srv.workCtx.Done():
		}
	}
	_, err := p.shard.Publish(srv.workCtx, p.payloads, p.subject)
	close(done)
	p.settle(err, nil)
}

// settleAt is settle for a publish that passed the shard's handoff gate.
func (p *ownerPublish) settleAt(err error, offset *uint64) {
	p.settle(err, offset)
	p.srv.handoffs.leave(p.ref)
}

// resume runs a forwarded publish parked during a handoff: here when the
// shard stayed, else it is refused with the route's answer (this broker
// never forwards a forward again; the entry's client follows the
// redirect).
func (p *ownerPublish) resume(refuse *wire.Error) {
	srv := p.srv
	if refuse != nil {
		srv.publishes.done()
		p.settle(refuse, nil)
		return
	}
	rt := srv.route(srv.workCtx, wire.ShardKindStream, p.ref.tenant, p.ref.ns, p.ref.name, p.ref.shard)
	if rt.Local {
		srv.handoffs.enterNow(p.ref)
		srv.runDurablePublish(p.shard, p.payloads, p.subject, p.policy, nil, nil, p.settleAt)
		return
	}
	srv.publishes.done()
	p.settle(rt.Err(wire.ShardKindStream, p.ref.name, p.ref.shard), nil)
}

func (p *ownerPublish) settle(err error, offset *uint64) {
	if err == nil {
		p.srv.metrics.publishMessages.Add(len(p.payloads))
		p.srv.metrics.publishBytes.Add(core.BatchBytes(p.payloads))
	}
	p.release()
	p.res <- ownerResult{offset: offset, err: err}
}

// serveForwardedCache runs a forwarded cache operation and answers with
// the message to send the client.
func (s *Server) serveForwardedCache(ctx context.Context, req peer.Request) peer.Reply {
	var h fwdCache
	if err := json.Unmarshal(req.Header, &h); err != nil {
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "fwd_cache header: %v", err))
	}
	return s.serveCacheOp(ctx, h, req.Body)
}

// serveCacheOp answers one forwarded cache request (body, the client's
// JSON request) under the call's header h: alone (fwd_cache) or one of a
// batch (fwd_cache_batch), which decodes its header once.
func (s *Server) serveCacheOp(ctx context.Context, h fwdCache, body []byte) peer.Reply {
	msg, err := wire.ParseMessage(body)
	if err != nil {
		return peer.ErrorReply(asWireError(err))
	}
	if m, ok := msg.(*wire.CacheKeys); ok {
		return s.serveForwardedCacheKeys(ctx, h, m) // cache_keys_cluster.go
	}
	var (
		key, tenant, ns, cache string
		reqID                  uint64
		action                 = auth.ActionCacheWrite
		run                    func(*core.Cache) (wire.Message, *wire.Error)
	)
	switch m := msg.(type) {
	case *wire.CachePut:
		tenant, ns, cache, key, reqID = m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID
		run = func(c *core.Cache) (wire.Message, *wire.Error) { return putIn(c, m) }
	case *wire.CacheGet:
		tenant, ns, cache, key, reqID = m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID
		action = auth.ActionCacheRead
		run = func(c *core.Cache) (wire.Message, *wire.Error) { return getIn(c, m, h.Versions) }
	case *wire.CacheDelete:
		tenant, ns, cache, key, reqID = m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID
		run = func(c *core.Cache) (wire.Message, *wire.Error) { return deleteIn(c, m) }
	case *wire.CachePutIf:
		tenant, ns, cache, key, reqID = m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID
		run = func(c *core.Cache) (wire.Message, *wire.Error) { return putIfIn(c, m) }
	case *wire.CacheDeleteIf:
		tenant, ns, cache, key, reqID = m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID
		run = func(c *core.Cache) (wire.Message, *wire.Error) { return deleteIfIn(c, m) }
	case *wire.CacheGetVersioned:
		tenant, ns, cache, key, reqID = m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID
		action = auth.ActionCacheRead
		run = func(c *core.Cache) (wire.Message, *wire.Error) { return getVersionedIn(c, m) }
	case *wire.CounterAdd:
		tenant, ns, cache, key, reqID = m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID
		run = func(c *core.Cache) (wire.Message, *wire.Error) { return counterAddIn(c, m) }
	case *wire.CounterGet:
		tenant, ns, cache, key, reqID = m.TenantID, m.Namespace, m.Cache, m.Key, m.RequestID
		action = auth.ActionCacheRead
		run = func(c *core.Cache) (wire.Message, *wire.Error) { return counterGetIn(c, m) }
	default:
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "fwd_cache carries %s", msg.MessageType()))
	}
	answer := func(m wire.Message, e *wire.Error) peer.Reply {
		if e != nil {
			em := e.ErrorMessage(h.WithCodes)
			em.RequestID = &reqID
			m = em
		}
		b, err := wire.MarshalMessage(m)
		if err != nil {
			return peer.ErrorReply(asWireError(err))
		}
		return peer.Reply{Body: b}
	}
	if v, ok := msg.(wire.Validator); ok {
		if err := v.Validate(); err != nil {
			return answer(nil, asWireError(err))
		}
	}
	if tenant != h.TenantID || ns != h.Namespace || cache != h.Cache {
		return peer.ErrorReply(wire.NewError(wire.CodeInvalidRequest, "fwd_cache: the header and the request name different caches"))
	}
	if _, e := s.checkForwarded(ctx, h.Token, tenant, action, auth.CacheResource(tenant, ns, cache, key)); e != nil {
		return answer(nil, e)
	}
	shard, rt := s.cacheRoute(tenant, ns, cache, key)
	if !rt.Local {
		return answer(nil, rt.Err(wire.ShardKindCache, cache, shard))
	}
	if e := s.checkForwardGeneration(wire.ShardKindCache, cache, shard, rt, h.Generation); e != nil {
		return answer(nil, e)
	}
	c, e := s.resolveCache(tenant, ns, cache)
	if e != nil {
		return answer(nil, e)
	}
	reply, e := run(c)
	if e == nil {
		// A log-backed cache answers what is durable (core.Cache.WaitStaged).
		if err := c.WaitStaged(ctx); err != nil {
			reply, e = nil, asWireError(err)
		}
	}
	rep := answer(reply, e)
	rep.Header = ownerGenerationHeader(h.Generation, rt.Generation)
	return rep
}
