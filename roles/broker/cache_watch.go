package broker

import (
	"errors"
	"sync"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// handleCacheWatch starts a cache watch: it authorizes cache read on the
// key (or on prefix+"*" for a prefix watch), takes a place in the
// connection's subscription limit, starts the core watch, opens the event
// stream with its hello, answers cache_watch_ok and hands the stream to a
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
	shards := c.Shards()
	if e := cs.srv.watchRoute(m, shards); e != nil {
		cs.sendRefusal(e, &m.RequestID)
		return
	}
	if !cs.c.reserveSub() {
		cs.sendError(cs.subscriptionLimitError(), &m.RequestID)
		return
	}
	w := &watchWriter{streamWriterState: streamWriterState{c: cs.c, who: cs.id}, key: c.Key(), withCodes: cs.withCodes(),
		shardMoved: cs.features&wire.FeatureShardMoved != 0}
	cw, info, err := c.Watch(core.CacheWatchOptions{Key: m.Key, Prefix: m.Prefix, Retained: m.Retained, From: m.FromOffset,
		Shard: m.Shard, Shards: shards, Notify: w.wake})
	if err != nil {
		cs.c.releaseSub()
		cs.sendError(asWireError(err), &m.RequestID)
		return
	}
	w.cw = cw
	w.id = cs.c.claimStreamID(m.WatchID, cw.ID())
	es, e := cs.openEventStream(w.id)
	if e != nil {
		w.release()
		cs.sendError(e, &m.RequestID)
		return
	}
	cs.sendMsg(&wire.CacheWatchOK{RequestID: m.RequestID, WatchID: w.id, Offset: info.Next, Resnapshot: info.Resnapshot})
	w.es = es
	w.start()
}

// subscriptionLimitError refuses a subscription or watch past the
// connection's limit.
func (cs *controlStream) subscriptionLimitError() *wire.Error {
	return wire.NewError(wire.CodeOverloaded, "too many subscriptions on this connection (limit %d)", cs.srv.cfg.MaxSubscriptionsPerConn).
		WithDetail("reason", "subscription_limit")
}

// claimStreamID picks the id of a subscription's or watch's event stream:
// the client's when given and not in use on the connection, else fresh (or
// the next free id after it).
func (c *connection) claimStreamID(want *uint64, fresh uint64) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.streamIDs == nil {
		c.streamIDs = map[uint64]struct{}{}
	}
	id := fresh
	if want != nil {
		if _, used := c.streamIDs[*want]; !used {
			id = *want
		}
	}
	for {
		if _, used := c.streamIDs[id]; !used {
			break
		}
		id++
	}
	c.streamIDs[id] = struct{}{}
	return id
}

func (c *connection) releaseStreamID(id uint64) {
	c.mu.Lock()
	delete(c.streamIDs, id)
	c.mu.Unlock()
}

// watchPump writes the cache watches of one connection, one goroutine at
// a time, started only while some watch has work. A change fanned out to
// many watches of the connection is then written to all their streams in
// one pass, and QUIC packs the frames of many streams into each packet: a
// goroutine per watch would hand the connection's send loop one frame at
// a time, one packet each. The pump never waits on a write: one that the
// client's flow control would hold up is handed, unwritten, to a goroutine
// of the watch's own until it has caught up, so it never holds up the
// others.
type watchPump struct {
	mu      sync.Mutex
	queue   []*watchWriter
	running bool
}

// add queues w, which has work, and starts the pump, on a goroutine w's
// connection owns, unless it runs.
func (p *watchPump) add(w *watchWriter) {
	p.mu.Lock()
	p.queue = append(p.queue, w)
	start := !p.running
	p.running = true
	p.mu.Unlock()
	if start {
		w.c.spawn(p.run)
	}
}

func (p *watchPump) run() {
	var batch []*watchWriter
	for {
		p.mu.Lock()
		if len(p.queue) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		batch, p.queue = p.queue, batch[:0]
		p.mu.Unlock()
		for i, w := range batch {
			w.pumpStep()
			batch[i] = nil
		}
	}
}

// watchWriter writes one cache watch's event stream, coalescing the
// shared change frames into writes of at most EventBatchMaxBytes, and
// ends it with the watch's last frame (cache_watch_lagged or an error)
// and a FIN. It runs only while there is work: the core watch's notify,
// a kick, the connection's drain or the stream's end wakes it onto the
// connection's pump; at most one goroutine owns it at a time (running),
// so an idle watch costs no goroutine. A client that stops reading stalls
// only this watch; the core watch then ends lagged, and what was queued
// before is still written first.
type watchWriter struct {
	streamWriterState
	cw        *core.CacheWatch
	id        uint64
	key       core.CacheKey
	withCodes bool
	// shardMoved: the client reads shard_moved (FEATURE_SHARD_MOVED).
	shardMoved bool

	// Owned by whoever holds running.
	buf     []byte // frames not yet written (a stalled write leaves its tail)
	changes int    // changes in buf
	ended   error  // the watch's end, taken from the core watch
	broken  bool   // a write failed midway
}

// start arms the writer, which looks at what is already ready.
func (w *watchWriter) start() { w.arm(w) }

// wake queues the writer on the connection's pump unless it is queued or
// running, or not armed yet. It never blocks: the core calls it from the
// cache's writers.
func (w *watchWriter) wake() {
	if w.claim() {
		w.c.watchPump.add(w)
	}
}

// pending reports whether the writer has work: the core watch signalled
// since the writer last looked, or it must stop.
func (w *watchWriter) pending() bool {
	return w.cw.Signalled() || w.stopping()
}

// look takes the core watch's signal: whatever is signalled from now on
// leaves a new one, for pending to see.
func (w *watchWriter) look() { w.cw.TakeSignal() }

