package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/wire"
)

// Calls (see callframe.go for the framing). A call opens a new
// bidirectional QUIC stream on the link (no multiplexing of calls on one
// stream, so a slow answer holds up nobody else), writes the request
// frame and closes its send side, then reads the reply frame. The other
// end runs Config.Handle for it on a goroutine of its own, with the
// caller's identity as the link's handshake and mutual TLS established
// it, and writes the reply. Streams are accepted only on handshaken
// links, so no call reaches a handler before the handshake checked the
// caller's certificate and node id.
//
// Bounds: MaxCallsInFlight calls per link from this end (past it Call
// fails at once with ErrBusy, nothing sent); the other end's QUIC stream
// limit is the same number, so its handlers are bounded too. Call frames
// are at most MaxCallBytes. ctx's deadline bounds the whole call.

// ErrUnanswered matches the error of a call whose request was sent (all
// of it handed to QUIC) but whose reply never came: the link died, ctx
// ended, or the reply did not decode. The other end may have run it, so
// the caller must treat its outcome as unknown. A call error that does
// not match ErrUnanswered was never sent: it cannot have been run.
var ErrUnanswered = errors.New("peer: call sent but not answered")

// streamCancelled is the QUIC stream error code a call stream is
// cancelled with when its caller gives up or a frame does not decode.
const streamCancelled quic.StreamErrorCode = 1

// Call sends req to node t over the link this endpoint keeps to it
// (dialed on first use, again after it died; concurrent callers share
// one dial) and returns the reply. A handler's refusal is a Reply with
// Err set and a nil error; an error means no reply: it matches
// ErrUnanswered when the request may have reached the other node.
func (e *Endpoint) Call(ctx context.Context, t Target, req Request) (Reply, error) {
	b, err := AppendRequest(nil, req)
	if err != nil {
		return Reply{}, err
	}
	l, err := e.linkTo(ctx, t)
	if err != nil {
		return Reply{}, err
	}
	return l.call(ctx, b)
}

// Call sends req on this link (see Endpoint.Call).
func (l *Link) Call(ctx context.Context, req Request) (Reply, error) {
	b, err := AppendRequest(nil, req)
	if err != nil {
		return Reply{}, err
	}
	return l.call(ctx, b)
}

// dialSlot is one dial to a node, shared by the callers that need it.
type dialSlot struct {
	done chan struct{} // closed when the dial ended
	link *Link         // set before done closes, nil on error
	err  error
}

// linkTo returns the live link this endpoint dialed to t.NodeID, dialing
// one when there is none. Callers wait for a dial under way; a failed
// dial's error is shared by those who waited for it.
func (e *Endpoint) linkTo(ctx context.Context, t Target) (*Link, error) {
	for {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return nil, ErrClosed
		}
		s := e.dialed[t.NodeID]
		fresh := s == nil
		if fresh {
			s = &dialSlot{done: make(chan struct{})}
			e.dialed[t.NodeID] = s
			e.wg.Add(1)
			go e.dialFor(s, t)
		}
		e.mu.Unlock()
		select {
		case <-s.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("peer: waiting for a link to %s: %w", t.NodeID, ctx.Err())
		}
		if s.err != nil {
			return nil, s.err
		}
		if s.link.Err() == nil {
			return s.link, nil
		}
		// The link died since: drop it and dial again.
		e.mu.Lock()
		if e.dialed[t.NodeID] == s {
			delete(e.dialed, t.NodeID)
		}
		e.mu.Unlock()
	}
}

// dialFor dials t for slot s on the endpoint's own goroutine, so a
// caller giving up does not end a dial others wait for.
func (e *Endpoint) dialFor(s *dialSlot, t Target) {
	defer e.wg.Done()
	s.link, s.err = e.DialTarget(e.ctx, t)
	if s.err != nil {
		e.mu.Lock()
		if e.dialed[t.NodeID] == s {
			delete(e.dialed, t.NodeID)
		}
		e.mu.Unlock()
	}
	close(s.done)
}

