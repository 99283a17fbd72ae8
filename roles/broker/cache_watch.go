package broker

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// handleCacheWatch starts a cache watch: it authorizes cache read on the
// key (or on prefix+"*" for a prefix watch), takes a place in the
// connection's subscription limit, starts the core watch, answers
// cache_watch_ok, opens the event stream with its hello and hands it to a
// watchWriter.
func (cs *controlStream) handleCacheWatch(m *wire.CacheWatch) {
	resource := m.Key
	if m.Prefix {
		resource += "*"
	}
	c, ok := cs.cacheFor(m, auth.ActionCacheRead, m.TenantID, m.Namespace, m.Cache, resource, m.RequestID)
	if !ok {
		return
	}
	if !cs.c.reserveSub() {
		cs.sendError(cs.subscriptionLimitError(), &m.RequestID)
		return
	}
	cw, info, err := c.Watch(core.CacheWatchOptions{Key: m.Key, Prefix: m.Prefix, Retained: m.Retained, From: m.FromOffset})
	if err != nil {
		cs.c.releaseSub()
		cs.sendError(asWireError(err), &m.RequestID)
		return
	}
	w := &watchWriter{c: cs.c, cw: cw, key: c.Key(), withCodes: cs.withCodes(), kickC: make(chan struct{})}
	w.id = cs.c.claimWatchID(m.WatchID, cw.ID())
	cs.sendMsg(&wire.CacheWatchOK{RequestID: m.RequestID, WatchID: w.id, Offset: info.Next, Resnapshot: info.Resnapshot})
	es, e := cs.openEventStream(w.id)
	if e != nil {
		// The answer is out; without its event stream the client learns
		// of the failure from the connection, which is failing too.
		w.release()
		return
	}
	w.es = es
	w.start(cs.id)
}

// subscriptionLimitError refuses a subscription or watch past the
// connection's limit.
func (cs *controlStream) subscriptionLimitError() *wire.Error {
	return wire.NewError(wire.CodeOverloaded, "too many subscriptions on this connection (limit %d)", cs.srv.cfg.MaxSubscriptionsPerConn).
		WithDetail("reason", "subscription_limit")
}

// claimWatchID picks a watch's id: the client's when given and not in use
// on the connection, else fresh (or the next free id after it).
func (c *connection) claimWatchID(want *uint64, fresh uint64) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watchIDs == nil {
		c.watchIDs = map[uint64]struct{}{}
	}
	id := fresh
	if want != nil {
		if _, used := c.watchIDs[*want]; !used {
			id = *want
		}
	}
	for {
		if _, used := c.watchIDs[id]; !used {
			break
		}
		id++
	}
	c.watchIDs[id] = struct{}{}
	return id
}

func (c *connection) releaseWatchID(id uint64) {
	c.mu.Lock()
	delete(c.watchIDs, id)
	c.mu.Unlock()
}

// watchWriter writes one cache watch's event stream from its own
// goroutine: it drains the core watch when it signals, coalescing the
// shared change frames into writes of at most EventBatchMaxBytes, and
// ends the stream with the watch's last frame (cache_watch_lagged or an
// error) and a FIN. A client that stops reading stalls only this watch;
// the core watch then ends lagged, and what was queued before is still
// written first.
type watchWriter struct {
	c         *connection
	es        *quic.SendStream
	cw        *core.CacheWatch
	id        uint64
	key       core.CacheKey
	withCodes bool
	buf       []byte

	kicked atomic.Pointer[wire.Error] // why the broker ended the watch; nil while it runs
	kickC  chan struct{}              // closed on the first kick
}

// start runs the writer; the connection's writers tracker owns it.
func (w *watchWriter) start(who *auth.Identity) {
	w.c.writers.add(1)
	forget := w.c.srv.streams.add(who, w.kick)
	go func() {
		defer w.c.writers.done()
		defer w.release()
		defer forget()
		w.run()
	}()
}

