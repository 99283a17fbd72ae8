// Package broker is the Felix broker as a network service: a QUIC
// listener in front of the transport-independent core, with publish
// admission and scheduling, subscription writers, cache requests, catalog
// sync and the HTTP health and metrics endpoints.
//
// # Usage
//
//	cfg, err := broker.ConfigFromEnv(os.Getenv)     // every bad value reported at once
//	srv, err := broker.New(cfg, broker.Deps{Catalog: src, TLS: tlsCfg, Logger: log, Verifier: v})
//	err = srv.Start(ctx)                            // returns once listening
//	http.ListenAndServe(addr, srv.HTTPHandler())    // /metrics, /live, /ready
//	<-srv.Synced()                                  // optional: first catalog sync done
//	err = srv.Shutdown(ctx)                         // drain under ctx's deadline
//
// # Registration
//
// When Deps.Registry (or a Catalog that implements Registry) is set,
// Start registers the broker with the control plane once its listener is
// bound: node id, advertised address, zone, region, the fleet features it
// implements and a storage identity kept in storage.id in the durable
// storage directory. A refusal fails Start; an unreachable control plane
// is retried in the background. A heartbeat task (stopped by Shutdown)
// then heartbeats every FELIX_NODE_HEARTBEAT_INTERVAL_MS, registers again
// when a heartbeat is refused, calls Deps.OnFatal when a registration is
// refused later, and shows the gate its answers carry as
// felix_broker_fleet_feature_enabled. Every answer renews the broker's
// lease (the answer's expiry_timeout_ms after the call was sent): a broker
// whose lease lapsed serves none of its shards. See registration.go.
//
// # Cluster view
//
// With Deps.Cluster set the broker is in a cluster: Start applies the
// control plane's cluster view (every broker and every shard's
// assignment) before the listener accepts anything, a loop polls it every
// FELIX_CLUSTER_VIEW_INTERVAL_MS, and a request for a shard the view does
// not place yet fetches it once more (Server.route). See cluster_view.go
// and routes.go.
//
// # Peer link
//
// With Config.Peer set, Start also opens the peer listener: QUIC with ALPN
// felix-peer/1 and mutual TLS, each side checking that the other's node
// certificate names the node it expects (felix-node://<node-id>). Its
// advertised address is registered as peer_addr. The link carries a
// handshake and ping today (package peer); Shutdown closes it after the
// rest of the background work. See peer_config.go and peer_link.go.
//
// # Streams
//
// Every stream a client opens begins with a JSON auth frame. A
// bidirectional stream is a control loop: requests in, answers out, in the
// order the broker finishes them (answers carry request ids). One
// goroutine owns each stream's send half; everything else hands it encoded
// frames on a bounded channel. A client-opened unidirectional stream
// carries fire-and-forget publishes only. Each subscription gets a
// broker-opened unidirectional stream that starts with
// event_stream_hello; the client reads subscribed on the control stream
// first. A subscription's writer runs only while it has something to
// write (started by the core queue's notify, a revocation or the
// connection's drain), one goroutine at a time, so idle subscriptions
// cost memory but no goroutine.
//
// A malformed JSON request is answered with invalid_request and the stream
// keeps serving; broken framing (bad header, oversized frame, undecodable
// binary publish) and refused auth end the stream after the error. An
// unknown request type is answered with unsupported when the client
// offered FEATURE_UNSUPPORTED and ends the stream otherwise.
//
// # Revocation and expiry
//
// Every authenticated stream (control, ingress, and each subscription's
// event stream) is registered under its token's principal (tenant,
// subject) until it ends. The catalog sync follows the revocations feed;
// a revocation is recorded first and then ends every registered stream it
// covers (token issued before revoked_before): a control or ingress stream
// is answered with an error of code revoked and refused (the peer's sends
// are cancelled), a subscription gets a final error frame of code revoked
// on its event stream. Other principals' streams on the same connection
// go on. A new auth with a covered token is refused with revoked. Counted
// in felix_broker_revoked_streams_total. An expired token is different: it
// stops new requests (unauthorized "token expired") but open
// subscriptions keep delivering.
//
// # Names the broker does not know
//
// The catalog sync polls every CatalogSyncInterval, but a tenant,
// namespace, stream or cache the control plane has acknowledged is served
// at once: a request for a name the broker misses runs (or joins) an
// on-demand pass of that kind (catalogsync.Syncer.SyncKinds) and looks
// again before it answers not_found. Lookups are shared and paced per kind
// (at most one pass per 100 ms; a miss waits at most 2 s); a not_found
// after a lookup that read the catalog carries detail in_catalog false
// (wire.DetailInCatalog). See catalog_lookup.go.
//
// # Publish admission
//
// A publish is authorized, resolved to a stream shard, charged against the
// connection's and the process's byte budgets and a place in its shard's
// lane, and queued in the scheduler (fair across tenants). When any of
// those has no room an acked publish is refused with overloaded (detail
// reason publish_queue_full) and a fire-and-forget one is dropped and
// counted, unless FELIX_PUB_INGRESS_WAIT makes it wait. An acked publish
// is answered when queued, or after the core publish with
// FELIX_ACK_ON_COMMIT or FEATURE_ACK_ON_COMMIT. A shard's publishes reach
// the core one at a time in lane order; one waiting on a Block-policy
// subscriber holds its shard's lane, never a scheduler executor.
//
// # Shutdown
//
// Shutdown turns readiness off, stops accepting connections and streams,
// gives in-flight streams half the remaining budget, then stops their
// reads, answers what was read, lets subscriptions write what is queued,
// and closes each connection with wire.CloseShutdown. Nothing the server started outlives Shutdown.
package broker
