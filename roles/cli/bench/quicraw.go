package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// quicWindows are the flow-control settings both ends of quic-raw use; they
// match what the broker and the SDK configure, so the figure is the ceiling
// Felix itself runs under.
func quicWindows() *quic.Config {
	return &quic.Config{
		InitialStreamReceiveWindow:     1 << 20,
		MaxStreamReceiveWindow:         16 << 20,
		InitialConnectionReceiveWindow: 4 << 20,
		MaxConnectionReceiveWindow:     64 << 20,
		MaxIdleTimeout:                 10 * time.Second,
		KeepAlivePeriod:                2 * time.Second,
	}
}

func selfSigned() (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "felix-bench"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool, nil
}

// runQUICRaw sends bulk bytes on one QUIC stream between two endpoints on
// loopback for d and reports what the receiver got.
func runQUICRaw(ctx context.Context, d time.Duration, chunk int) (*result, error) {
	cert, pool, err := selfSigned()
	if err != nil {
		return nil, err
	}
	ln, err := quic.ListenAddr("127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert}, NextProtos: []string{"felix/1"}, MinVersion: tls.VersionTLS13,
	}, quicWindows())
	if err != nil {
		return nil, err
	}
	defer ln.Close()

	var received atomic.Int64
	serverDone := make(chan error, 1)
	go func() {
		conn, err := ln.Accept(ctx)
		if err != nil {
			serverDone <- err
			return
		}
		defer conn.CloseWithError(0, "")
		st, err := conn.AcceptStream(ctx)
		if err != nil {
			serverDone <- err
			return
		}
		buf := make([]byte, 1<<20)
		for {
			n, err := st.Read(buf)
			received.Add(int64(n))
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				serverDone <- err
				return
			}
		}
	}()

	conn, err := quic.DialAddr(ctx, ln.Addr().String(), &tls.Config{
		RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{"felix/1"}, MinVersion: tls.VersionTLS13,
	}, quicWindows())
	if err != nil {
		return nil, err
	}
	defer conn.CloseWithError(0, "")
	st, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, chunk)
	start := time.Now()
	deadline := start.Add(d)
	var startBytes int64
	warm := start.Add(d / 10) // measure after a short warm-up
	var warmAt time.Time
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, err := st.Write(buf); err != nil {
			return nil, err
		}
		if warmAt.IsZero() && time.Now().After(warm) {
			warmAt, startBytes = time.Now(), received.Load()
		}
	}
	elapsed := time.Since(warmAt)
	got := received.Load() - startBytes
	st.Close()
	r := &result{Scenario: "quic-raw", Params: map[string]any{"duration": d.String(), "chunk_bytes": chunk}}
	r.add("received_mb_per_s", float64(got)/elapsed.Seconds()/1e6, "MB/s")
	select {
	case err := <-serverDone:
		if err != nil && ctx.Err() == nil {
			return r, nil
		}
	case <-time.After(5 * time.Second):
	}
	return r, nil
}
