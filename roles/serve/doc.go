// Package serve assembles the felix binary: the command-line app, and the
// roles that run as servers. `felix serve` runs a control plane and a
// broker in one process, wired together in-process (the broker learns the
// catalog and the token keys straight from the control plane's service),
// with all state under one data directory:
//
//	<data-dir>/controlplane.db   catalog and signing keys (bbolt)
//	<data-dir>/tls/ca.pem        development CA (when no operator certificate is given)
//	<data-dir>/admin.token       cluster-scope token (0600), minted on first start
//	<data-dir>/client.json       what a client needs: addresses, CA file, token file, tenant
//
// `felix broker` and `felix controlplane` run one role each; the broker
// then syncs the catalog over HTTP. Only this package (and roles/dev)
// imports more than one role.
package serve
