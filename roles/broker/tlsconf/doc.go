// Package tlsconf builds the broker's TLS configuration.
//
// Two certificate sources exist:
//
//   - An operator certificate (FELIX_TLS_CERT / FELIX_TLS_KEY), served by a
//     Reloader. The files are loaded at start (a bad pair is an error) and
//     checked again on handshakes, at most once per check interval (1s), by
//     modification time and size. A changed pair is loaded; if that load
//     fails the previous certificate keeps being served and the failure is
//     available from LastError.
//   - A development CA kept on disk (EnsureDevCA) that signs short-lived
//     server certificates (IssueServerCert). The CA is created once and
//     reused on later starts, so clients can keep trusting the same ca.pem.
//
// Peer links between brokers use node certificates: a certificate bound
// to a node id by the URI SAN felix-node://<node-id> (plus the DNS SAN
// <node-id>.node.felix when the id is a lower-case DNS name), valid for
// server and client authentication. WriteNodeCert issues one from the
// development CA into the CA's directory (node.pem, node-key.pem) on
// every start; LoadNodeCredentials reads an operator's node certificate,
// key and cluster CA instead. VerifyNode is the one check both ends of a
// peer link make: the chain leads to the cluster CA and the certificate
// names the expected node (ErrNoPeerCert, ErrUntrustedPeer, ErrNoNodeID,
// ErrWrongNode).
//
// ServerTLSConfig always yields TLS 1.3 only with the ALPN protocol
// "felix/1"; client certificates are verified when offered and a client CA
// file is given, never required. ClientTLSConfig is the matching client
// side for tests and tools: it always verifies the server.
//
// Keys are ECDSA P-256. Private keys are written with mode 0600 in PKCS#8
// PEM, through a temporary file and a rename, so a crash never leaves half
// a key behind.
//
// This package imports nothing else of Felix.
package tlsconf
