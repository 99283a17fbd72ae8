package broker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// handleSubscribe registers a subscription: it authorizes, resolves the
// shard, takes a place in the connection's limit, subscribes in the core,
// opens the event stream and writes its hello, answers subscribed, and
// hands the event stream to its writer.
func (cs *controlStream) handleSubscribe(m *wire.Subscribe) error {
	if err := m.Validate(); err != nil {
		return asWireError(err)
	}
	if e := cs.authorize(m.TenantID, auth.ActionStreamSubscribe, auth.StreamResource(m.TenantID, m.Namespace, m.Stream)); e != nil {
		return e
	}
	st, e := cs.srv.resolveStream(m.TenantID, m.Namespace, m.Stream)
	if e != nil {
		return e
	}
	var idx uint32
	if m.Shard != nil {
		idx = *m.Shard
	}
	if err := wire.CheckShard("stream", m.Stream, idx, st.Shards()); err != nil {
		return err
	}
	if e := cs.srv.routeRefusal(wire.ShardKindStream, m.TenantID, m.Namespace, m.Stream, idx); e != nil {
		return e
	}
	sh, err := cs.srv.servedShard(st, idx)
	if err != nil {
		return asWireError(err)
	}
	if !cs.c.reserveSub() {
		return cs.subscriptionLimitError()
	}
	durable := sh.Durable()
	w := &eventWriter{streamWriterState: streamWriterState{c: cs.c}}
	opts := core.SubscribeOptions{EndOnLag: durable && cs.features&wire.FeatureSubscriptionLagged != 0, Notify: w.wake}
	if m.Start != nil {
		opts.Start = *m.Start
	}
	sub, err := sh.Subscribe(opts)
	if err != nil {
		cs.c.releaseSub()
		return err
	}
	id := cs.c.claimStreamID(m.SubscriptionID, sub.ID())
	es, e := cs.openEventStream(id)
	if e != nil {
		sub.Close()
		cs.c.releaseStreamID(id)
		cs.c.releaseSub()
		return e
	}
	ok := &wire.Subscribed{SubscriptionID: id}
	if durable && m.Start != nil && cs.clientFlags&wire.FlagEventBatchOffsets != 0 {
		start, live := sub.StartOffset(), sub.LiveOffset()
		ok.StartOffset, ok.LiveOffset = &start, &live
	}
	cs.sendMsg(ok)
	w.es, w.sub, w.id, w.key, w.flags = es, sub, id, st.Key(), cs.eventFlags(durable)
	w.withCodes, w.lagged, w.who = cs.withCodes(), opts.EndOnLag, cs.id
	w.shardMoved = cs.features&wire.FeatureShardMoved != 0
	w.delivered = cs.srv.metrics.deliveries.acquire(sh)
	w.start()
	return nil
}

// openEventStream opens the subscription's unidirectional stream and
// writes event_stream_hello on it.
func (cs *controlStream) openEventStream(id uint64) (transport.SendStream, *wire.Error) {
	es, err := cs.c.qc.OpenUniStreamSync(cs.ctx)
	if err != nil {
		return nil, wire.NewError(wire.CodeOverloaded, "cannot open the event stream: %v", err)
	}
	hello, err := wire.AppendMessageFrame(nil, &wire.EventStreamHello{SubscriptionID: id})
	if err != nil {
		es.CancelWrite(transport.StreamErrorCode(wire.CloseRefused))
		return nil, wire.NewError(wire.CodeInternal, "cannot encode the event stream hello: %v", err)
	}
	if _, err := es.Write(hello); err != nil {
		es.CancelWrite(transport.StreamErrorCode(wire.CloseRefused))
		return nil, wire.NewError(wire.CodeOverloaded, "cannot write the event stream: %v", err)
	}
	return es, nil
}

// endWriteTimeout bounds the write of the error that ends an event stream.
const endWriteTimeout = 5 * time.Second

// answerSubscribe sends a refused subscribe's answer: a cursor error as
// its own message, anything else as an error.
func (cs *controlStream) answerSubscribe(err error) {
	if err == nil {
		return
	}
	var ce *wire.SubscribeCursorError
	if errors.As(err, &ce) {
		cs.sendMsg(ce)
		return
	}
	cs.sendRefusal(asWireError(err), nil)
}

