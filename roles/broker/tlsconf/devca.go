package tlsconf

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/felixmq/felix/internal/atomicfile"
)

// Names of the development CA files inside the directory given to
// EnsureDevCA.
const (
	CACertFile = "ca.pem"
	CAKeyFile  = "ca-key.pem"
)

// caValidity is how long a development CA stays valid.
const caValidity = 10 * 365 * 24 * time.Hour

// defaultLeafValidity is used by IssueServerCert when validity is 0.
const defaultLeafValidity = 90 * 24 * time.Hour

// clockSkew backdates NotBefore so a peer whose clock runs slightly behind
// still accepts a certificate issued a moment ago.
const clockSkew = time.Hour

// EnsureDevCA makes sure dir holds a development CA: ca.pem (the
// certificate) and ca-key.pem (its PKCS#8 private key, mode 0600). When
// both files exist and parse as a matching pair they are reused and
// created is false. Otherwise a new ECDSA P-256 CA valid for ten years is
// written (replacing a partial or unreadable pair) and created is true.
// dir is created with mode 0700 if missing.
func EnsureDevCA(dir string) (certPEMPath, keyPEMPath string, created bool, err error) {
	certPEMPath = filepath.Join(dir, CACertFile)
	keyPEMPath = filepath.Join(dir, CAKeyFile)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", false, fmt.Errorf("tlsconf: create CA directory: %w", err)
	}
	if loadCA(certPEMPath, keyPEMPath) == nil {
		return certPEMPath, keyPEMPath, false, nil
	}
	certPEM, keyPEM, err := newCA(time.Now())
	if err != nil {
		return "", "", false, err
	}
	// Key first: a crash between the two writes leaves a pair that does
	// not match, which the next start replaces.
	if err := writeFile(keyPEMPath, keyPEM, 0o600); err != nil {
		return "", "", false, err
	}
	if err := writeFile(certPEMPath, certPEM, 0o644); err != nil {
		return "", "", false, err
	}
	return certPEMPath, keyPEMPath, true, nil
}

// loadCA reports whether the files hold a CA certificate and its key.
func loadCA(certPath, keyPath string) error {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return err
	}
	_, _, err = parseCA(certPEM, keyPEM)
	return err
}

// newCA returns a fresh self-signed CA as PEM certificate and PEM key.
func newCA(now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsconf: generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Felix development CA", Organization: []string{"Felix"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsconf: create CA certificate: %w", err)
	}
	keyPEM, err = marshalKeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// IssueServerCert signs a server certificate for hosts with the CA given
// as PEM. Entries of hosts that parse as IP addresses become IP SANs, the
// rest DNS SANs. validity 0 means 90 days. The returned certificate
// carries the chain leaf, CA, and its Leaf field is set.
func IssueServerCert(caCertPEM, caKeyPEM []byte, hosts []string, validity time.Duration) (tls.Certificate, error) {
	if len(hosts) == 0 {
		return tls.Certificate{}, errors.New("tlsconf: a server certificate needs at least one host")
	}
	return signLeaf(caCertPEM, caKeyPEM, validity, "server", func(tmpl *x509.Certificate) error {
		tmpl.Subject = pkix.Name{CommonName: hosts[0], Organization: []string{"Felix"}}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else if h != "" {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
		if len(tmpl.IPAddresses)+len(tmpl.DNSNames) == 0 {
			return errors.New("tlsconf: a server certificate needs a non-empty host")
		}
		return nil
	})
}

// signLeaf issues a leaf certificate with a fresh P-256 key, signed by
// the CA given as PEM: valid from a little before now for validity (0:
// 90 days, never past the CA's own end), for digital signatures; name
// fills in what is particular to the kind of certificate (subject, key
// usages, names). The chain is leaf, CA; Leaf is set.
func signLeaf(caCertPEM, caKeyPEM []byte, validity time.Duration, kind string, name func(*x509.Certificate) error) (tls.Certificate, error) {
	if validity <= 0 {
		validity = defaultLeafValidity
	}
	ca, caKey, err := parseCA(caCertPEM, caKeyPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsconf: generate %s key: %w", kind, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if err := name(tmpl); err != nil {
		return tls.Certificate{}, err
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter
	}
	if tmpl.NotAfter.Before(now) {
		return tls.Certificate{}, errors.New("tlsconf: the CA has expired")
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsconf: sign %s certificate: %w", kind, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsconf: parse issued certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// parseCA parses a CA certificate and its private key and checks that
// they belong together and that the certificate may sign.
func parseCA(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		return nil, nil, err
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, nil, errors.New("tlsconf: certificate is not a signing CA")
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return nil, nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, nil, errors.New("tlsconf: CA key does not match the CA certificate")
	}
	return cert, key, nil
}

// parseCertPEM returns the first certificate in b.
func parseCertPEM(b []byte) (*x509.Certificate, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("tlsconf: no CERTIFICATE block in PEM")
		}
		if blk.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("tlsconf: parse certificate: %w", err)
			}
			return c, nil
		}
	}
}

// parseKeyPEM returns the first private key in b (PKCS#8, SEC 1 or PKCS#1).
func parseKeyPEM(b []byte) (crypto.Signer, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("tlsconf: no private key block in PEM")
		}
		var (
			k   any
			err error
		)
		switch blk.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(blk.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("tlsconf: parse private key: %w", err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("tlsconf: unsupported private key type %T", k)
		}
		return s, nil
	}
}

func marshalKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// randomSerial returns a random positive 128-bit serial number.
func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("tlsconf: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

// writeFile writes b to path atomically (atomicfile.Write), naming the
// file in its error.
func writeFile(path string, b []byte, perm os.FileMode) error {
	if err := atomicfile.Write(path, b, perm); err != nil {
		return fmt.Errorf("tlsconf: write %s: %w", path, err)
	}
	return nil
}
