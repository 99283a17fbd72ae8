package broker

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/internal/gogroup"
	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// What the broker advertises in auth_ok. A broker with durable storage
// adds DurableFeatures.
const (
	ServerFlags = wire.FlagBinaryPublishBatch | wire.FlagBinaryPublishAcked | wire.FlagBinaryPublishKeyed |
		wire.FlagBinaryPublishAckOffset | wire.FlagBinaryEventBatchShared | wire.FlagEventBatchOffsets |
		wire.FlagEventBatchSkipped | wire.FlagEventBatchTimestamps | wire.FlagEventBatchPublisher |
		wire.FlagBinaryPublishIdempotent
	ServerFeatures = wire.FeatureErrorCodes | wire.FeatureUnsupported | wire.FeatureAckOnCommit | wire.FeatureCacheDelete |
		wire.FeatureCacheConditional | wire.FeatureCacheWatch | wire.FeatureCacheWatchRetained | wire.FeatureExplicitShard
	// DurableFeatures are served only with durable storage, since they
	// read a log.
	// FEATURE_COUNTERS is among them: counters are durable only.
	// FEATURE_PUBLISH_CONDITIONAL too: publish_if compares a log's next
	// offset; and FEATURE_ATOMIC_COMMIT: a commit is one log record.
	DurableFeatures = wire.FeatureStreamRead | wire.FeatureRecordTimestamps | wire.FeatureSubscriptionLagged |
		wire.FeatureCounters | wire.FeaturePublishConditional | wire.FeatureAtomicCommit | GroupFeatures
	// GroupFeatures are the consumer group bits (group.go): groups keep
	// their cursors beside a shard's log, so only with durable storage.
	GroupFeatures = wire.FeatureConsumerGroup | wire.FeatureGroupClaimControl | wire.FeatureGroupDeadLetters |
		wire.FeatureGroupAdmin | wire.FeatureGroupPublisher
)

// serverFeatures returns the feature bits this broker advertises.
func (s *Server) serverFeatures() uint64 {
	f := ServerFeatures | ClusterFeatures
	if s.core.Config().Storage != nil {
		f |= DurableFeatures
	}
	if s.cfg.PublishWindow > 0 {
		f |= wire.FeaturePublishPipeline
	}
	return f | wire.FeatureIdempotentProducer
}

// binaryPublishFlags are the frame flags a binary publish may carry.
const binaryPublishFlags = wire.FlagBinaryPublishBatch | wire.FlagBinaryPublishAcked | wire.FlagBinaryPublishKeyed |
	wire.FlagBinaryPublishIdempotent

// controlStream serves one client-opened stream: a bidirectional control
// stream (requests and answers) or, with out == nil, a unidirectional
// publish ingress stream (fire-and-forget publishes, no answers).
type controlStream struct {
	c   *connection
	srv *Server
	r   io.Reader
	ctx context.Context // ends with the connection or a failed write
	out *streamWriter   // nil on an ingress stream
	rd  readDeadliner   // the receive half, interrupted by kick

	// kicked is why the broker ended the stream from outside its loop (a
	// revocation, an expired token); nil while it runs.
	kicked atomic.Pointer[wire.Error]
	// forget removes the stream from the server's registry; nil until
	// auth succeeded.
	forget func()

	// Set by the auth frame. id is nil until auth succeeded.
	id          *auth.Identity
	token       string // the raw token, sent again with every forward (forward.go)
	clientFlags uint16
	features    uint64
	ackOnCommit bool
	// pipelined: the client offered FEATURE_PUBLISH_PIPELINE and was
	// granted a publish_window (pipeline.go).
	pipelined bool

	// widths are the publish widths declared on this stream, by stream
	// (publish_width.go); used by the loop's goroutine alone.
	widths map[core.StreamKey]uint32
	// durableAnswers are the goroutines answering requests to log-backed
	// caches once they are durable (cache.go); the stream's end waits for
	// them.
	durableAnswers gogroup.Group
	durable        durableWaiter // the answers durableAnswers waits for (cache.go)
	// ended is closed when the read loop ends, so waiting group polls
	// answer at once (group.go).
	ended chan struct{}
}

// loopEnd says how a request stream's read loop ended.
type loopEnd int

const (
	endClean   loopEnd = iota // EOF, drain, or the connection went
	endRefused                // the broker refused the stream; cancel the peer's sends
)

func (c *connection) serveControl(st transport.Stream) {
	defer c.requests.done()
	defer c.track(st)()
	ctx, cancel := context.WithCancelCause(c.ctx)
	defer cancel(nil)
	cs := &controlStream{c: c, srv: c.srv, r: &idleReader{r: st, c: c}, rd: st, ctx: ctx, ended: make(chan struct{})}
	cs.out = newStreamWriter(st, c.srv.cfg.MaxOwedAcks, c.srv.metrics.outAckDepth, cancel)
	defer cs.release()
	end := cs.loop()
	close(cs.ended)
	cs.durableAnswers.Close()
	cs.out.waitOwed(ctx)
	cs.out.stop()
	if end == endRefused {
		st.CancelRead(transport.StreamErrorCode(wire.CloseRefused))
	}
	st.Close()
}