// eventFlags picks the event frame encoding this client can read: shared
// binary batches when offered, JSON event_batch otherwise. A durable
// stream adds what the client offered of offsets, skip counts, record
// times and publishers (JSON batches always carry offsets there); an
// in-memory stream has no offsets or times to send, only publishers.
func (cs *controlStream) eventFlags(durable bool) uint16 {
	options := wire.FlagEventBatchPublisher
	if durable {
		options = wire.EventBatchOptionFlags
	}
	if cs.clientFlags&wire.FlagBinaryEventBatchShared != 0 {
		return wire.FlagBinaryEventBatchShared | cs.clientFlags&options
	}
	if durable {
		return wire.FlagEventBatchOffsets | wire.FlagEventBatchSkipped
	}
	return 0
}

// eventWriter writes one subscription's event stream. It runs only while
// there is work: the core queue's notify, a kick, the connection's drain
// or the stream's end wakes it, and at most one goroutine writes at a
// time (drain, guarded by running), so an idle subscription costs no
// goroutine. A write blocked by the client's flow control stalls only this
// subscription; the core queue's policy decides what happens upstream.
type eventWriter struct {
	streamWriterState
	sub       *core.Subscriber
	id        uint64
	key       core.StreamKey
	flags     uint16
	withCodes bool
	lagged    bool // the client reads subscription_lagged
	// shardMoved: the client reads shard_moved (FEATURE_SHARD_MOVED).
	shardMoved bool
	buf        []byte
	broken     bool // a write failed, perhaps midway through a frame
	replayed   bool // the log replay is done; drain only
	// delivered counts the events written, for stream_info; released by
	// finish.
	delivered *deliveryCount
}

// start arms the writer and starts a first drain for what is already
// queued.
func (w *eventWriter) start() {
	w.c.srv.metrics.subscriptions.Inc()
	w.arm(w)
}

// streamWriterState is what a subscription's and a cache watch's event
// writers share: their stream, whose it is, why they must stop, and the
// flags that give the stream to one goroutine at a time.
type streamWriterState struct {
	c   *connection
	es  transport.SendStream
	who *auth.Identity

	kicked     atomic.Pointer[wire.Error] // why the broker ended the stream; nil while it runs
	streamDone atomic.Bool                // the stream's context ended (the client or the connection)
	armed      atomic.Bool                // arm has run: wakes may hand the stream on
	running    atomic.Bool                // a goroutine, or the pump's queue, owns the stream
	owner      waker                      // the writer, woken by kick
	cleanup    []func()                   // undone by disarm; set by arm
}

// arm makes w live: it joins the connection's writers and the principal's
// live streams, gets woken by the connection's drain and the stream's end,
// and is woken once for what is already there.
func (s *streamWriterState) arm(w waker) {
	s.owner = w
	s.c.writers.add(1)
	stop := context.AfterFunc(s.es.Context(), func() {
		s.streamDone.Store(true)
		w.wake()
	})
	s.cleanup = []func(){s.c.srv.streams.add(s.who, s.kick), s.c.addWriter(w), func() { stop() }}
	s.armed.Store(true)
	w.wake()
}

// disarm undoes arm, then runs release (what the writer held) before
// leaving the connection's writers; called once, by the goroutine that
// ended the writer.
func (s *streamWriterState) disarm(release func()) {
	for _, undo := range s.cleanup {
		undo()
	}
	release()
	s.c.writers.done()
}

// claim reports whether a wake may hand the stream on: the writer is armed
// and nothing owns the stream yet.
func (s *streamWriterState) claim() bool {
	return s.armed.Load() && s.running.CompareAndSwap(false, true)
}

// kick ends the stream from outside (revocation): the writer writes err
// as its last frame. A write stalled by the client's flow control gives
// up after endWriteTimeout.
func (s *streamWriterState) kick(err *wire.Error) {
	if s.kicked.CompareAndSwap(nil, err) {
		if derr := s.es.SetWriteDeadline(time.Now().Add(endWriteTimeout)); derr != nil {
			// Without a deadline a stalled write could hold the writer
			// for good: reset the stream, which ends the write.
			s.c.srv.log.Warn("cannot bound a kicked stream's writes; resetting it", "err", derr)
			s.es.CancelWrite(transport.StreamErrorCode(wire.CloseShutdown))
		}
		s.owner.wake()
	}
}

// stopping reports whether the writer must end whatever is ready: the
// broker kicked it, the connection is flushing, or the stream ended.
func (s *streamWriterState) stopping() bool {
	return s.kicked.Load() != nil || s.c.flushing.Load() || s.streamDone.Load()
}

// wake starts a drain, on a goroutine the connection owns, unless one is
// running or the writer is not armed yet. It never blocks: the core calls
// it from publishers.
func (w *eventWriter) wake() {
	if w.claim() {
		w.c.spawn(w.drain)
	}
}

