package peer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// callStream is one call stream (call.go), seen from either end: the
// caller's, which writes requests and cancels and reads replies, or the
// answering end's, which reads requests and cancels and writes replies.
type callStream struct {
	l  *Link
	st transport.Stream
	// ctx ends when the stream broke or the link ended; its cause is why.
	ctx    context.Context
	cancel context.CancelCauseFunc

	wmu sync.Mutex // held while one frame is written
	// writers counts the callers writing or waiting to write (caller's
	// end), so a call picks a stream nobody is writing to.
	writers atomic.Int32

	mu sync.Mutex
	// calls maps each call id awaiting its reply to the channel its
	// reply goes to (caller's end), or each request being handled to its
	// handler's cancel (answering end). Once broken is set no entry is
	// added.
	waiting  map[uint64]chan Reply         // guarded by mu
	handling map[uint64]context.CancelFunc // guarded by mu
	broken   bool                          // guarded by mu
	nextID   uint64                        // guarded by mu
}

func newCallStream(l *Link, st transport.Stream) *callStream {
	cs := &callStream{l: l, st: st, waiting: map[uint64]chan Reply{}, handling: map[uint64]context.CancelFunc{}}
	cs.ctx, cs.cancel = context.WithCancelCause(l.ctx)
	return cs
}

// writeFrame writes one frame whole, b and then rest (a body written
// after its frame's head without copying it), within CallIOTimeout and,
// when given, by deadline; a write that fails breaks the stream (a part
// of a frame may have gone out, so nothing more can follow it).
func (cs *callStream) writeFrame(b []byte, deadline time.Time, rest ...[]byte) error {
	cs.wmu.Lock()
	defer cs.wmu.Unlock()
	if err := context.Cause(cs.ctx); err != nil {
		return err
	}
	d := time.Now().Add(cs.l.ep.cfg.CallIOTimeout)
	if !deadline.IsZero() && deadline.Before(d) {
		d = deadline
	}
	cs.st.SetWriteDeadline(d)
	if err := cs.write(b); err != nil {
		return err
	}
	for _, p := range rest {
		if err := cs.write(p); err != nil {
			return err
		}
	}
	return nil
}

// write is one part of writeFrame; caller holds wmu.
func (cs *callStream) write(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if _, err := cs.st.Write(p); err != nil {
		err = remoteError(err)
		cs.breakWith(err)
		return err
	}
	return nil
}

// breakWith ends the stream: QUIC resets it both ways, every call
// awaiting a reply on it ends unanswered, every handler's context ends.
func (cs *callStream) breakWith(err error) {
	cs.mu.Lock()
	if cs.broken {
		cs.mu.Unlock()
		return
	}
	cs.broken = true
	waiting := cs.waiting
	cs.waiting = nil
	cs.mu.Unlock()
	cs.cancel(err)
	cs.st.CancelWrite(streamCancelled)
	cs.st.CancelRead(streamCancelled)
	for _, c := range waiting {
		close(c) // no reply: unanswered
	}
}

// --- the caller's end ---