func (c *connection) serveIngress(rs transport.ReceiveStream) {
	defer c.requests.done()
	defer c.track(rs)()
	cs := &controlStream{c: c, srv: c.srv, r: &idleReader{r: rs, c: c}, rd: rs, ctx: c.ctx}
	defer cs.release()
	if cs.loop() == endRefused {
		rs.CancelRead(transport.StreamErrorCode(wire.CloseRefused))
	}
}

// loop reads and handles frames until the stream ends or is refused.
func (cs *controlStream) loop() loopEnd {
	fr := wire.NewFrameReader(cs.r, cs.srv.cfg.MaxFrameBytes)
	for {
		betweenFrames(cs.r)
		// Owned frames: a binary publish keeps its payloads without a copy.
		f, err := fr.NextOwned()
		if err != nil {
			return cs.readFailed(err)
		}
		if !cs.handleFrame(f) {
			return endRefused
		}
	}
}

// readFailed answers a framing error, or the reason the stream was
// kicked; other read errors end quietly.
func (cs *controlStream) readFailed(err error) loopEnd {
	if e := cs.kicked.Load(); e != nil {
		cs.sendError(e, nil)
		return endRefused
	}
	switch {
	case errors.Is(err, wire.ErrFrameTooLarge), errors.Is(err, wire.ErrBadMagic), errors.Is(err, wire.ErrBadVersion):
		cs.sendError(wire.NewError(wire.CodeInvalidRequest, "%v", err), nil)
		return endRefused
	default:
		return endClean
	}
}

// handleFrame serves one frame; false means the stream is refused.
func (cs *controlStream) handleFrame(f wire.Frame) bool {
	if e := cs.kicked.Load(); e != nil {
		cs.sendError(e, nil)
		return false
	}
	if cs.id == nil {
		return cs.handleAuth(f)
	}
	if f.Flags != 0 {
		return cs.handleBinary(f)
	}
	msg, err := wire.ParseMessage(f.Payload)
	if err != nil {
		cs.replyBadRequest(f.Payload, asWireError(err))
		return true
	}
	if cs.out == nil {
		return cs.handleIngressMessage(msg)
	}
	switch m := msg.(type) {
	case *wire.Publish:
		cs.handleJSONPublish(m.TenantID, m.Namespace, m.Stream, m.Key, m.Shard, [][]byte{m.Payload}, m.RequestID, m.Ack, m)
	case *wire.PublishBatch:
		cs.handleJSONPublish(m.TenantID, m.Namespace, m.Stream, m.Key, m.Shard, m.Payloads, m.RequestID, m.Ack, m)
	case *wire.PublishIf:
		if cs.srv.serverFeatures()&wire.FeaturePublishConditional == 0 {
			return cs.handleUnknown(msg.MessageType(), f.Payload)
		}
		cs.handlePublishIf(m) // publish_if.go
	case *wire.Commit:
		if cs.srv.serverFeatures()&wire.FeatureAtomicCommit == 0 {
			return cs.handleUnknown(msg.MessageType(), f.Payload)
		}
		cs.handleCommit(m) // commit.go
	case *wire.StateGet:
		if cs.srv.serverFeatures()&wire.FeatureAtomicCommit == 0 {
			return cs.handleUnknown(msg.MessageType(), f.Payload)
		}
		cs.handleStateGet(m)
	case *wire.ProducerInit:
		cs.handleProducerInit(m) // idempotent.go
	case *wire.PublishIdempotent:
		cs.handlePublishIdempotent(m)
	case *wire.Subscribe:
		cs.answerSubscribe(cs.handleSubscribe(m))
	case *wire.StreamRead:
		if cs.srv.serverFeatures()&wire.FeatureStreamRead == 0 {
			return cs.handleUnknown(msg.MessageType(), f.Payload)
		}
		cs.handleStreamRead(m)
	case *wire.OffsetForTime:
		if cs.srv.serverFeatures()&wire.FeatureRecordTimestamps == 0 {
			return cs.handleUnknown(msg.MessageType(), f.Payload)
		}
		cs.handleOffsetForTime(m)
	case *wire.CachePut:
		cs.handleCachePut(m)
	case *wire.CacheGet:
		cs.handleCacheGet(m)
	case *wire.CacheDelete:
		cs.handleCacheDelete(m)
	case *wire.CachePutIf:
		cs.handleCachePutIf(m)
	case *wire.CacheDeleteIf:
		cs.handleCacheDeleteIf(m)
	case *wire.CacheGetVersioned:
		cs.handleCacheGetVersioned(m)
	case *wire.CacheWatch:
		cs.handleCacheWatch(m)
	case *wire.CounterAdd:
		if cs.srv.serverFeatures()&wire.FeatureCounters == 0 {
			return cs.handleUnknown(msg.MessageType(), f.Payload)
		}
		cs.handleCounterAdd(m)
	case *wire.CounterGet:
		if cs.srv.serverFeatures()&wire.FeatureCounters == 0 {
			return cs.handleUnknown(msg.MessageType(), f.Payload)
		}
		cs.handleCounterGet(m)
	case *wire.GroupPoll:
		if cs.srv.serverFeatures()&wire.FeatureConsumerGroup == 0 {
			return cs.handleUnknown(msg.MessageType(), f.Payload)
		}
		cs.handleGroupPoll(m) // group.go
	case *wire.GroupAck, *wire.GroupNack, *wire.GroupExtend, *wire.GroupDeadLetter, *wire.GroupDeadLetters,
		*wire.GroupDiscard, *wire.GroupRedrive, *wire.GroupSeek, *wire.GroupDescribe, *wire.GroupDelete:
		if cs.srv.serverFeatures()&wire.FeatureConsumerGroup == 0 {
			return cs.handleUnknown(msg.MessageType(), f.Payload)
		}
		cs.handleGroup(m)
	case *wire.StreamInfo:
		cs.handleStreamInfo(m)
	case *wire.CacheKeys:
		cs.handleCacheKeys(m)
	case *wire.Auth:
		cs.sendError(wire.NewError(wire.CodeInvalidRequest, "stream is already authenticated"), nil)
	default:
		if cs.handleClusterMessage(msg) {
			return true
		}
		return cs.handleUnknown(msg.MessageType(), f.Payload)
	}
	return true
}

