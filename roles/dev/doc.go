// Package dev is `felix dev`: a cluster of N nodes (three by default) on
// this machine's loopback interface, for trying clustering, replication
// and failover on a laptop. Each node is a child `felix serve` process of
// the same executable, a voter of the control plane's Raft group and a
// broker, with its state in <data-dir>/node<i>:
//
//	<data-dir>/tls/ca.pem, ca-key.pem  the cluster's development CA, made once
//	                                   and copied into every node's tls/ before
//	                                   it first starts, so brokers' serving and
//	                                   peer (felix-node://) certificates share it
//	<data-dir>/node<i>/                the node's --data-dir (felix serve's layout)
//	<data-dir>/client.json             every broker and control plane, the CA and
//	                                   node1's admin token: client commands given
//	                                   --data-dir <data-dir> reach the cluster
//	<data-dir>/dev.json                per node: PID, addresses, data directory and
//	                                   the argv and env that start it again
//	<data-dir>/dev.lock                held (flock) by the felix dev running here
//
// Contract:
//
//  1. Ports are picked free on 127.0.0.1 (or from --base-port), so two
//     `felix dev` with different data directories run side by side. A
//     restart on an existing data directory reuses dev.json's ports where
//     they are still free and brings the same cluster back.
//  2. Children run in their own process group, so a terminal's Ctrl-C
//     reaches felix dev only; it then sends SIGTERM to every node, waits
//     up to --stop-timeout, and SIGKILLs what is left. A second signal
//     kills at once.
//  3. A child that exits is reported with the command that restarts it;
//     the others keep running. felix dev exits when none is left.
//  4. Every line a child writes is prefixed "node<i> | ".
//  5. A second felix dev on a directory in use stops before it writes
//     anything there.
package dev
