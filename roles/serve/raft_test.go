package serve

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/roles/controlplane"
	"github.com/felixmq/felix/wire"
)

// writeTestPKI writes a CA and a certificate for 127.0.0.1 usable as
// server and client, and returns the file paths.
func writeTestPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "cp"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cp.pem", "CERTIFICATE", der), write("cp-key.pem", "PRIVATE KEY", keyDER)
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Three members with https peer URLs talk mutual TLS with the control
// plane certificate, and a write through one is read through another.
func TestRaftPeersOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestPKI(t, dir)
	env := map[string]string{"FELIX_CONTROLPLANE_TLS_CERT": certFile, "FELIX_CONTROLPLANE_TLS_KEY": keyFile,
		"FELIX_CONTROLPLANE_TLS_CLIENT_CA": caFile}
	o := &options{DataDir: dir, env: func(k string) string { return env[k] }}
	ct, err := loadControlPlaneTLS(o)
	if err != nil || ct == nil {
		t.Fatalf("tls: %v", err)
	}
	peers := map[uint64]string{}
	for id := uint64(1); id <= 3; id++ {
		peers[id] = "https://" + freePort(t)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	stores := map[uint64]*controlplane.RaftStore{}
	for id := uint64(1); id <= 3; id++ {
		ro := raftOptions{NodeID: id, DataDir: filepath.Join(dir, fmt.Sprint(id)), Peers: peers, Tick: 10 * time.Millisecond}
		s, err := openRaftStore(ro, ct, log)
		if err != nil {
			t.Fatal(err)
		}
		stores[id] = s
		defer s.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := stores[1].CreateTenant(ctx, wire.Tenant{TenantID: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := stores[3].Tenant(ctx, "acme"); err != nil || !ok {
		t.Fatalf("read through member 3: %v %v", ok, err)
	}
	// https peers without a certificate are refused at start.
	ro := raftOptions{NodeID: 1, DataDir: filepath.Join(dir, "x"), Peers: peers}
	if _, err := openRaftStore(ro, nil, log); err == nil || !strings.Contains(err.Error(), "FELIX_CONTROLPLANE_TLS_CERT") {
		t.Fatalf("https peers without TLS: %v", err)
	}
}

func TestControlPlaneTLSSettings(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"FELIX_CONTROLPLANE_TLS_CERT": "a"}, "must be set together"},
		{map[string]string{"FELIX_CONTROLPLANE_TLS_CLIENT_CA": "a"}, "needs FELIX_CONTROLPLANE_TLS_CERT"},
		{map[string]string{"FELIX_CONTROLPLANE_TLS_CERT": "/nope", "FELIX_CONTROLPLANE_TLS_KEY": "/nope"}, "FELIX_CONTROLPLANE_TLS_CERT"},
	} {
		o := &options{env: func(k string) string { return tc.env[k] }}
		if _, err := loadControlPlaneTLS(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
	}
	if ct, err := loadControlPlaneTLS(&options{env: func(string) string { return "" }}); ct != nil || err != nil {
		t.Fatalf("no TLS settings: %v %v", ct, err)
	}
}

// With a control plane certificate the REST API is served over TLS.
func TestControlPlaneRESTOverTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestPKI(t, dir)
	env := map[string]string{"FELIX_CONTROLPLANE_TLS_CERT": certFile, "FELIX_CONTROLPLANE_TLS_KEY": keyFile}
	o := &options{DataDir: dir, ControlPlaneAddr: "127.0.0.1:0", env: func(k string) string { return env[k] }}
	ct, err := loadControlPlaneTLS(o)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := openRaftStore(raftOptions{NodeID: 1, DataDir: filepath.Join(dir, "raft"), Tick: 10 * time.Millisecond}, ct, log)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := controlplane.New(controlplane.Config{Logger: log}, store)
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	defer cp.Close()
	srv, url, err := startControlPlaneHTTP(o, cp, ct, log, false)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.stop(context.Background())
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("url %q", url)
	}
	caPEM, _ := os.ReadFile(caFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(url + "/live")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /live over TLS: %d", resp.StatusCode)
	}
}
