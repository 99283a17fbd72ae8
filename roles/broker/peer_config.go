package broker

import (
	"errors"
	"fmt"

	"github.com/felixmq/felix/roles/broker/tlsconf"
	"github.com/felixmq/felix/transport"
)

// PeerConfig is the broker's peer listener: where other brokers of the
// cluster reach it (roles/broker/peer, docs/protocol.md "Peer protocol").
type PeerConfig struct {
	// Addr is the UDP address the peer listener binds
	// (FELIX_NODE_PEER_ADDR; default "": no peer listener; felix serve
	// and felix broker default it to 127.0.0.1:0 with --peer-addr).
	Addr string
	// AdvertiseAddr is the peer address registered with the control
	// plane (FELIX_NODE_PEER_ADVERTISE_ADDR; default the listener's
	// address, with the host name in place of an unspecified IP).
	AdvertiseAddr string
	// CertFile, KeyFile and CAFile are the operator's node certificate
	// (PEM, naming felix-node://<node id>), its key and the cluster CA
	// (FELIX_NODE_TLS_CERT, FELIX_NODE_TLS_KEY, FELIX_NODE_TLS_CA): all
	// three or none.
	CertFile, KeyFile, CAFile string
	// DevCADir is where the development CA lives when no operator
	// certificate is given: the broker issues itself a node certificate
	// there (node.pem, node-key.pem) at every start. felix serve sets it
	// to <data-dir>/tls; empty means the operator must give one.
	DevCADir string
	// Transport is what this broker dials other brokers over
	// (FELIX_PEER_TRANSPORT): "tcp" (default) or "quic". Every peer
	// listener accepts both on its one port number.
	Transport transport.Kind
}

func (r *envReader) peer(p *PeerConfig) {
	r.str(&p.Addr, "FELIX_NODE_PEER_ADDR")
	r.str(&p.AdvertiseAddr, "FELIX_NODE_PEER_ADVERTISE_ADDR")
	r.str(&p.CertFile, "FELIX_NODE_TLS_CERT")
	r.str(&p.KeyFile, "FELIX_NODE_TLS_KEY")
	r.str(&p.CAFile, "FELIX_NODE_TLS_CA")
	var kind string
	r.str(&kind, "FELIX_PEER_TRANSPORT")
	p.Transport = transport.Kind(kind)
}

// validate checks that the operator's files come together.
func (p *PeerConfig) validate() error {
	set := 0
	for _, f := range []string{p.CertFile, p.KeyFile, p.CAFile} {
		if f != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		return errors.New("broker config: FELIX_NODE_TLS_CERT, FELIX_NODE_TLS_KEY and FELIX_NODE_TLS_CA must be set together")
	}
	switch p.Transport {
	case "", transport.TCP, transport.QUIC:
	default:
		return fmt.Errorf("broker config: FELIX_PEER_TRANSPORT=%q: want %q or %q", p.Transport, transport.TCP, transport.QUIC)
	}
	return nil
}

// credentials loads the node certificate for nodeID: the operator's when
// given, else one the development CA issues now.
func (p *PeerConfig) credentials(nodeID string) (tlsconf.NodeCredentials, error) {
	certFile, keyFile, caFile := p.CertFile, p.KeyFile, p.CAFile
	if certFile == "" {
		if p.DevCADir == "" {
			return tlsconf.NodeCredentials{}, errors.New("the peer listener needs a node certificate: set FELIX_NODE_TLS_CERT, FELIX_NODE_TLS_KEY and FELIX_NODE_TLS_CA")
		}
		var err error
		certFile, keyFile, caFile, err = tlsconf.WriteNodeCert(p.DevCADir, nodeID)
		if err != nil {
			return tlsconf.NodeCredentials{}, fmt.Errorf("development node certificate: %w", err)
		}
	}
	cr, err := tlsconf.LoadNodeCredentials(certFile, keyFile, caFile)
	if err != nil {
		return cr, err
	}
	if cr.NodeID != nodeID {
		return cr, fmt.Errorf("FELIX_NODE_TLS_CERT %s names node %q, but this broker is %q (FELIX_NODE_ID)", certFile, cr.NodeID, nodeID)
	}
	return cr, nil
}
