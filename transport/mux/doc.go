// Package mux multiplexes QUIC-shaped streams over one reliable, ordered
// byte stream (in production a *tls.Conn, see transport/tcptr). A
// *Session implements transport.Conn. The frame format is in
// docs/protocol.md, "TCP transport".
//
// What a session promises:
//
//  1. Streams. Either side opens bidirectional and unidirectional streams;
//     ids are QUIC's (bit 0: opened by the server, bit 1: unidirectional,
//     the rest: the stream's number). A stream reaches the peer's
//     AcceptStream with its first frame, not when it is opened.
//  2. Stream limits. Each side tells the other how many streams of each
//     kind it may open (Config.MaxIncomingStreams, MaxIncomingUniStreams)
//     and allows one more each time one of the peer's streams ends in
//     both directions. OpenStreamSync waits for that within its context;
//     it fails at once with an error when the peer's limit is 0 (a
//     negative limit in its Config), since a peer that starts at 0 never
//     raises it.
//  3. Flow control. Each stream and the connection have a receive window
//     (starting at Config.Initial*ReceiveWindow, doubling toward
//     Max*ReceiveWindow when the reader empties it within about two round
//     trips). Unread bytes of a stream never exceed its maximum window, so
//     a reader that stops holds at most that much and blocks only its own
//     stream's writer: other streams go on while the connection window
//     exceeds what stalled streams hold (it starts at 1.5 times the stream
//     window by default and keeps at least 1.5 times the largest grown
//     stream window). A peer that sends beyond its credit ends the session
//     with transport.ErrConnectionLost ("flow control violated").
//  4. Ends. Close sends a FIN after what was written; CancelWrite a reset
//     with a code, which the reader's Read returns as a
//     *transport.StreamError{Remote: true}; CancelRead a stop-sending,
//     after which the writer's sends fail with that code (Remote: true)
//     and its side is reset. Our own calls after a local cancel get
//     Remote: false. A stream is forgotten once both directions are over.
//  5. Writes. Write waits for credit and for room in the connection's
//     write queue (bounded: a writer waits while 256 KiB are queued)
//     until the write deadline; deadline errors match
//     os.ErrDeadlineExceeded. A payload above 8 KiB is written from the
//     caller's slice while Write waits (no copy), so the deadline does not
//     interrupt a write already handed to the connection. TryWriteAll
//     queues all of p or returns transport.ErrWouldBlock.
//  6. Combining. There is no writer goroutine on the hot path: a stream's
//     Write queues its frame and, if no one is writing, writes everything
//     queued by every stream in one underlying write. The read loop
//     never writes (a goroutine flushes its window updates and ping
//     answers), so a peer that stops reading cannot stop us reading.
//  7. Close. CloseWithError writes a CLOSE frame (within one second),
//     closes the connection and waits for the session's three goroutines
//     (reader, writer, timer). The peer's operations then fail with
//     *transport.ApplicationError{Remote: true}, ours with Remote: false,
//     and Context's cause says so. A connection that breaks without a
//     CLOSE, or a peer that breaks the protocol, ends the session with an
//     error wrapping transport.ErrConnectionLost.
//  8. Liveness. A session pings every Config.KeepAlive while nothing
//     arrives and ends with transport.ErrIdleTimeout after
//     Config.MaxIdleTimeout (default 30 s) without a frame. Idle timeouts
//     are not negotiated: each side applies its own.
//  9. Bad input. Every header is checked (type, flags, stream id, length
//     against the type's bound) before its payload is read or allocated;
//     a bad frame ends the session with a CLOSE naming the problem, never
//     a panic. FuzzParseFrame and FuzzSession drive the decoder and a live
//     session with arbitrary bytes.
package mux
