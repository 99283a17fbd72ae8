// Package peer is the link between brokers of one cluster: a general
// message channel that this release uses for a handshake, ping/pong and
// calls (a request and its reply, call.go: forwarded publishes and cache
// operations), and that replication (log shipping, fences) will use next.
//
// The contract:
//
//  1. Transport. QUIC on the broker's own peer listener, ALPN
//     "felix-peer/1" (never the client's "felix/1"), TLS 1.3 only.
//  2. Mutual TLS bound to node ids. Each end presents a node certificate
//     (tlsconf: URI SAN felix-node://<node-id>, server and client usage)
//     signed by the cluster CA. The listener requires one from the
//     dialer; each end checks the other's with tlsconf.VerifyNode: the
//     dialer wants the node id it dialed, the listener any node of the
//     cluster, then the handshake's node id must be the certificate's.
//     A refusal at TLS time closes the connection with a QUIC
//     CRYPTO_ERROR (0x100 + TLS alert); a refused handshake closes it
//     with one of this package's CloseCodes and a reason. The listener
//     logs every refusal ("refused a peer connection: ...") with the
//     remote address.
//  3. Framing. Each message is one JSON object (Hello, Welcome, Ping,
//     Pong) behind the wire frame header with flags 0, on the link's one
//     bidirectional stream, opened by the dialer. Frames are at most
//     Config.MaxFrameBytes. A message of an unknown type is ignored.
//     Calls (call.go, callstream.go, callframe.go) travel on a few
//     long-lived call streams each end of a handshaken link opens: call
//     frames (flags FlagCall: a request, its reply or a cancel, named by
//     the caller's call id) on shared streams, replies in the order
//     handlers finish. Config.Handle answers them with the caller's
//     handshaken identity.
//  4. Handshake (handshake.go). peer_hello then peer_welcome within
//     HandshakeTimeout; a version, node id or storage identity that does
//     not match is refused with ErrVersionMismatch, ErrWrongNode or
//     ErrStorageMismatch.
//  5. Bounds. MaxLinks links (handshakes included) per endpoint,
//     SendQueue frames queued per link, MaxPendingPings pings awaiting a
//     pong per link, MaxCallsInFlight calls per link; past each, ErrBusy (a pong that does not fit is
//     dropped: the ping times out at its sender, as a lost one would).
//  6. Ownership. The Endpoint owns every goroutine: its accept loop, one
//     per handshake under way, one per dial Call shares, and per link a
//     reader with its writer, its call acceptor and each call it serves
//     as children. Endpoint.Close closes every link (CloseShutdown) and returns
//     once all of them have ended; Link.Close likewise for one link.
//     Dial runs on its caller's goroutine and retries with a doubling
//     back-off, except after a refusal.
//
// This package reaches the network through the transport interface
// (transport.Conn and its streams; transport/quictr listens and dials,
// transport.go here is the one place that names it) and imports, of
// Felix, only wire, transport, roles/broker/tlsconf and internal/gogroup.
package peer
