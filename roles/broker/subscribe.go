package broker

import (
	"context"
	"errors"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// handleSubscribe registers a subscription: it authorizes, resolves the
// shard, takes a place in the connection's limit, subscribes in the core,
// opens the event stream and writes its hello, answers subscribed, and
// hands the event stream to a writer goroutine.
func (cs *controlStream) handleSubscribe(m *wire.Subscribe) *wire.Error {
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
	sh, err := st.Shard(idx)
	if err != nil {
		return asWireError(err)
	}
	if !cs.c.reserveSub() {
		return wire.NewError(wire.CodeOverloaded, "too many subscriptions on this connection (limit %d)", cs.srv.cfg.MaxSubscriptionsPerConn).
			WithDetail("reason", "subscription_limit")
	}
	opts := core.SubscribeOptions{}
	if m.Start != nil {
		opts.Start = *m.Start
	}
	sub, err := sh.Subscribe(opts)
	if err != nil {
		cs.c.releaseSub()
		return asWireError(err)
	}
	id := sub.ID()
	if m.SubscriptionID != nil {
		id = *m.SubscriptionID
	}
	es, e := cs.openEventStream(id)
	if e != nil {
		sub.Close()
		cs.c.releaseSub()
		return e
	}
	cs.sendMsg(&wire.Subscribed{SubscriptionID: id})
	w := &eventWriter{c: cs.c, es: es, sub: sub, key: st.Key(), flags: cs.eventFlags(), withCodes: cs.withCodes()}
	subscriptionsGauge.Inc()
	cs.c.writers.add(1)
	go w.run()
	return nil
}

// openEventStream opens the subscription's unidirectional stream and
// writes event_stream_hello on it.
func (cs *controlStream) openEventStream(id uint64) (*quic.SendStream, *wire.Error) {
	es, err := cs.c.qc.OpenUniStreamSync(cs.ctx)
	if err != nil {
		return nil, wire.NewError(wire.CodeOverloaded, "cannot open the event stream: %v", err)
	}
	hello, _ := wire.AppendMessageFrame(nil, &wire.EventStreamHello{SubscriptionID: id})
	if _, err := es.Write(hello); err != nil {
		es.CancelWrite(StreamCodeRefused)
		return nil, wire.NewError(wire.CodeOverloaded, "cannot write the event stream: %v", err)
	}
	return es, nil
}

// endWriteTimeout bounds the write of the error that ends an event stream.
const endWriteTimeout = 5 * time.Second

// eventFlags picks the event frame encoding this client can read: shared
// binary batches when offered (offsets only on durable streams, which this
// broker does not serve yet), JSON event_batch otherwise.
func (cs *controlStream) eventFlags() uint16 {
	if cs.clientFlags&wire.FlagBinaryEventBatchShared != 0 {
		return wire.FlagBinaryEventBatchShared
	}
	return 0
}

// eventWriter is the only goroutine writing one subscription's event
// stream. A write blocked by the client's flow control stalls only this
// subscription; the core queue's policy decides what happens upstream.
type eventWriter struct {
	c         *connection
	es        *quic.SendStream
	sub       *core.Subscriber
	key       core.StreamKey
	flags     uint16
	withCodes bool
	buf       []byte
}

func (w *eventWriter) run() {
	defer w.c.writers.done()
	defer subscriptionsGauge.Dec()
	defer w.c.releaseSub()
	defer w.sub.Close()
	ctx, cancel := context.WithCancel(w.es.Context())
	defer cancel()
	stop := context.AfterFunc(w.c.flushCtx, cancel)
	defer stop()
	for {
		env, err := w.sub.Next(ctx)
		if err != nil {
			w.end(err)
			return
		}
		if err := w.writeBatch(env); err != nil {
			return
		}
	}
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
		deliveredMessages.Add(n)
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
	deliveredMessages.Add(n)
	if cap(w.buf) > 4*cfg.EventBatchMaxBytes {
		w.buf = nil
	}
	return nil
}

// flush writes what is still queued and finishes the event stream; the
// connection's drain asks for it before closing the connection.
func (w *eventWriter) flush() {
	for {
		env, ok := w.sub.TryNext()
		if !ok {
			w.es.Close()
			return
		}
		if w.writeBatch(env) != nil {
			return
		}
	}
}

// end closes the event stream: flushed when the connection is draining,
// with an error frame when the stream was deleted, reset otherwise.
func (w *eventWriter) end(err error) {
	if w.c.flushCtx.Err() != nil && w.c.ctx.Err() == nil && w.es.Context().Err() == nil {
		w.flush()
		return
	}
	if !errors.Is(err, core.ErrStreamDeleted) {
		w.es.CancelWrite(StreamCodeShutdown)
		return
	}
	e := wire.NewError(wire.CodeNotFound, "stream deleted: tenant=%s namespace=%s stream=%s", w.key.Tenant, w.key.Namespace, w.key.Stream)
	b, _ := wire.AppendMessageFrame(nil, e.ErrorMessage(w.withCodes))
	w.es.SetWriteDeadline(time.Now().Add(endWriteTimeout))
	if _, err := w.es.Write(b); err != nil {
		w.es.CancelWrite(StreamCodeShutdown)
		return
	}
	w.es.Close()
}
