// Package quictr is the QUIC transport: transport.Conn, Stream,
// SendStream, ReceiveStream and Listener over quic-go. It is the only
// package of ours, besides the raw-QUIC benchmark baseline in
// roles/cli/bench, that imports quic-go (deps_test.go's quicOwners).
//
// The contract:
//
//  1. Listen and Dial take a transport.Config; its zero fields keep
//     quic-go's defaults, the others map one to one onto quic.Config
//     (HandshakeTimeout onto HandshakeIdleTimeout, KeepAlive onto
//     KeepAlivePeriod, the four windows and the two stream limits onto
//     their namesakes).
//  2. Every error a method returns is translated once, on the error path
//     only: *quic.StreamError to *transport.StreamError,
//     *quic.ApplicationError to *transport.ApplicationError, idle and
//     handshake timeouts to transport.ErrIdleTimeout and
//     transport.ErrHandshakeTimeout, quic.ErrWouldBlock to
//     transport.ErrWouldBlock, and a transport error or a stateless
//     reset to an error matching transport.ErrConnectionLost whose text
//     is quic-go's. A CRYPTO_ERROR sent by the peer (it refused our
//     certificate or our handshake) also matches tls.AlertError with the
//     alert, and a local one matches what our TLS configuration refused
//     with. Deadline errors stay quic-go's: they match
//     os.ErrDeadlineExceeded. io.EOF stays io.EOF.
//  3. context.Cause of Conn.Context() and of SendStream.Context() is the
//     translated error. The translated context is made the first time
//     Context is called (once per connection or stream), so a stream
//     whose context nobody asks for costs nothing.
//  4. Beyond the interface, a connection has SendStats (bytes sent and
//     the smoothed RTT), which callers find with a type assertion.
//  5. Read and Write add no allocation to quic-go's on success; a bidirectional
//     stream is one wrapper for both directions, so it can key a map
//     whichever interface it is held as.
package quictr