// call sends one encoded request frame and reads the reply.
func (l *Link) call(ctx context.Context, frame []byte) (Reply, error) {
	if len(frame)-wire.HeaderLen > int(l.ep.cfg.MaxCallBytes) {
		return Reply{}, fmt.Errorf("peer: a request of %d bytes; at most %d", len(frame)-wire.HeaderLen, l.ep.cfg.MaxCallBytes)
	}
	select {
	case l.calls <- struct{}{}:
	default:
		return Reply{}, fmt.Errorf("%w: %d calls to %s in flight", ErrBusy, cap(l.calls), l.peer.NodeID)
	}
	defer func() { <-l.calls }()
	if err := l.ctx.Err(); err != nil {
		return Reply{}, fmt.Errorf("%w: %w", ErrClosed, context.Cause(l.ctx))
	}
	st, err := l.qc.OpenStreamSync(ctx)
	if err != nil {
		return Reply{}, l.callFailed(ctx, fmt.Errorf("peer: open a call stream to %s: %w", l.peer.NodeID, remoteError(err)))
	}
	if d, ok := ctx.Deadline(); ok {
		st.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() {
		st.CancelWrite(streamCancelled)
		st.CancelRead(streamCancelled)
	})
	defer stop()
	if _, err := st.Write(frame); err != nil {
		st.CancelRead(streamCancelled)
		return Reply{}, l.callFailed(ctx, fmt.Errorf("peer: send a call to %s: %w", l.peer.NodeID, remoteError(err)))
	}
	st.Close()
	// From here the request may have reached the other end.
	f, err := wire.NewFrameReader(st, l.ep.cfg.MaxCallBytes).NextOwned()
	if err != nil {
		st.CancelRead(streamCancelled)
		return Reply{}, fmt.Errorf("%w: %w", ErrUnanswered, l.callFailed(ctx, fmt.Errorf("peer: no reply from %s: %w", l.peer.NodeID, remoteError(err))))
	}
	r, err := ParseReply(f.Flags, f.Payload)
	if err != nil {
		st.CancelRead(streamCancelled)
		return Reply{}, fmt.Errorf("%w: %w", ErrUnanswered, err)
	}
	expectEnd(st) // the reply is whole; a stream that goes on is cut short
	return r, nil
}

// expectEnd reads the end of a call stream's receive half after its one
// frame, and reports whether it ended there. Reading the end is what
// completes the stream, so that QUIC gives its credit back to the end
// that opened it; a stream that carries more than the frame is cancelled
// instead.
func expectEnd(st *quic.Stream) bool {
	var b [1]byte
	n, err := st.Read(b[:])
	if n == 0 && err == io.EOF {
		return true
	}
	st.CancelRead(streamCancelled)
	return false
}

// callFailed names why a call failed: ctx, the end of the link, or err.
func (l *Link) callFailed(ctx context.Context, err error) error {
	d, hasDeadline := ctx.Deadline()
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	case hasDeadline && !time.Now().Before(d):
		// The stream's deadline, set from ctx's, went off first.
		return fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
	case l.ctx.Err() != nil:
		return fmt.Errorf("%w: %w", ErrClosed, context.Cause(l.ctx))
	}
	return err
}

// acceptCalls serves every call stream the other end opens until the
// link ends. Run by run; each call's goroutine is counted in wg.
func (l *Link) acceptCalls(wg interface{ Go(func()) }) {
	for {
		st, err := l.qc.AcceptStream(l.ctx)
		if err != nil {
			return
		}
		wg.Go(func() { l.serveCall(st) })
	}
}

// serveCall reads one request, runs the handler and writes its reply.
func (l *Link) serveCall(st *quic.Stream) {
	cfg := l.ep.cfg
	// The caller sends its whole request at once: a stream that does not
	// deliver it within CallIOTimeout is given up.
	st.SetReadDeadline(time.Now().Add(cfg.CallIOTimeout))
	stop := context.AfterFunc(l.ctx, func() { st.CancelRead(streamCancelled) })
	f, err := wire.NewFrameReader(st, cfg.MaxCallBytes).NextOwned()
	stop()
	if err != nil {
		st.CancelRead(streamCancelled)
		st.CancelWrite(streamCancelled)
		return
	}
	var rep Reply
	req, err := ParseRequest(f.Flags, f.Payload)
	switch {
	case err == nil && !expectEnd(st):
		rep = ErrorReply(wire.NewError(wire.CodeInvalidRequest, "a call stream carries one frame, then ends"))
	case err != nil:
		st.CancelRead(streamCancelled)
		rep = ErrorReply(wire.NewError(wire.CodeInvalidRequest, "%v", err))
	case cfg.Handle == nil:
		rep = ErrorReply(wire.NewError(wire.CodeUnsupported, "node %s serves no peer calls", cfg.NodeID))
	default:
		// The handler's context ends with the link, or when the caller
		// gives up (its STOP_SENDING closes our send side).
		ctx, cancel := context.WithCancel(l.ctx)
		stopCtx := context.AfterFunc(st.Context(), cancel)
		rep = cfg.Handle(ctx, l.peer, req)
		stopCtx()
		cancel()
		if l.ctx.Err() != nil {
			// The link is ending: its reply (likely the handler giving
			// up) must not reach the caller as an answer. The caller
			// sees the call unanswered, its outcome unknown.
			st.CancelWrite(streamCancelled)
			return
		}
	}
	b, err := AppendReply(nil, rep)
	if err == nil && len(b)-wire.HeaderLen > int(cfg.MaxCallBytes) {
		err = fmt.Errorf("a reply of %d bytes; at most %d", len(b)-wire.HeaderLen, cfg.MaxCallBytes)
	}
	if err != nil {
		l.ep.log.Error("cannot encode a peer call's reply", "type", req.Type, "node_id", l.peer.NodeID, "err", err)
		b, _ = AppendReply(nil, ErrorReply(wire.NewError(wire.CodeInternal, "reply: %v", err)))
	}
	st.SetWriteDeadline(time.Now().Add(cfg.CallIOTimeout))
	if _, err := st.Write(b); err != nil {
		st.CancelWrite(streamCancelled)
		return
	}
	st.Close()
}