// reason is why the writer stops: the kick when there was one, else err.
func (w *eventWriter) reason(err error) error {
	if k := w.kicked.Load(); k != nil {
		return k
	}
	return err
}

// drain writes until nothing is left to do, then gives the stream up,
// unless more work arrived meanwhile. It returns for good once the
// subscription has ended.
func (w *eventWriter) drain() {
	drainWhile(&w.running, w.step, w.pending, w.finish)
}

// drainWhile runs a writer that holds running: step until it reports
// the end (then finish), or until there is nothing pending that a wake
// has not claimed meanwhile (then the writer is given up).
func drainWhile(running *atomic.Bool, step, pending func() bool, finish func()) {
	for {
		if step() {
			finish()
			return
		}
		running.Store(false)
		if !pending() || !running.CompareAndSwap(false, true) {
			return
		}
	}
}

// pending reports whether a drain has anything to do.
func (w *eventWriter) pending() bool {
	items, _ := w.sub.Depth()
	return items > 0 || w.sub.Err() != nil || w.stopping()
}

// step writes the log replay (once), then everything queued; it reports
// whether the subscription is over (and its stream ended).
func (w *eventWriter) step() bool {
	if !w.replayed {
		w.replayed = true
		if err := w.replay(); err != nil {
			if serr := w.sub.Err(); serr != nil {
				err = serr // the shard closed under the replay
			}
			w.end(w.reason(err))
			return true
		}
	}
	for !w.stopping() {
		env, ok := w.sub.TryNext()
		if !ok {
			break
		}
		if err := w.writeBatch(env); err != nil {
			if w.kicked.Load() != nil {
				w.es.CancelWrite(transport.StreamErrorCode(wire.CloseRefused))
			}
			return true
		}
	}
	if err := w.sub.Err(); err != nil || w.stopping() {
		if err == nil {
			err = context.Canceled
		}
		w.end(w.reason(err))
		return true
	}
	return false
}

// finish releases what the subscription held; called once, by the drain
// that ended it.
func (w *eventWriter) finish() {
	w.disarm(func() {
		w.sub.Close()
		w.c.releaseStreamID(w.id)
		w.c.releaseSub()
		w.c.srv.metrics.subscriptions.Dec()
		w.c.srv.metrics.deliveries.release(w.sub.Shard())
	})
}

// writeBatch writes env and whatever else is queued, up to the batch
// limits, in one write.
func (w *eventWriter) writeBatch(env *core.Envelope) error {
	cfg := &w.c.srv.cfg
	first := env.Frame(w.flags)
	n := len(env.Payloads)
	var more *core.Envelope
	ok := false
	if len(first) < cfg.EventBatchMaxBytes && cfg.EventBatchMaxEvents > 1 {
		more, ok = w.sub.TryNext()
	}
	if !ok {
		// One frame: hand the shared encoding to QUIC as it is.
		if _, err := w.es.Write(first); err != nil {
			return err
		}
		w.c.srv.metrics.deliveredMessages.Add(n)
		w.delivered.n.Add(uint64(n))
		return nil
	}
	// Several small frames: coalesce them into one write.
	w.buf = append(append(w.buf[:0], first...), more.Frame(w.flags)...)
	n += len(more.Payloads)
	for k := 2; k < cfg.EventBatchMaxEvents && len(w.buf) < cfg.EventBatchMaxBytes; k++ {
		more, ok := w.sub.TryNext()
		if !ok {
			break
		}
		w.buf = append(w.buf, more.Frame(w.flags)...)
		n += len(more.Payloads)
	}
	if _, err := w.es.Write(w.buf); err != nil {
		return err
	}
	w.c.srv.metrics.deliveredMessages.Add(n)
	w.delivered.n.Add(uint64(n))
	if cap(w.buf) > 4*cfg.EventBatchMaxBytes {
		w.buf = nil
	}
	return nil
}

// flush writes what is still queued, then ends the event stream with a
// draining error frame and FIN, as a cache watch ends; the connection's
// drain asks for it before closing the connection.
func (w *eventWriter) flush() {
	for {
		env, ok := w.sub.TryNext()
		if !ok {
			break
		}
		if w.writeBatch(env) != nil {
			return
		}
	}
	last := wire.NewError(wire.CodeDraining, "broker is shutting down").ErrorMessage(w.withCodes)
	if err := writeLast(w.es, last); err != nil {
		w.c.srv.log.Debug("subscription ended without its draining frame", "subscription", w.id, "err", err)
	}
}

