package tlsconf

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// handshake runs a TLS handshake between server and client configs over
// a loopback TCP connection (its buffers absorb alerts and tickets the
// other side does not read) and returns the server's view of it.
func handshake(t *testing.T, server, client *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sc, cc := tcpPair(t)
	defer sc.Close()
	defer cc.Close()
	srv := tls.Server(sc, server)
	type result struct {
		state tls.ConnectionState
		err   error
	}
	done := make(chan result, 1)
	go func() {
		err := srv.HandshakeContext(ctx)
		done <- result{srv.ConnectionState(), err}
	}()
	cli := tls.Client(cc, client)
	cerr := cli.HandshakeContext(ctx)
	if cerr != nil {
		cc.Close() // unblock the server
	}
	r := <-done
	if cerr != nil {
		return r.state, cerr
	}
	if got := cli.ConnectionState().NegotiatedProtocol; r.err == nil && got != ALPN {
		t.Errorf("client negotiated %q, want %q", got, ALPN)
	}
	return r.state, r.err
}

// tcpPair returns both ends of one loopback TCP connection.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		client.Close()
		t.Fatal(err)
	}
	return server, client
}

func serverConfig(t *testing.T, clientCA string) (*tls.Config, string) {
	t.Helper()
	dir, caPEM, caKeyPEM := devCA(t)
	cert, err := IssueServerCert(caPEM, caKeyPEM, []string{"localhost", "127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ServerTLSConfig(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }, clientCA)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, filepath.Join(dir, CACertFile)
}

func TestHandshakeNegotiatesFelixALPN(t *testing.T) {
	scfg, caFile := serverConfig(t, "")
	if scfg.MinVersion != tls.VersionTLS13 || scfg.ClientAuth != tls.NoClientCert {
		t.Fatalf("server config: min %x auth %v", scfg.MinVersion, scfg.ClientAuth)
	}
	for _, name := range []string{"localhost", "127.0.0.1"} {
		ccfg, err := ClientTLSConfig(caFile, name)
		if err != nil {
			t.Fatal(err)
		}
		st, err := handshake(t, scfg, ccfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st.Version != tls.VersionTLS13 || st.NegotiatedProtocol != ALPN {
			t.Errorf("%s: version %x alpn %q", name, st.Version, st.NegotiatedProtocol)
		}
	}
}

func TestHandshakeFailsForUntrustedOrWrongName(t *testing.T) {
	scfg, caFile := serverConfig(t, "")
	_, otherCA := serverConfig(t, "")
	wrongName, _ := ClientTLSConfig(caFile, "example.com")
	untrusted, _ := ClientTLSConfig(otherCA, "localhost")
	for name, ccfg := range map[string]*tls.Config{"wrong name": wrongName, "untrusted": untrusted} {
		if _, err := handshake(t, scfg, ccfg); err == nil {
			t.Errorf("%s: handshake succeeded", name)
		}
	}
}

// clientCert signs a client-auth certificate with the CA in dir.
func clientCert(t *testing.T, caPEM, caKeyPEM []byte) tls.Certificate {
	t.Helper()
	ca, caKey, err := parseCA(caPEM, caKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := randomSerial()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "client"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestClientCertificatesVerifiedWhenGiven(t *testing.T) {
	clientDir, clientCAPEM, clientCAKey := devCA(t)
	_, strangerCAPEM, strangerCAKey := devCA(t)
	scfg, caFile := serverConfig(t, filepath.Join(clientDir, CACertFile))
	if scfg.ClientAuth != tls.VerifyClientCertIfGiven || scfg.ClientCAs == nil {
		t.Fatalf("client auth %v, pool %v", scfg.ClientAuth, scfg.ClientCAs != nil)
	}

	anonymous, _ := ClientTLSConfig(caFile, "localhost")
	if st, err := handshake(t, scfg, anonymous); err != nil || len(st.PeerCertificates) != 0 {
		t.Fatalf("anonymous client: peers %d, %v", len(st.PeerCertificates), err)
	}

	trusted, _ := ClientTLSConfig(caFile, "localhost")
	trusted.Certificates = []tls.Certificate{clientCert(t, clientCAPEM, clientCAKey)}
	st, err := handshake(t, scfg, trusted)
	if err != nil || len(st.VerifiedChains) == 0 {
		t.Fatalf("trusted client: chains %d, %v", len(st.VerifiedChains), err)
	}

	stranger, _ := ClientTLSConfig(caFile, "localhost")
	stranger.Certificates = []tls.Certificate{clientCert(t, strangerCAPEM, strangerCAKey)}
	if _, err := handshake(t, scfg, stranger); err == nil {
		t.Fatal("client certificate from an unknown CA accepted")
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	writeStamped(t, junk, []byte("junk"), time.Unix(1, 0))
	get := func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }
	if _, err := ServerTLSConfig(nil, ""); err == nil {
		t.Error("nil certificate source accepted")
	}
	if _, err := ServerTLSConfig(get, junk); err == nil {
		t.Error("junk client CA accepted")
	}
	if _, err := ServerTLSConfig(get, filepath.Join(dir, "missing.pem")); err == nil {
		t.Error("missing client CA accepted")
	}
	if _, err := ClientTLSConfig(junk, "localhost"); err == nil {
		t.Error("junk CA file accepted")
	}
}