// pickStream returns a call stream of this end for one call, counted
// among its writers until the call's request is written: one no call is
// writing to, else a new one while there are fewer than maxCallStreams
// (one opened at a time; a caller with no stream to take waits for it),
// else the one with the fewest writers.
func (l *Link) pickStream(ctx context.Context) (*callStream, error) {
	for {
		l.cmu.Lock()
		var best *callStream
		live := l.out[:0]
		for _, cs := range l.out {
			if cs.ctx.Err() != nil {
				continue
			}
			live = append(live, cs)
			if best == nil || cs.writers.Load() < best.writers.Load() {
				best = cs
			}
		}
		clear(l.out[len(live):])
		l.out = live
		if best != nil && (best.writers.Load() == 0 || l.opened != nil || len(l.out) >= maxCallStreams) {
			best.writers.Add(1)
			l.cmu.Unlock()
			return best, nil
		}
		if opened := l.opened; opened != nil {
			// Another caller is opening the first stream: wait for it.
			l.cmu.Unlock()
			select {
			case <-opened:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		opened := make(chan struct{})
		l.opened = opened
		l.cmu.Unlock()
		return l.openStream(ctx, opened)
	}
}

// openStream opens a call stream for the caller that set l.opened, and
// lets those waiting for it look again.
func (l *Link) openStream(ctx context.Context, opened chan struct{}) (*callStream, error) {
	st, err := l.qc.OpenStreamSync(ctx)
	l.cmu.Lock()
	defer l.cmu.Unlock()
	l.opened = nil
	close(opened)
	if err != nil {
		return nil, fmt.Errorf("peer: open a call stream to %s: %w", l.peer.NodeID, remoteError(err))
	}
	cs := newCallStream(l, st)
	if !l.streams.Go(cs.readReplies) {
		st.CancelWrite(streamCancelled)
		st.CancelRead(streamCancelled)
		return nil, fmt.Errorf("%w: %w", ErrClosed, context.Cause(l.ctx))
	}
	cs.writers.Add(1)
	l.out = append(l.out, cs)
	return cs, nil
}

// call sends req on cs and waits for its reply. The caller counted itself
// among cs's writers (pickStream).
func (cs *callStream) call(ctx context.Context, req Request) (Reply, error) {
	l := cs.l
	cs.mu.Lock()
	if cs.broken {
		cs.mu.Unlock()
		cs.writers.Add(-1)
		return Reply{}, l.callFailed(ctx, fmt.Errorf("peer: a call stream to %s broke: %w", l.peer.NodeID, context.Cause(cs.ctx)))
	}
	cs.nextID++
	id := cs.nextID
	c := make(chan Reply, 1)
	cs.waiting[id] = c
	cs.mu.Unlock()

	b, err := appendRequestHead(nil, id, req)
	if n := len(b) + len(req.Body) - wire.HeaderLen; err == nil && n > int(l.ep.cfg.MaxCallBytes) {
		err = fmt.Errorf("peer: a request of %d bytes; at most %d", n, l.ep.cfg.MaxCallBytes)
	}
	if err == nil {
		d, _ := ctx.Deadline()
		if werr := cs.writeFrame(b, d, req.Body); werr != nil {
			err = l.callFailed(ctx, fmt.Errorf("peer: send a call to %s: %w", l.peer.NodeID, werr))
		}
	}
	cs.writers.Add(-1)
	if err != nil {
		cs.forget(id)
		return Reply{}, err
	}
	// From here the request may have reached the other end.
	select {
	case r, ok := <-c:
		if !ok {
			return Reply{}, fmt.Errorf("%w: %w", ErrUnanswered, l.callFailed(ctx,
				fmt.Errorf("peer: no reply from %s: %w", l.peer.NodeID, context.Cause(cs.ctx))))
		}
		return r, nil
	case <-ctx.Done():
		if cs.forget(id) {
			// Tell the handler, off this goroutine: the write may wait
			// behind another caller's.
			l.streams.Go(func() { cs.writeFrame(appendCancel(nil, id), time.Time{}) })
		}
		return Reply{}, fmt.Errorf("%w: %w", ErrUnanswered, l.callFailed(ctx, fmt.Errorf("peer: no reply from %s", l.peer.NodeID)))
	}
}

// forget drops call id's wait; it reports whether the call still waited.
func (cs *callStream) forget(id uint64) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	_, ok := cs.waiting[id]
	delete(cs.waiting, id)
	return ok
}

// readReplies hands each reply on cs to its caller until the stream
// breaks or the link ends; then every call still waiting on cs ends
// unanswered.
func (cs *callStream) readReplies() {
	l := cs.l
	fr := wire.NewFrameReader(cs.st, l.ep.cfg.MaxCallBytes)
	for {
		f, err := fr.NextOwned()
		if err != nil {
			cs.breakWith(remoteError(err))
			return
		}
		cf, err := parseCallFrame(f.Flags, f.Payload)
		if err == nil && cf.kind != frameReply {
			err = fmt.Errorf("%w: kind %d on the caller's end", errBadCall, cf.kind)
		}
		if err != nil {
			l.ep.log.Warn("a peer call stream broke: a frame does not decode", "node_id", l.peer.NodeID, "err", err)
			cs.breakWith(err)
			return
		}
		cs.mu.Lock()
		c, ok := cs.waiting[cf.id]
		delete(cs.waiting, cf.id)
		cs.mu.Unlock()
		if ok {
			c <- cf.rep // one slot, one reply
		}
	}
}

// --- the answering end ---

// acceptCalls serves every call stream the other end opens until the
// link ends. Run by run; each stream's reader is one of l.streams.
func (l *Link) acceptCalls() {
	for {
		st, err := l.qc.AcceptStream(l.ctx)
		if err != nil {
			return
		}
		if !l.streams.Go(newCallStream(l, st).serve) {
			st.CancelRead(streamCancelled)
			st.CancelWrite(streamCancelled)
			return
		}
	}
}

// serve reads requests and cancels on cs until it breaks or the link
// ends, running each request's handler on a goroutine of its own.
func (cs *callStream) serve() {
	l := cs.l
	cfg := l.ep.cfg
	var handlers sync.WaitGroup
	defer handlers.Wait()
	fr := wire.NewFrameReader(cs.st, cfg.MaxCallBytes)
	for {
		f, err := fr.NextOwned()
		if err != nil {
			cs.breakWith(remoteError(err))
			return
		}
		cf, err := parseCallFrame(f.Flags, f.Payload)
		switch {
		case err != nil && cf.kind == frameRequest:
			// The request names its id: refuse it, keep the stream.
			cs.reply(cf.id, ErrorReply(wire.NewError(wire.CodeInvalidRequest, "%v", err)), "")
			continue
		case err == nil && cf.kind == frameReply:
			err = fmt.Errorf("%w: a reply on the answering end", errBadCall)
		}
		if err != nil {
			l.ep.log.Warn("a peer call stream broke: a frame does not decode", "node_id", l.peer.NodeID, "err", err)
			cs.breakWith(err)
			return
		}
		if cf.kind == frameCancel {
			cs.mu.Lock()
			if cancel := cs.handling[cf.id]; cancel != nil {
				cancel()
			}
			cs.mu.Unlock()
			continue
		}
		if cfg.Handle == nil {
			cs.reply(cf.id, ErrorReply(wire.NewError(wire.CodeUnsupported, "node %s serves no peer calls", cfg.NodeID)), cf.req.Type)
			continue
		}
		if l.handling.Add(1) > int64(cfg.MaxCallsInFlight) {
			l.handling.Add(-1)
			cs.reply(cf.id, ErrorReply(wire.NewError(wire.CodeOverloaded, "node %s is handling %d calls from %s", cfg.NodeID, cfg.MaxCallsInFlight, l.peer.NodeID).
				WithDetail(wire.DetailReason, "peer_calls_busy")), cf.req.Type)
			continue
		}
		ctx, cancel := context.WithCancel(cs.ctx)
		cs.mu.Lock()
		if _, dup := cs.handling[cf.id]; dup || cs.broken {
			cs.mu.Unlock()
			cancel()
			l.handling.Add(-1)
			if dup {
				err := fmt.Errorf("%w: call id %d is in use", errBadCall, cf.id)
				l.ep.log.Warn("a peer call stream broke", "node_id", l.peer.NodeID, "err", err)
				cs.breakWith(err)
			}
			return
		}
		cs.handling[cf.id] = cancel
		cs.mu.Unlock()
		handlers.Go(func() {
			defer l.handling.Add(-1)
			rep := cfg.Handle(ctx, l.peer, cf.req)
			cs.mu.Lock()
			delete(cs.handling, cf.id)
			cs.mu.Unlock()
			cancel()
			if l.ctx.Err() != nil || cs.ctx.Err() != nil {
				// The link is ending or the stream broke: this reply
				// (likely the handler giving up) must not reach the
				// caller as an answer. The caller sees the call
				// unanswered, its outcome unknown.
				return
			}
			cs.reply(cf.id, rep, cf.req.Type)
		})
	}
}

// reply writes call id's reply; one that does not encode or is too long
// goes as an internal error instead.
func (cs *callStream) reply(id uint64, rep Reply, typ string) {
	cfg := cs.l.ep.cfg
	b, err := appendReply(nil, id, rep)
	if err == nil && len(b)-wire.HeaderLen > int(cfg.MaxCallBytes) {
		err = fmt.Errorf("a reply of %d bytes; at most %d", len(b)-wire.HeaderLen, cfg.MaxCallBytes)
	}
	if err != nil {
		cs.l.ep.log.Error("cannot encode a peer call's reply", "type", typ, "node_id", cs.l.peer.NodeID, "err", err)
		b, _ = appendReply(nil, id, ErrorReply(wire.NewError(wire.CodeInternal, "reply: %v", err)))
	}
	if err := cs.writeFrame(b, time.Time{}); err != nil && !errors.Is(err, context.Canceled) {
		cs.l.ep.log.Debug("a peer call's reply was not written", "type", typ, "node_id", cs.l.peer.NodeID, "err", err)
	}
}
