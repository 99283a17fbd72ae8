package felix

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

// Sentinel errors. Compare with errors.Is.
var (
	// ErrClosed is returned by calls on a Client (or Subscription) after
	// Close, and by Next on a subscription whose client was closed.
	ErrClosed = errors.New("felix: client closed")
	// ErrSubscriptionLost is returned by Subscription.Next once the events
	// already received are drained, when the connection died or the event
	// stream ended without the client asking for it.
	ErrSubscriptionLost = errors.New("felix: subscription lost")
	// ErrConnectionLost wraps every failure caused by the QUIC connection
	// to the broker going away.
	ErrConnectionLost = errors.New("felix: connection to the broker lost")
)

// BrokerError is a refusal sent by the broker (an error, publish_error or
// unsupported message), or a failure the client reports in the same shape
// (an acknowledged publish whose connection died before the answer is
// Code internal with Retry outcome_unknown). Find it with errors.As and
// branch on Retry: only retry, retry_after and redirect promise that
// nothing was applied.
type BrokerError struct {
	Code    wire.Code
	Retry   wire.RetryClass
	Message string
	Detail  map[string]any

	cause error // what the client saw when it built the error itself
}

// Error implements error.
func (e *BrokerError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("felix: broker error %s (%s)", e.Code, e.Retry)
	}
	return fmt.Sprintf("felix: broker error %s (%s): %s", e.Code, e.Retry, e.Message)
}

// Unwrap returns the underlying cause for errors the client built itself
// (ErrConnectionLost for an ambiguous publish), or nil.
func (e *BrokerError) Unwrap() error { return e.cause }

// fromWire converts a protocol error into a BrokerError.
func fromWire(w *wire.Error) *BrokerError {
	return &BrokerError{Code: w.Code, Retry: w.Retry, Message: w.Message, Detail: w.Detail}
}

// outcomeUnknown reports an acknowledged publish whose answer never came
// because its stream or connection failed after the frame was handed to
// QUIC.
func outcomeUnknown(cause error) *BrokerError {
	return &BrokerError{
		Code:    wire.CodeInternal,
		Retry:   wire.RetryOutcomeUnknown,
		Message: "no answer before the stream failed; the publish may have been applied: " + cause.Error(),
		cause:   cause,
	}
}

// unsupported reports a request the broker did not advertise support for.
func unsupported(what string) *BrokerError {
	return &BrokerError{Code: wire.CodeUnsupported, Retry: wire.RetryFatal,
		Message: "the broker did not advertise " + what}
}

// notSentError marks a failure that happened before any byte of the
// request left the client, so sending it again cannot duplicate it.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

func notSent(err error) error {
	if err == nil {
		return nil
	}
	var ns *notSentError
	if errors.As(err, &ns) {
		return err
	}
	return &notSentError{err: err}
}

func wasNotSent(err error) bool {
	var ns *notSentError
	return errors.As(err, &ns)
}

// invalidArg is a client-side validation failure; nothing was sent.
func invalidArg(format string, args ...any) error {
	return notSent(fmt.Errorf("felix: "+format, args...))
}

// DialError is a dial to the broker that failed before a connection was
// made. QUIC runs over UDP, where nothing answers "connection refused": a
// broker that is not running, a wrong address and a firewall dropping UDP
// all end in the same timeout, which Timeout reports (Transport "tcp" or
// "auto" gets through where only UDP is dropped). Find it with errors.As.
type DialError struct {
	Addr      string        // the address dialed
	Transport string        // Config.Transport: "quic", "tcp" or "auto"
	Waited    time.Duration // how long the dial waited before giving up
	Err       error         // what the transport or the context reported
}

// Error implements error. A timeout says that nothing answered and how
// long the dial waited, rather than quic-go's "no recent network
// activity" or "context deadline exceeded".
func (e *DialError) Error() string {
	if e.Timeout() {
		return fmt.Sprintf("felix: nothing answered at %s over %s within %v", e.Addr, transportName(e.Transport), e.Waited)
	}
	if errors.Is(e.Err, syscall.ECONNREFUSED) {
		return fmt.Sprintf("felix: nothing listens at %s over %s (connection refused)", e.Addr, transportName(e.Transport))
	}
	return fmt.Sprintf("felix: dial %s: %v", e.Addr, e.Err)
}

// Unwrap returns the dial's own error.
func (e *DialError) Unwrap() error { return e.Err }

// Timeout reports whether the dial gave up waiting for an answer (its
// handshake or its context timed out), as opposed to failing at once
// (a bad address, a refused certificate).
func (e *DialError) Timeout() bool {
	if errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, transport.ErrHandshakeTimeout) ||
		errors.Is(e.Err, transport.ErrIdleTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(e.Err, &ne) && ne.Timeout()
}

// dialError wraps a failed dial of addr over kind that started at start.
func dialError(addr, kind string, start time.Time, err error) *DialError {
	return &DialError{Addr: addr, Transport: kind, Waited: time.Since(start).Round(100 * time.Millisecond), Err: err}
}

// transportName says how a dial over kind travelled, for messages.
func transportName(kind string) string {
	switch kind {
	case TransportTCP:
		return "TLS over TCP"
	case TransportAuto:
		return "QUIC (UDP) or TLS over TCP"
	}
	return "QUIC (UDP)"
}
