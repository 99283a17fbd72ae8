package peer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/transport"
)

// Calls (see callframe.go for the framing). A caller sends its request
// on one of the link's call streams: long-lived bidirectional QUIC
// streams it opened (at most maxCallStreams per link and direction; a
// call takes one no other caller is writing to, or opens one), and waits
// for the reply, which the other end writes on the same stream once its
// handler is done. Streams are shared because opening a QUIC stream per
// call costs about one more round trip's worth of packets and wake-ups
// than the call itself (BenchmarkCallRoundTrip). A slow handler holds up
// nobody: replies go back as handlers finish, in any order. The other
// end runs Config.Handle for each request on a goroutine of its own,
// with the caller's identity as the link's handshake and mutual TLS
// established it. Streams are accepted only on handshaken links, so no
// call reaches a handler before the handshake checked the caller's
// certificate and node id.
//
// A caller that gives up (its ctx ends) sends a cancel frame for its call,
// which ends the handler's context. A stream that breaks (a write fails or
// times out, a frame does not decode, the link ends) ends every call on it:
// the callers see their calls unanswered, the handlers' contexts end.
//
// Bounds: MaxCallsInFlight calls per link from this end (past it Call
// fails at once with ErrBusy, nothing sent), and as many handlers per
// link at the answering end (past it a request is refused overloaded).
// Call frames are at most MaxCallBytes. ctx's deadline bounds the whole
// call; a frame's write is bounded by CallIOTimeout too.

// ErrUnanswered matches the error of a call whose request was sent (all
// of it handed to QUIC) but whose reply never came: the link died, ctx
// ended, or the reply did not decode. The other end may have run it, so
// the caller must treat its outcome as unknown. A call error that does
// not match ErrUnanswered was never sent: it cannot have been run.
var ErrUnanswered = errors.New("peer: call sent but not answered")

// streamCancelled is the QUIC stream error code a call stream is
// cancelled with when it breaks (see above).
const streamCancelled transport.StreamErrorCode = 1

// maxCallStreams bounds the call streams one end of a link opens.
const maxCallStreams = 4

// Call sends req to node t over the link this endpoint keeps to it
// (dialed on first use, again after it died; concurrent callers share
// one dial) and returns the reply. A handler's refusal is a Reply with
// Err set and a nil error; an error means no reply: it matches
// ErrUnanswered when the request may have reached the other node.
func (e *Endpoint) Call(ctx context.Context, t Target, req Request) (Reply, error) {
	if _, err := requestLen(req); err != nil {
		return Reply{}, err
	}
	l, err := e.linkTo(ctx, t)
	if err != nil {
		return Reply{}, err
	}
	return l.Call(ctx, req)
}

// Call sends req on this link (see Endpoint.Call).
func (l *Link) Call(ctx context.Context, req Request) (Reply, error) {
	select {
	case l.calls <- struct{}{}:
	default:
		return Reply{}, fmt.Errorf("%w: %d calls to %s in flight", ErrBusy, cap(l.calls), l.peer.NodeID)
	}
	defer func() { <-l.calls }()
	if err := l.ctx.Err(); err != nil {
		return Reply{}, fmt.Errorf("%w: %w", ErrClosed, context.Cause(l.ctx))
	}
	cs, err := l.pickStream(ctx)
	if err != nil {
		return Reply{}, l.callFailed(ctx, err)
	}
	return cs.call(ctx, req)
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
