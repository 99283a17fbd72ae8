package serve

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/felixmq/felix/internal/atomicfile"
	"github.com/felixmq/felix/roles/broker/tlsconf"
)

// clientFile is <data-dir>/client.json: what a client on this machine
// needs to reach the node. Paths are relative to the data directory.
type clientFile struct {
	BrokerAddr      string `json:"broker_addr"`
	BrokerTCPAddr   string `json:"broker_tcp_addr,omitempty"`
	ControlPlaneURL string `json:"controlplane_url"`
	CAFile          string `json:"ca_file,omitempty"`
	TokenFile       string `json:"token_file"`
	Tenant          string `json:"tenant"`
	Namespace       string `json:"namespace"`
}

const (
	adminTokenFile = "admin.token"
	clientJSONFile = "client.json"
	adminTokenTTL  = 10 * 365 * 24 * time.Hour
)

// serverTLS builds the broker's TLS certificate source: the operator's
// certificate when FELIX_TLS_CERT/FELIX_TLS_KEY are set (re-read when the
// files change), otherwise a certificate signed by a development CA kept
// under <data-dir>/tls. caFile is the CA a client must trust ("" for an
// operator certificate, whose trust is the operator's business).
func serverTLS(o *options, log *slog.Logger) (cfg *tls.Config, caFile string, err error) {
	certFile, keyFile := o.env("FELIX_TLS_CERT"), o.env("FELIX_TLS_KEY")
	requireCert, err := o.envBool("FELIX_TLS_REQUIRE_CERT")
	if err != nil {
		return nil, "", err
	}
	clientCA := o.env("FELIX_TLS_CLIENT_CA")
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, "", errors.New("FELIX_TLS_CERT and FELIX_TLS_KEY must be set together")
		}
		r, err := tlsconf.NewReloader(certFile, keyFile)
		if err != nil {
			return nil, "", fmt.Errorf("FELIX_TLS_CERT/FELIX_TLS_KEY: %w", err)
		}
		cfg, err := tlsconf.ServerTLSConfig(r.GetCertificate, clientCA)
		return cfg, "", err
	}
	if requireCert {
		return nil, "", errors.New("FELIX_TLS_REQUIRE_CERT=true but FELIX_TLS_CERT/FELIX_TLS_KEY are not set")
	}
	dir := filepath.Join(o.DataDir, "tls")
	caCert, caKey, created, err := tlsconf.EnsureDevCA(dir)
	if err != nil {
		return nil, "", fmt.Errorf("development CA: %w", err)
	}
	if created {
		log.Info("created a development CA", "file", caCert)
	}
	certPEM, err := os.ReadFile(caCert)
	if err != nil {
		return nil, "", err
	}
	keyPEM, err := os.ReadFile(caKey)
	if err != nil {
		return nil, "", err
	}
	hosts := append([]string{"localhost", "127.0.0.1", "::1"}, o.Hosts...)
	if h, _, err := net.SplitHostPort(o.BrokerAddr); err == nil && h != "" && h != "0.0.0.0" && h != "::" {
		hosts = append(hosts, h)
	}
	cert, err := tlsconf.IssueServerCert(certPEM, keyPEM, hosts, 90*24*time.Hour)
	if err != nil {
		return nil, "", err
	}
	log.Warn("serving a development certificate signed by the local CA; set FELIX_TLS_CERT and FELIX_TLS_KEY in production",
		"ca", caCert, "hosts", hosts)
	cfg, err = tlsconf.ServerTLSConfig(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }, clientCA)
	return cfg, caCert, err
}

// writeClientFile (re)writes client.json so it always names the addresses
// this node is actually serving.
func writeClientFile(dataDir string, cf clientFile) error {
	b, err := json.MarshalIndent(cf, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dataDir, clientJSONFile), append(b, '\n'), 0o644)
}

// relTo returns path relative to dir when it lies inside it.
func relTo(dir, path string) string {
	if path == "" {
		return ""
	}
	absDir, err1 := filepath.Abs(dir)
	absPath, err2 := filepath.Abs(path)
	if err1 != nil || err2 != nil {
		return path
	}
	if r, err := filepath.Rel(absDir, absPath); err == nil && !filepath.IsAbs(r) && r != ".." && !startsWithDotDot(r) {
		return r
	}
	return absPath
}

func startsWithDotDot(p string) bool {
	return len(p) >= 3 && p[:3] == ".."+string(filepath.Separator)
}
