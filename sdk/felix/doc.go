// Package felix is the Go client for Felix brokers: publish, subscribe and
// cache over one QUIC connection per broker.
//
// # Connecting
//
// A Client holds one TLS 1.3 QUIC connection (ALPN "felix/1") to one
// broker. The broker is always verified against Config.CAFile or
// Config.RootCAs; there is no way to skip verification. Every stream the
// client opens starts with an auth carrying Config.Tenant and Config.Token;
// Connect authenticates one stream before returning, so a bad token fails
// there with a *BrokerError of code unauthorized. ConfigFromEnv reads the
// FELIX_* variables; bad values are reported by Connect.
//
// ClusterClient has the same methods and keeps one Client to one of its
// seeds, replacing it when the connection dies (see its doc for which
// calls are retried).
//
// # Publishing
//
// Publishes are spread over Config.PublishStreams streams by (namespace,
// stream): one stream's publishes share a single writer and QUIC stream,
// so they reach the broker in call order. With AckNone a call returns once
// its frame is queued for that writer (bounded: 1024 requests per writer
// and 64 MiB across writers, after which calls wait); Finish waits until
// the broker has read everything queued and reports the failures met. With
// AckPerMessage or AckPerBatch the call waits for the broker's answer; a
// refusal is a *BrokerError carrying the code, retry class and detail.
// Binary frames are used when the broker advertises them, JSON otherwise.
//
// Cancelling a publish's context stops the wait, not the publish: a frame
// already written may still be applied. A refusal of a fire-and-forget
// frame (an error message with no request id) is reported by the next
// Finish. When a publish stream ends or the connection dies, acked
// publishes written on it and not yet answered fail with a *BrokerError of
// code internal and retry class outcome_unknown (errors.Is also matches
// ErrConnectionLost when the connection died); the next call opens a fresh
// stream.
//
// # Subscribing
//
// Subscribe opens a stream for the request; the broker answers with the
// subscription id and opens a unidirectional event stream for it. Each
// subscription buffers up to Config.EventQueue events; when that is full
// the client stops reading and QUIC flow control slows the broker, whose
// stream policy then decides what to drop. Next is cancel-safe: a context
// that ends loses nothing. When the connection dies or the broker ends the
// event stream, Next returns the events already received and then
// ErrSubscriptionLost; an error the broker sends on the event stream ends
// the subscription with that *BrokerError. Subscription.Close makes Next
// return ErrClosed at once; Client.Close lets queued events drain first.
//
// # Cache
//
// CachePut, CacheGet and CacheDelete are request/response calls over
// Config.CacheStreams streams; each carries up to 256 requests in flight, matched
// to their answers by request_id.
// CacheGet and CacheDelete return found=false for an absent key and a
// non-nil empty slice for a stored empty value.
//
// # Errors
//
// Refusals from the broker are *BrokerError (use errors.As and branch on
// Retry). ErrConnectionLost wraps failures caused by the connection going
// away, ErrSubscriptionLost ends subscriptions that lost their stream, and
// ErrClosed is returned after Close.
//
// # Metrics
//
// felix_client_publish_total, felix_client_publish_errors_total,
// felix_client_events_received_total and felix_client_reconnects_total are
// registered in the VictoriaMetrics default set.
package felix
