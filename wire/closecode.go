package wire

import "strconv"

// CloseCode is an application error code (RFC 9000 §20.2) a Felix peer
// sends when it resets a stream (RESET_STREAM), stops reading one
// (STOP_SENDING) or closes a connection (CONNECTION_CLOSE). QUIC gives
// streams and connections separate code spaces; Felix uses one table for
// both, so a value means the same thing wherever it is seen. A receiver
// tolerates a code it does not know: the stream or connection is over,
// and it was not CloseNoError.
//
// The table, with who sends each code and what the peer does, is in
// docs/protocol.md under "Stream and connection close codes".
type CloseCode uint64

// The close codes of the protocol. Values are never reused: a new meaning
// gets a new value.
const (
	// CloseNoError ends a stream or connection on purpose with nothing
	// wrong: a client stopping an event stream whose subscription or watch
	// it closed, abandoning a control stream, or closing its connection.
	// The peer releases what it held for the stream (the broker ends the
	// subscription) and reports no error.
	CloseNoError CloseCode = 0
	// CloseRefused is a stream the broker stopped serving: refused or
	// revoked credentials, malformed framing, an unknown request type, or
	// an event stream it could not start. The peer treats the stream's
	// requests as ended; the reason, when there is one, came in an error
	// frame first. A new stream may be opened after fixing the cause.
	CloseRefused CloseCode = 1
	// CloseShutdown is a stream or connection the broker ended without a
	// last frame: it is draining (a connection closed at the end of a
	// drain, or refused while draining), or an event stream's writer
	// could not go on. The peer treats its subscriptions and watches on it
	// as lost and reconnects, to another broker when it knows one.
	CloseShutdown CloseCode = 2
	// CloseTooManyConnections closes a new connection past the broker's
	// FELIX_MAX_CONNECTIONS_PER_SOURCE. The peer backs off before
	// connecting again from the same source, or shares its connections.
	CloseTooManyConnections CloseCode = 3
	// CloseEvicted is an event stream the client dropped unread: too many
	// were waiting for a subscription to claim them (the oldest goes), or
	// a newer stream named the same subscription. The broker ends that
	// event stream's subscription.
	CloseEvicted CloseCode = 4
	// CloseBadStream is an event stream the client stopped because it broke
	// the protocol: it did not start with event_stream_hello, or a frame
	// on it did not decode. The broker ends the subscription; the client
	// has already reported it lost.
	CloseBadStream CloseCode = 5
)

// CloseCodeInfo names one close code for logs and documentation.
type CloseCodeInfo struct {
	Code CloseCode
	Name string
}

// CloseCodes lists every close code in value order: the one table of them.
var CloseCodes = []CloseCodeInfo{
	{CloseNoError, "no_error"},
	{CloseRefused, "refused"},
	{CloseShutdown, "shutdown"},
	{CloseTooManyConnections, "too_many_connections"},
	{CloseEvicted, "evicted"},
	{CloseBadStream, "bad_stream"},
}

// String returns the code's name from CloseCodes, or its number for a
// code this version does not know.
func (c CloseCode) String() string {
	for _, info := range CloseCodes {
		if info.Code == c {
			return info.Name
		}
	}
	return "close_code_" + strconv.FormatUint(uint64(c), 10)
}