// release ends the core watch and gives back what the watch held.
func (w *watchWriter) release() {
	w.cw.Close()
	w.c.releaseWatchID(w.id)
	w.c.releaseSub()
}

// kick ends the watch from outside (revocation): its last frame is err.
// It never blocks; a write stalled by flow control gives up after
// endWriteTimeout.
func (w *watchWriter) kick(err *wire.Error) {
	if w.kicked.CompareAndSwap(nil, err) {
		w.es.SetWriteDeadline(time.Now().Add(endWriteTimeout))
		close(w.kickC)
	}
}

func (w *watchWriter) run() {
	flushC := w.c.flushCtx.Done()
	for {
		end, err := w.writeReady()
		if err != nil {
			w.es.CancelWrite(StreamCodeShutdown)
			return
		}
		if end != nil {
			w.end(end)
			return
		}
		select {
		case <-w.cw.Ready():
		case <-w.kickC:
			w.end(w.kicked.Load())
			return
		case <-w.es.Context().Done(): // the client stopped reading
			w.es.CancelWrite(StreamCodeShutdown)
			return
		case <-flushC:
			if w.c.ctx.Err() != nil {
				w.es.CancelWrite(StreamCodeShutdown)
				return
			}
			// Draining: write what is ready, then end with draining.
			flushC = nil
			if end, err := w.writeReady(); err == nil && end == nil {
				w.end(wire.NewError(wire.CodeDraining, "broker is shutting down"))
			} else if err == nil {
				w.end(end)
			}
			return
		}
	}
}

// writeReady writes every item the watch has ready, several frames per
// write. It returns the watch's end when it reached it.
func (w *watchWriter) writeReady() (end error, err error) {
	limit := w.c.srv.cfg.EventBatchMaxBytes
	w.buf = w.buf[:0]
	n := 0
	for end == nil {
		it, ok := w.cw.Next()
		if !ok {
			break
		}
		switch {
		case it.Change != nil:
			w.buf = append(w.buf, it.Change.Frame()...)
			n++
		case it.State != nil:
			w.buf, _ = wire.AppendMessageFrame(w.buf, &wire.CacheWatchState{Offset: it.State.Offset, Count: it.State.Count})
		default:
			end = it.End
		}
		if len(w.buf) >= limit {
			if err := w.write(n); err != nil {
				return nil, err
			}
			n = 0
		}
	}
	if len(w.buf) > 0 {
		if err := w.write(n); err != nil {
			return nil, err
		}
	}
	if cap(w.buf) > 4*limit {
		w.buf = nil
	}
	return end, nil
}

func (w *watchWriter) write(changes int) error {
	_, err := w.es.Write(w.buf)
	w.buf = w.buf[:0]
	deliveredMessages.Add(changes)
	return err
}

// end writes the watch's last frame for why it ended and finishes the
// stream.
func (w *watchWriter) end(why error) {
	var last wire.Message
	var lag *core.LaggedError
	var we *wire.Error
	switch {
	case errors.As(why, &lag):
		last = &wire.CacheWatchLagged{WatchID: w.id, ResumeFrom: lag.ResumeFrom}
	case errors.Is(why, core.ErrCacheDeleted):
		last = wire.NewError(wire.CodeNotFound, "cache deleted: tenant=%s namespace=%s cache=%s", w.key.Tenant, w.key.Namespace, w.key.Cache).
			WithDetail("reason", "cache_deleted").ErrorMessage(w.withCodes)
	case errors.As(why, &we):
		last = we.ErrorMessage(w.withCodes)
	default: // the broker core closed
		last = wire.NewError(wire.CodeDraining, "broker is shutting down").ErrorMessage(w.withCodes)
	}
	b, _ := wire.AppendMessageFrame(nil, last)
	w.es.SetWriteDeadline(time.Now().Add(endWriteTimeout))
	if _, err := w.es.Write(b); err != nil {
		w.es.CancelWrite(StreamCodeShutdown)
		return
	}
	w.es.Close()
}