// end closes the event stream: flushed and ended with a draining frame
// when the connection is draining, with an error frame when the stream
// was deleted, reset otherwise.
func (w *eventWriter) end(err error) {
	if w.kicked.Load() == nil && w.c.flushing.Load() && w.c.ctx.Err() == nil && w.es.Context().Err() == nil {
		w.flush()
		return
	}
	if w.broken {
		w.es.CancelWrite(transport.StreamErrorCode(wire.CloseShutdown))
		return
	}
	var last wire.Message
	var lag *core.LaggedError
	var we *wire.Error
	if m, ok := movedFrame(err, w.id, w.shardMoved, w.withCodes); ok {
		last = m
	}
	switch {
	case last != nil:
	case errors.As(err, &lag) && w.lagged:
		last = &wire.SubscriptionLagged{SubscriptionID: w.id, ResumeFrom: lag.ResumeFrom}
	case errors.Is(err, core.ErrStreamDeleted):
		e := wire.NewError(wire.CodeNotFound, "stream deleted: tenant=%s namespace=%s stream=%s", w.key.Tenant, w.key.Namespace, w.key.Stream).
			WithDetail(wire.DetailReason, wire.ReasonStreamDeleted)
		last = e.ErrorMessage(w.withCodes)
	case errors.As(err, &we):
		last = we.ErrorMessage(w.withCodes)
	default:
		w.es.CancelWrite(transport.StreamErrorCode(wire.CloseShutdown))
		return
	}
	if err := writeLast(w.es, last); err != nil {
		w.c.srv.log.Debug("subscription ended without its last frame", "subscription", w.id, "err", err)
	}
}

// lastWriter is the send half of an event stream, as writeLast uses it.
type lastWriter interface {
	Write([]byte) (int, error)
	SetWriteDeadline(time.Time) error
	Close() error
	CancelWrite(transport.StreamErrorCode)
}

// writeLast writes an event stream's last frame and finishes the stream
// (FIN), giving a write stalled by the client's flow control
// endWriteTimeout. When the frame cannot be encoded, the deadline cannot
// be set (the write could then stall for good) or the write fails, the
// stream is reset instead and the error returned.
func writeLast(es lastWriter, last wire.Message) error {
	b, err := wire.AppendMessageFrame(nil, last)
	if err != nil {
		es.CancelWrite(transport.StreamErrorCode(wire.CloseShutdown))
		return fmt.Errorf("encode the event stream's last frame: %w", err)
	}
	if err := es.SetWriteDeadline(time.Now().Add(endWriteTimeout)); err != nil {
		es.CancelWrite(transport.StreamErrorCode(wire.CloseShutdown))
		return fmt.Errorf("bound the event stream's last write: %w", err)
	}
	if _, err := es.Write(b); err != nil {
		es.CancelWrite(transport.StreamErrorCode(wire.CloseShutdown))
		return fmt.Errorf("write the event stream's last frame: %w", err)
	}
	return es.Close()
}

// readPageBytes bounds the payload bytes of one page read from a log, for
// stream_read and for a subscription catching up.
const readPageBytes = 4 << 20

// replay writes the part of a durable subscription's history that only
// the log still holds, one page in memory at a time, before the writer
// turns to its queue (which holds the rest, from the replay ring on).
// Retention overtaking the reader ends the subscription as lagged at the
// first record it could not read, or with a too_old error for a client
// that does not read subscription_lagged.
func (w *eventWriter) replay() error {
	from, to := w.sub.Replay()
	sh := w.sub.Shard()
	var skipped uint64 // records left out at the end of the last page
	for from < to {
		recs, next, err := sh.Read(from, to, w.c.srv.cfg.MaxRecordsPerRead, readPageBytes)
		var ce *wire.SubscribeCursorError
		if errors.As(err, &ce) {
			if w.lagged {
				return &core.LaggedError{ResumeFrom: from}
			}
			return wire.NewError(wire.CodeInvalidRequest, "retention removed offset %d while the subscription was reading it", from).
				WithDetail("reason", string(wire.CursorTooOld)).WithDetail("available", ce.Available)
		}
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		w.buf = w.buf[:0]
		var envs []*core.Envelope
		envs, skipped = sh.RecordEnvelopesAfter(recs, skipped)
		for _, e := range envs {
			w.buf = append(w.buf, e.Frame(w.flags)...)
		}
		if _, err := w.es.Write(w.buf); err != nil {
			w.broken = true
			return err
		}
		w.c.srv.metrics.deliveredMessages.Add(len(recs))
		w.delivered.n.Add(uint64(len(recs)))
		from = next
	}
	if cap(w.buf) > 4*w.c.srv.cfg.EventBatchMaxBytes {
		w.buf = nil
	}
	return nil
}
