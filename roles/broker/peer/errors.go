package peer

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/felixmq/felix/transport"
)

// CloseCode is the application error code a peer link's connection is
// closed with. Peer links have their own ALPN, so these codes are their own
// namespace, apart from the client protocol's (wire.CloseCode).
// A link refused during the TLS handshake is closed by QUIC with a
// CRYPTO_ERROR instead (0x100 plus the TLS alert, e.g. 0x12a
// bad_certificate), which the dialer sees as transport.ErrConnectionLost
// carrying the tls.AlertError.
type CloseCode = transport.ApplicationErrorCode

// Close codes of a peer link.
const (
	// CloseNormal: the link is no longer needed.
	CloseNormal CloseCode = 0
	// CloseShutdown: the node is stopping.
	CloseShutdown CloseCode = 1
	// CloseBadHandshake: the first frame was missing, late or not a
	// well-formed peer_hello (or peer_welcome).
	CloseBadHandshake CloseCode = 2
	// CloseWrongNode: the hello names another node than the dialer's
	// certificate, or means to reach another node than this one.
	CloseWrongNode CloseCode = 3
	// CloseVersionMismatch: the two ends speak different peer protocol
	// versions.
	CloseVersionMismatch CloseCode = 4
	// CloseTooManyLinks: the listener holds as many links as it may.
	CloseTooManyLinks CloseCode = 5
	// CloseProtocolError: a frame after the handshake did not decode.
	CloseProtocolError CloseCode = 6
)

// closeCodeNames names every close code, in order, as docs/protocol.md's
// peer close code table does.
var closeCodeNames = []struct {
	Code CloseCode
	Name string
}{
	{CloseNormal, "normal"},
	{CloseShutdown, "shutdown"},
	{CloseBadHandshake, "bad handshake"},
	{CloseWrongNode, "wrong node"},
	{CloseVersionMismatch, "version mismatch"},
	{CloseTooManyLinks, "too many links"},
	{CloseProtocolError, "protocol error"},
}

// Named errors of the peer link; Dial's and a link's errors match them
// with errors.Is. Certificate refusals found by this end also match
// tlsconf's ErrNoPeerCert, ErrUntrustedPeer, ErrNoNodeID or ErrWrongNode.
var (
	// ErrWrongNode: the other end is not the node expected (its
	// certificate or its handshake names another node).
	ErrWrongNode = errors.New("peer: wrong node")
	// ErrVersionMismatch: the two ends speak different protocol versions.
	ErrVersionMismatch = errors.New("peer: protocol version mismatch")
	// ErrStorageMismatch: the node answered with another storage identity
	// than the one expected.
	ErrStorageMismatch = errors.New("peer: storage identity mismatch")
	// ErrRefused: the other end refused this node's certificate.
	ErrRefused = errors.New("peer: certificate refused by the other node")
	// ErrBadHandshake: the handshake did not complete as the protocol says.
	ErrBadHandshake = errors.New("peer: bad handshake")
	// ErrBusy: a bounded queue is full (too many links, pings or frames
	// waiting); try again later.
	ErrBusy = errors.New("peer: busy")
	// ErrClosed: the link or the endpoint is closed.
	ErrClosed = errors.New("peer: closed")
)

// closeName is the name of code, as the protocol doc gives it.
func closeName(code CloseCode) string {
	for _, c := range closeCodeNames {
		if c.Code == code {
			return fmt.Sprintf("%d %s", code, c.Name)
		}
	}
	return fmt.Sprintf("%d", code)
}

// closeErrors maps the close codes a remote end sends to named errors.
var closeErrors = map[CloseCode]error{
	CloseShutdown:        ErrClosed,
	CloseBadHandshake:    ErrBadHandshake,
	CloseWrongNode:       ErrWrongNode,
	CloseVersionMismatch: ErrVersionMismatch,
	CloseTooManyLinks:    ErrBusy,
	CloseProtocolError:   ErrBadHandshake,
}

// remoteError names the error a connection close from the other end
// carries.
func remoteError(err error) error {
	var ae *transport.ApplicationError
	if errors.As(err, &ae) && ae.Remote {
		if named, ok := closeErrors[ae.Code]; ok {
			return fmt.Errorf("%w: the other node closed the link (%s): %s", named, closeName(ae.Code), ae.Message)
		}
		if ae.Code == CloseNormal {
			return fmt.Errorf("%w: the other node closed the link: %s", ErrClosed, ae.Message)
		}
	}
	// A TLS alert from the other end: it refused this node's certificate.
	var alert tls.AlertError
	if errors.Is(err, transport.ErrConnectionLost) && errors.As(err, &alert) {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return err
}

// permanent reports whether a dial error will not go away by trying
// again: the other end is the wrong node, speaks another version, has
// another storage identity, or one end refused the other's certificate.
func permanent(err error) bool {
	for _, e := range []error{ErrWrongNode, ErrVersionMismatch, ErrStorageMismatch, ErrRefused, ErrBadHandshake} {
		if errors.Is(err, e) {
			return true
		}
	}
	return certificateRefusal(err)
}
