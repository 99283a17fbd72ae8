package peer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/roles/broker/tlsconf"
	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// The handshake, on the link's first bidirectional stream, which the
// dialer opens:
//
//  1. dialer → listener: peer_hello {node_id, storage_id, version, to}
//  2. listener → dialer: peer_welcome {node_id, storage_id, version},
//     or the connection is closed with CloseVersionMismatch,
//     CloseWrongNode or CloseBadHandshake and a reason.
//
// The listener checks that the hello's version is its own, that node_id
// is the one the dialer's certificate names, and that to is itself. The
// dialer checks that the welcome's node_id is the one it dialed and its
// version its own. Both must finish within HandshakeTimeout.

// accept runs the listener's side of the handshake on an accepted
// connection holding a reserved slot, and starts the link.
func (e *Endpoint) accept(qc transport.Conn) {
	ctx, cancel := context.WithTimeout(e.ctx, e.cfg.HandshakeTimeout)
	defer cancel()
	l, code, err := e.welcome(ctx, qc)
	if err != nil {
		e.release()
		if !e.isClosed(err) {
			e.refuse(qc.RemoteAddr(), "bad handshake", err)
		}
		qc.CloseWithError(code, err.Error())
		return
	}
	if e.adopt(l) == nil {
		e.log.Info("peer link accepted", "node_id", l.peer.NodeID, "addr", l.peer.Addr, "storage_id", l.peer.StorageID)
	}
}

// welcome reads the hello, checks it and answers; on a refusal it
// returns the close code to send.
func (e *Endpoint) welcome(ctx context.Context, qc transport.Conn) (*Link, CloseCode, error) {
	st, err := qc.AcceptStream(ctx)
	if err != nil {
		return nil, CloseBadHandshake, fmt.Errorf("%w: no stream: %w", ErrBadHandshake, err)
	}
	fr := wire.NewFrameReader(st, e.cfg.MaxFrameBytes)
	m, err := readOne(ctx, st, fr)
	if err != nil {
		return nil, CloseBadHandshake, err
	}
	h, ok := m.(*Hello)
	if !ok {
		return nil, CloseBadHandshake, fmt.Errorf("%w: the first frame is %s, not %s", ErrBadHandshake, m.MessageType(), TypeHello)
	}
	certs := qc.TLS().PeerCertificates
	if len(certs) == 0 { // serverTLS refused it already; never
		return nil, CloseWrongNode, tlsconf.ErrNoPeerCert
	}
	certID, err := tlsconf.NodeIDOf(certs[0])
	if err != nil { // likewise
		return nil, CloseWrongNode, err
	}
	switch {
	case h.Version != e.cfg.version:
		return nil, CloseVersionMismatch, fmt.Errorf("%w: node %q speaks peer protocol version %d, this node %d", ErrVersionMismatch, h.NodeID, h.Version, e.cfg.version)
	case h.NodeID != certID:
		return nil, CloseWrongNode, fmt.Errorf("%w: the hello says node %q, its certificate names %q", ErrWrongNode, h.NodeID, certID)
	case h.To != e.cfg.NodeID:
		return nil, CloseWrongNode, fmt.Errorf("%w: node %q means to reach %q, this is %q", ErrWrongNode, h.NodeID, h.To, e.cfg.NodeID)
	}
	if err := writeOne(st, &Welcome{NodeID: e.cfg.NodeID, StorageID: e.cfg.StorageID, Version: e.cfg.version}); err != nil {
		return nil, CloseBadHandshake, fmt.Errorf("%w: %w", ErrBadHandshake, err)
	}
	p := Peer{NodeID: h.NodeID, StorageID: h.StorageID, Version: h.Version, Addr: qc.RemoteAddr().String()}
	return newLink(e, qc, st, fr, p), 0, nil
}

// hello runs the dialer's side of the handshake on a connection to
// nodeID; wantStorage, when set, is the storage identity expected.
func (e *Endpoint) hello(ctx context.Context, qc transport.Conn, nodeID, wantStorage string) (*Link, error) {
	// Over TCP the other end's refusal (a close, a TLS alert) may reach
	// the open or the write, not only the read: each names it alike.
	st, err := qc.OpenStreamSync(ctx)
	if err != nil {
		return nil, remoteError(err)
	}
	h := &Hello{NodeID: e.cfg.NodeID, StorageID: e.cfg.StorageID, Version: e.cfg.version, To: nodeID}
	if err := writeOne(st, h); err != nil {
		return nil, remoteError(err)
	}
	fr := wire.NewFrameReader(st, e.cfg.MaxFrameBytes)
	m, err := readOne(ctx, st, fr)
	if err != nil {
		return nil, err
	}
	w, ok := m.(*Welcome)
	switch {
	case !ok:
		return nil, closeFor(qc, CloseBadHandshake, fmt.Errorf("%w: the answer is %s, not %s", ErrBadHandshake, m.MessageType(), TypeWelcome))
	case w.Version != e.cfg.version:
		return nil, closeFor(qc, CloseVersionMismatch, fmt.Errorf("%w: node %q speaks peer protocol version %d, this node %d", ErrVersionMismatch, w.NodeID, w.Version, e.cfg.version))
	case w.NodeID != nodeID:
		return nil, closeFor(qc, CloseWrongNode, fmt.Errorf("%w: the welcome says node %q, want %q", ErrWrongNode, w.NodeID, nodeID))
	case wantStorage != "" && w.StorageID != wantStorage:
		return nil, closeFor(qc, CloseWrongNode, fmt.Errorf("%w: node %q has storage identity %q, want %q", ErrStorageMismatch, nodeID, w.StorageID, wantStorage))
	}
	p := Peer{NodeID: w.NodeID, StorageID: w.StorageID, Version: w.Version, Addr: qc.RemoteAddr().String(), Dialed: true}
	return newLink(e, qc, st, fr, p), nil
}

// closeFor closes qc with code and the text of err, and returns err.
func closeFor(qc transport.Conn, code CloseCode, err error) error {
	qc.CloseWithError(code, err.Error())
	return err
}

// readOne reads and decodes one frame before ctx ends. A connection the
// other end closed yields the named error its close code carries.
func readOne(ctx context.Context, st transport.Stream, fr *wire.FrameReader) (wire.Message, error) {
	if d, ok := ctx.Deadline(); ok {
		st.SetReadDeadline(d)
		defer st.SetReadDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { st.CancelRead(transport.StreamErrorCode(CloseBadHandshake)) })
	defer stop()
	f, err := fr.Next()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("peer: no handshake frame within the handshake timeout: %w", context.Cause(ctx))
		}
		return nil, remoteError(err)
	}
	m, err := ParseMessage(f.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadHandshake, err)
	}
	return m, nil
}

// writeOne writes m as one frame.
func writeOne(st transport.Stream, m wire.Message) error {
	b, err := appendFrame(nil, m)
	if err != nil {
		return err
	}
	_, err = st.Write(b)
	return err
}

// errRefusedByUs wraps a certificate this end refused when dialing.
func errRefusedByUs(nodeID, addr string, err error) error {
	if errors.Is(err, tlsconf.ErrWrongNode) {
		return fmt.Errorf("peer: %s at %s: %w: %w", nodeID, addr, ErrWrongNode, err)
	}
	return fmt.Errorf("peer: %s at %s: %w", nodeID, addr, err)
}
