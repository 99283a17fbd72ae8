package peer

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/felixmq/felix/roles/broker/tlsconf"
)

// Target is a node to dial: its id, its peer address and, when known,
// the storage identity it must answer with.
type Target struct {
	NodeID    string
	Addr      string
	StorageID string // "" accepts any
}

// Dial opens a link to node nodeID at addr (DialTarget without a
// storage identity).
func (e *Endpoint) Dial(ctx context.Context, nodeID, addr string) (*Link, error) {
	return e.DialTarget(ctx, Target{NodeID: nodeID, Addr: addr})
}

// DialTarget opens a link to t, trying up to DialAttempts times with a
// doubling back-off while the failure may pass (no answer, a link slot
// taken, the other node shutting down); a refused connection (nobody
// listens at the address) is returned at once. A refusal is returned at once
// and matches its named error: ErrWrongNode, ErrVersionMismatch,
// ErrStorageMismatch, ErrRefused (the other node refused this node's
// certificate), ErrBadHandshake, or tlsconf's ErrUntrustedPeer and
// ErrNoNodeID (this node refused the other's certificate). ctx bounds
// the whole dial; Close of the endpoint ends it with ErrClosed.
func (e *Endpoint) DialTarget(ctx context.Context, t Target) (*Link, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.ctx, cancel)
	defer stop()
	wait := e.cfg.DialBackoff
	var err error
	for attempt := 1; ; attempt++ {
		var l *Link
		l, err = e.dialOnce(ctx, t)
		if err == nil {
			return l, nil
		}
		switch {
		case e.ctx.Err() != nil:
			return nil, fmt.Errorf("%w: %w", ErrClosed, err)
		case ctx.Err() != nil, permanent(err), attempt >= e.cfg.DialAttempts:
			return nil, err
		case errors.Is(err, syscall.ECONNREFUSED):
			// Nobody listens there now (the broker is down or restarting):
			// waiting here would only hold up the calls that share this
			// dial (a forward to a dead owner answering owner_unreachable
			// at once lets its client retry, and a failover's new owner
			// be found, sooner). Callers retry on their own schedules.
			return nil, err
		}
		e.log.Debug("peer dial failed; trying again", "node_id", t.NodeID, "addr", t.Addr, "attempt", attempt, "in", wait, "err", err)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, err
		case <-timer.C:
		}
		wait = min(2*wait, e.cfg.MaxDialBackoff)
	}
}

// dialOnce makes one attempt: the transport and TLS, then the handshake.
func (e *Endpoint) dialOnce(ctx context.Context, t Target) (*Link, error) {
	if err := e.reserve(); err != nil {
		return nil, err
	}
	l, err := e.connect(ctx, t)
	if err != nil {
		e.release()
		return nil, err
	}
	if err := e.adopt(l); err != nil {
		return nil, err
	}
	e.log.Info("peer link dialed", "node_id", t.NodeID, "addr", t.Addr, "storage_id", l.peer.StorageID)
	return l, nil
}

func (e *Endpoint) connect(ctx context.Context, t Target) (*Link, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.HandshakeTimeout)
	defer cancel()
	var refusal lockedErr
	qc, err := e.dial(ctx, t.Addr, e.clientTLS(t.NodeID, &refusal), e.transportConfig())
	if err != nil {
		if r := refusal.get(); r != nil {
			return nil, errRefusedByUs(t.NodeID, t.Addr, r)
		}
		return nil, fmt.Errorf("peer: dial %s at %s: %w", t.NodeID, t.Addr, remoteError(err))
	}
	l, err := e.hello(ctx, qc, t.NodeID, t.StorageID)
	if err != nil {
		qc.CloseWithError(CloseBadHandshake, "handshake failed")
		return nil, fmt.Errorf("peer: handshake with %s at %s: %w", t.NodeID, t.Addr, err)
	}
	return l, nil
}

// certificateRefusal reports whether err is a certificate this end
// refused.
func certificateRefusal(err error) bool {
	return errors.Is(err, tlsconf.ErrUntrustedPeer) || errors.Is(err, tlsconf.ErrNoNodeID) || errors.Is(err, tlsconf.ErrNoPeerCert)
}
