// Package serve assembles the felix binary: the command-line app, and the
// roles that run as servers. `felix serve` runs a control plane and a
// broker in one process, wired together in-process (the broker learns the
// catalog and the token keys straight from the control plane's service),
// with all state under one data directory:
//
//	<data-dir>/controlplane.lock, broker.lock
//	                             held (flock) by the one process running that role here: "PID running|stopping"
//	<data-dir>/raft/raft.db      the control plane's Raft log and snapshots
//	<data-dir>/raft/catalog.db   catalog, signing keys, revocations (bbolt)
//	<data-dir>/tls/ca.pem        development CA (when no operator certificate is given)
//	<data-dir>/admin.token       cluster-scope token (0600), minted on first start
//	<data-dir>/client.json       what a client needs: addresses, CA file, token file, tenant
//
// The control plane is always a Raft member: without --raft-peers a
// one-voter group with a loopback peer port, with them member
// --raft-node-id of that group (`felix controlplane`, and `felix serve` as
// one node of a cluster, whose broker is then broker-<raft node id>).
// Token signing keys and the default tenant live in the Raft catalog, so
// every member's admin.token is valid on every broker; the development
// CA does not: the nodes of a cluster share one only when their
// <data-dir>/tls/ca.pem and ca-key.pem are the same files' copies
// (roles/dev puts them there). A controlplane.db left by an
// earlier release is moved into the Raft store on the first start and
// renamed controlplane.db.migrated. FELIX_CONTROLPLANE_TLS_CERT/_KEY serve
// the REST API over TLS and secure peer traffic (mutual with
// FELIX_CONTROLPLANE_TLS_CLIENT_CA).
//
// A node starts in steps (node_start.go): the control plane, its REST
// listener, the broker, the metrics listener, client.json. Each starts one
// thing and records how to stop it as soon as it runs, so a step that
// fails stops, newest first, everything the steps before it started. On
// SIGTERM the broker drains first, within --shutdown-timeout, with its
// /ready still served; then the rest stops, newest first.
//
// `felix broker` and `felix controlplane` run one role each; the broker
// then syncs the catalog over HTTP. Only this package (and roles/dev)
// imports more than one role.
package serve