// idle gives the writer up, unless work arrived meanwhile: then it is
// queued on the pump again.
func (w *watchWriter) idle() {
	w.running.Store(false)
	if w.pending() && w.running.CompareAndSwap(false, true) {
		w.c.watchPump.add(w)
	}
}

// pumpStep writes what the watch has ready without waiting on it; a write
// that would wait, an end or a stop continues on a goroutine of the
// watch's own.
func (w *watchWriter) pumpStep() {
	// A watch that ended or broke stays on its own goroutine until it
	// finishes, so here only a stop needs looking at.
	if !w.stopping() {
		w.look()
		err := w.writeReady(true)
		if err == nil && w.ended == nil {
			w.idle()
			return
		}
		if err != nil && !errors.Is(err, transport.ErrWouldBlock) {
			w.broken = true
		}
	}
	w.c.spawn(w.alone)
}

// alone writes on its own goroutine, waiting as long as the client's flow
// control needs, until the watch has nothing more to write or is over.
func (w *watchWriter) alone() {
	drainWhile(&w.running, w.step, w.pending, w.finish)
}

// step writes what is ready; it reports whether the watch is over (its
// stream ended).
func (w *watchWriter) step() bool {
	w.look()
	switch {
	case w.broken:
	case w.stopping():
		w.stop()
		return true
	default:
		if err := w.writeReady(false); err != nil {
			w.broken = true
			break
		}
		if w.ended == nil {
			return false
		}
		w.end(w.ended)
		return true
	}
	w.es.CancelWrite(transport.StreamErrorCode(wire.CloseShutdown))
	return true
}

// stop ends the watch for the reason it is stopping.
func (w *watchWriter) stop() {
	if k := w.kicked.Load(); k != nil {
		w.end(k)
		return
	}
	if w.es.Context().Err() != nil || w.c.ctx.Err() != nil {
		w.es.CancelWrite(transport.StreamErrorCode(wire.CloseShutdown))
		return
	}
	// Draining: write what is ready, then end with draining.
	if err := w.writeReady(false); err != nil {
		w.es.CancelWrite(transport.StreamErrorCode(wire.CloseShutdown))
		return
	}
	if w.ended == nil {
		w.ended = wire.NewError(wire.CodeDraining, "broker is shutting down")
	}
	w.end(w.ended)
}

// finish releases what the watch held; called once, by the goroutine that
// ended it.
func (w *watchWriter) finish() { w.disarm(w.release) }

// release ends the core watch and gives back what the watch held.
func (w *watchWriter) release() {
	w.cw.Close()
	w.c.releaseStreamID(w.id)
	w.c.releaseSub()
}

// writeReady writes every item the watch has ready, several frames per
// write, after the tail a stalled write left. It stops at the watch's end
// (kept in ended). A failed write keeps what it did not write in buf. With
// try (on the pump) a write that would wait for the client's flow control
// is not made: it fails with transport.ErrWouldBlock.
func (w *watchWriter) writeReady(try bool) error {
	limit := w.c.srv.cfg.EventBatchMaxBytes
	if len(w.buf) > 0 {
		if err := w.write(try); err != nil {
			return err
		}
	}
	for w.ended == nil {
		it, ok := w.cw.Next()
		if !ok {
			break
		}
		switch {
		case it.Change != nil:
			f, err := it.Change.EncodedFrame()
			if err != nil {
				// What is queued before it is written; the watch ends here.
				w.c.srv.log.Error("cache watch ended: a change cannot be encoded", "watch", w.id, "err", err)
				w.ended = err
				break
			}
			w.buf = append(w.buf, f...)
			w.changes++
		case it.State != nil:
			buf, err := wire.AppendMessageFrame(w.buf, &wire.CacheWatchState{Offset: it.State.Offset, Count: it.State.Count})
			if err != nil {
				// A watch missing its state frame would read wrong.
				w.c.srv.log.Error("cache watch ended: its state cannot be encoded", "watch", w.id, "err", err)
				w.ended = wire.NewError(wire.CodeInternal, "encode the cache watch state: %v", err)
				break
			}
			w.buf = buf
		default:
			w.ended = it.End
		}
		if len(w.buf) >= limit {
			if err := w.write(try); err != nil {
				return err
			}
		}
	}
	if len(w.buf) > 0 {
		if err := w.write(try); err != nil {
			return err
		}
	}
	if cap(w.buf) > keptWriteBuf { // a burst's storage, not kept for one change
		w.buf = nil
	}
	return nil
}

// keptWriteBuf is the largest write buffer an idle watch keeps.
const keptWriteBuf = 4 << 10

// write writes buf: with try all of it or, when that would wait for the
// client's flow control, nothing (transport.ErrWouldBlock).
func (w *watchWriter) write(try bool) error {
	var n int
	var err error
	if try {
		if err = w.es.TryWriteAll(w.buf); err == nil {
			n = len(w.buf)
		}
	} else {
		n, err = w.es.Write(w.buf)
	}
	if err != nil {
		w.buf = w.buf[n:]
		return err
	}
	w.buf = w.buf[:0]
	w.c.srv.metrics.deliveredMessages.Add(w.changes)
	w.changes = 0
	return nil
}

// end writes the watch's last frame for why it ended and finishes the
// stream.
func (w *watchWriter) end(why error) {
	var last wire.Message
	var lag *core.LaggedError
	var we *wire.Error
	if m, ok := movedFrame(why, w.id, w.shardMoved, w.withCodes); ok {
		last = m
	}
	switch {
	case last != nil:
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
	if err := writeLast(w.es, last); err != nil {
		w.c.srv.log.Debug("cache watch ended without its last frame", "watch", w.id, "err", err)
	}
}
