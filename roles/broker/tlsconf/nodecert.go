package tlsconf

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// A node certificate binds a broker's node id to a key: it carries the
// URI SAN felix-node://<node-id> (the binding every peer checks) and,
// for tools that only look at DNS names, the DNS SAN <node-id>.node.felix
// when the node id is a lower-case DNS name.
// It is valid for both server and client authentication, because a
// broker both accepts and dials peer links with it.
const (
	// NodeURIScheme is the scheme of the URI SAN naming a node.
	NodeURIScheme = "felix-node"
	// NodeDNSSuffix follows the node id in a node certificate's DNS SAN.
	NodeDNSSuffix = ".node.felix"
	// NodeCertFile and NodeKeyFile are the names WriteNodeCert uses.
	NodeCertFile = "node.pem"
	NodeKeyFile  = "node-key.pem"
	// maxNodeIDLen bounds a node id, as the control plane bounds names.
	maxNodeIDLen = 128
)

// ErrBadNodeID is returned for a node id that cannot name a node: empty,
// longer than 128 bytes, or with a byte other than a letter, a digit,
// '.', '_' or '-' (the control plane's rule for names).
var ErrBadNodeID = errors.New("tlsconf: bad node id")

// ErrNoNodeID is returned for a certificate that names no node, or more
// than one.
var ErrNoNodeID = errors.New("tlsconf: certificate names no node id")

// CheckNodeID reports whether id can name a node (ErrBadNodeID if not).
func CheckNodeID(id string) error {
	ok := id != "" && len(id) <= maxNodeIDLen
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("%w %q: want 1 to %d letters, digits, '.', '_' or '-'", ErrBadNodeID, id, maxNodeIDLen)
	}
	return nil
}

// dnsName is the DNS SAN for id, or "" when id is not a lower-case DNS
// name (then only the URI SAN names the node).
func dnsName(id string) string {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return ""
		}
	}
	return id + NodeDNSSuffix
}

// NodeURI is the URI SAN naming node id.
func NodeURI(id string) *url.URL {
	return &url.URL{Scheme: NodeURIScheme, Host: id}
}

// NodeIDOf returns the node id cert names: the host of its one
// felix-node:// URI SAN. ErrNoNodeID when it has none, or several.
func NodeIDOf(cert *x509.Certificate) (string, error) {
	id := ""
	for _, u := range cert.URIs {
		if u.Scheme != NodeURIScheme {
			continue
		}
		if id != "" {
			return "", fmt.Errorf("%w: several %s:// names", ErrNoNodeID, NodeURIScheme)
		}
		id = u.Host
	}
	if id == "" {
		return "", fmt.Errorf("%w (want a URI SAN %s://<node-id>)", ErrNoNodeID, NodeURIScheme)
	}
	if err := CheckNodeID(id); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoNodeID, err)
	}
	return id, nil
}

// IssueNodeCert signs a node certificate for nodeID with the CA given as
// PEM, usable as server and as client. validity 0 means 90 days. The
// chain is leaf, CA; Leaf is set.
func IssueNodeCert(caCertPEM, caKeyPEM []byte, nodeID string, validity time.Duration) (tls.Certificate, error) {
	if err := CheckNodeID(nodeID); err != nil {
		return tls.Certificate{}, err
	}
	return signLeaf(caCertPEM, caKeyPEM, validity, "node", func(tmpl *x509.Certificate) error {
		tmpl.Subject = pkix.Name{CommonName: nodeID, Organization: []string{"Felix"}}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.URIs = []*url.URL{NodeURI(nodeID)}
		if dns := dnsName(nodeID); dns != "" {
			tmpl.DNSNames = []string{dns}
		}
		return nil
	})
}

// WriteNodeCert makes sure dir holds a development CA (EnsureDevCA),
// issues a fresh node certificate for nodeID with it and writes it to
// dir/node.pem (leaf then CA) and dir/node-key.pem (mode 0600). A new
// certificate on every start keeps it matching the node id in use.
func WriteNodeCert(dir, nodeID string) (certPath, keyPath, caPath string, err error) {
	caPath, caKeyPath, _, err := EnsureDevCA(dir)
	if err != nil {
		return "", "", "", err
	}
	caPEM, err := os.ReadFile(caPath)
	if err != nil {
		return "", "", "", fmt.Errorf("tlsconf: %w", err)
	}
	caKeyPEM, err := os.ReadFile(caKeyPath)
	if err != nil {
		return "", "", "", fmt.Errorf("tlsconf: %w", err)
	}
	cert, err := IssueNodeCert(caPEM, caKeyPEM, nodeID, 0)
	if err != nil {
		return "", "", "", err
	}
	keyPEM, err := marshalKeyPEM(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		return "", "", "", err
	}
	var certPEM []byte
	for _, der := range cert.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	certPath, keyPath = filepath.Join(dir, NodeCertFile), filepath.Join(dir, NodeKeyFile)
	if err := writeFile(keyPath, keyPEM, 0o600); err != nil {
		return "", "", "", err
	}
	if err := writeFile(certPath, certPEM, 0o644); err != nil {
		return "", "", "", err
	}
	return certPath, keyPath, caPath, nil
}

// NodeCredentials are what a broker needs on its peer links: its node
// certificate and the CAs a peer's certificate must chain to.
type NodeCredentials struct {
	Cert   tls.Certificate
	NodeID string // the node id Cert names
	CAs    *x509.CertPool
}

// LoadNodeCredentials reads a node certificate (PEM, leaf first), its
// key and the cluster CA file. The certificate must name exactly one
// node id (ErrNoNodeID otherwise).
func LoadNodeCredentials(certFile, keyFile, caFile string) (NodeCredentials, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return NodeCredentials{}, fmt.Errorf("tlsconf: node certificate: %w", err)
	}
	id, err := NodeIDOf(cert.Leaf)
	if err != nil {
		return NodeCredentials{}, fmt.Errorf("node certificate %s: %w", certFile, err)
	}
	pool, err := loadPool(caFile)
	if err != nil {
		return NodeCredentials{}, fmt.Errorf("tlsconf: cluster CA: %w", err)
	}
	return NodeCredentials{Cert: cert, NodeID: id, CAs: pool}, nil
}