// handleIngressMessage serves a JSON frame on an ingress stream: only
// publishes, never answered.
func (cs *controlStream) handleIngressMessage(msg wire.Message) bool {
	switch m := msg.(type) {
	case *wire.Publish:
		cs.handleJSONPublish(m.TenantID, m.Namespace, m.Stream, m.Key, m.Shard, [][]byte{m.Payload}, 0, wire.AckNone, m)
	case *wire.PublishBatch:
		cs.handleJSONPublish(m.TenantID, m.Namespace, m.Stream, m.Key, m.Shard, m.Payloads, 0, wire.AckNone, m)
	case *wire.PublishWidth:
		cs.handlePublishWidth(m)
	default:
		return false
	}
	return true
}

// handleUnknown answers a request type the broker does not serve:
// unsupported when the client offered FEATURE_UNSUPPORTED, otherwise the
// stream is refused.
func (cs *controlStream) handleUnknown(typ string, raw []byte) bool {
	if cs.features&wire.FeatureUnsupported == 0 {
		cs.sendError(wire.NewError(wire.CodeUnsupported, "unknown request type %q", typ), nil)
		return false
	}
	_, reqID := sniffRequest(raw)
	cs.sendMsg(&wire.Unsupported{RequestType: typ, RequestID: reqID})
	return true
}

// handleAuth serves the first frame, which must be a JSON auth.
func (cs *controlStream) handleAuth(f wire.Frame) bool {
	var m *wire.Auth
	if f.Flags == 0 {
		if msg, err := wire.ParseMessage(f.Payload); err == nil {
			m, _ = msg.(*wire.Auth)
		}
	}
	if m == nil {
		cs.srv.metrics.authFailures.Inc()
		cs.sendError(wire.NewError(wire.CodeUnauthorized, "auth required"), nil)
		return false
	}
	cs.clientFlags, cs.features = m.ClientFlags, m.Features
	id, err := cs.srv.verifier.Verify(cs.ctx, m.Token, m.TenantID)
	if err != nil {
		cs.srv.metrics.authFailures.Inc()
		e := asWireError(err)
		if e.Code != wire.CodeUnauthorized && e.Code != wire.CodeRevoked {
			e = wire.NewError(wire.CodeUnauthorized, "%s", e.Message)
		}
		cs.sendError(e, nil)
		return false
	}
	if e := cs.srv.revs.Check(id); e != nil {
		cs.srv.metrics.authFailures.Inc()
		cs.sendError(e, nil)
		return false
	}
	cs.id, cs.token = id, m.Token
	cs.forget = cs.srv.streams.add(id, cs.kick)
	cs.ackOnCommit = cs.srv.cfg.AckOnCommit || m.Features&wire.FeatureAckOnCommit != 0
	cs.features &= cs.srv.serverFeatures()
	cs.sendMsg(&wire.AuthOK{ServerFlags: ServerFlags, ServerFeatures: cs.srv.serverFeatures(), PublishWindow: cs.grantWindow()})
	return true
}

// kick ends the stream from outside its loop: the loop's read is
// interrupted, and the loop answers err and refuses the stream (cancelling
// the peer's sends). A read that a deadline cannot interrupt is cancelled
// instead, so the stream ends all the same, without the answer. It never
// blocks.
func (cs *controlStream) kick(err *wire.Error) {
	if !cs.kicked.CompareAndSwap(nil, err) {
		return
	}
	if e := cs.rd.SetReadDeadline(time.Now()); e != nil {
		cs.rd.CancelRead(transport.StreamErrorCode(wire.CloseRefused))
	}
}

// release removes the stream from the server's registry.
func (cs *controlStream) release() {
	if cs.forget != nil {
		cs.forget()
	}
}
