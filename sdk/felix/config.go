package felix

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/felixmq/felix/wire"
)

// ALPN is the TLS application protocol the client offers.
const ALPN = "felix/1"

// Defaults applied by Connect to zero-valued Config fields.
const (
	DefaultPublishStreams = 4
	DefaultCacheStreams   = 4
	DefaultKeepAlive      = 2 * time.Second
	DefaultMaxIdleTimeout = 6 * time.Second
	DefaultDialTimeout    = 5 * time.Second
	maxStreamsPerPool     = 256
)

// Config configures a Client. The zero value of each optional field means
// its default; Tenant, Token, Addr and a trust root are required.
type Config struct {
	// Addr is the broker's QUIC address, "host:port" (FELIX_BROKER_ADDR).
	Addr string
	// ServerName is the TLS name the broker's certificate must carry.
	// Default: the host part of Addr.
	ServerName string
	// CAFile is a PEM file of roots that sign the broker's certificate
	// (FELIX_CA_FILE). RootCAs is the same as a pool. One is required:
	// the client always verifies the broker.
	CAFile  string
	RootCAs *x509.CertPool
	// Certificates is an optional client certificate chain.
	Certificates []tls.Certificate
	// Tenant and Token (a Felix JWT) authenticate every stream the client
	// opens (FELIX_TENANT, FELIX_TOKEN or FELIX_TOKEN_FILE).
	Tenant string
	Token  string
	// PublishStreams is the number of publish streams (default 4). One
	// stream's publishes always use the same one, so they stay in order.
	PublishStreams int
	// CacheStreams is the number of cache streams (default 4).
	CacheStreams int
	// KeepAlive is the QUIC keep-alive period (FELIX_KEEPALIVE_MS,
	// default 2s).
	KeepAlive time.Duration
	// MaxIdleTimeout closes a connection that has heard nothing for this
	// long (FELIX_MAX_IDLE_TIMEOUT_MS, default 6s).
	MaxIdleTimeout time.Duration
	// MaxFrameBytes is the largest frame the client sends or accepts
	// (default 16 MiB).
	MaxFrameBytes uint32
	// DialTimeout bounds the QUIC handshake (default 5s).
	DialTimeout time.Duration
	// Transport is how the client reaches the broker (FELIX_TRANSPORT):
	// "quic" (the default), "tcp" (TLS 1.3 over TCP, for networks that
	// drop UDP) or "auto": QUIC first, and TCP as well when QUIC has not
	// connected within AutoFallback; the first to connect wins and is
	// remembered for the client's life.
	Transport string
	// TCPAddr is the broker's TCP address (FELIX_BROKER_TCP_ADDR).
	// Default: Addr, since a broker's TCP listener shares its QUIC port
	// unless FELIX_TCP_LISTEN says otherwise.
	TCPAddr string
	// AutoFallback is how long "auto" waits for QUIC before it tries TCP
	// too (default 1s).
	AutoFallback time.Duration

	auto *autoChoice // shared by the copies of one client's Config

	envErr error // problems found by ConfigFromEnv, reported by Connect
}

// ConfigFromEnv reads a Config from FELIX_* environment variables. Values
// that do not parse are reported by Connect, naming the variable.
func ConfigFromEnv() Config {
	var c Config
	var errs []error
	c.Addr = os.Getenv("FELIX_BROKER_ADDR")
	c.TCPAddr = os.Getenv("FELIX_BROKER_TCP_ADDR")
	c.Transport = os.Getenv("FELIX_TRANSPORT")
	c.Tenant = os.Getenv("FELIX_TENANT")
	c.Token = os.Getenv("FELIX_TOKEN")
	c.CAFile = os.Getenv("FELIX_CA_FILE")
	if f := os.Getenv("FELIX_TOKEN_FILE"); f != "" && c.Token == "" {
		b, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("FELIX_TOKEN_FILE: %w", err))
		}
		c.Token = strings.TrimSpace(string(b))
	}
	c.KeepAlive = envMillis("FELIX_KEEPALIVE_MS", &errs)
	c.MaxIdleTimeout = envMillis("FELIX_MAX_IDLE_TIMEOUT_MS", &errs)
	c.envErr = errors.Join(errs...)
	return c
}

func envMillis(name string, errs *[]error) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n == 0 {
		*errs = append(*errs, fmt.Errorf("%s=%q: want a positive number of milliseconds", name, v))
		return 0
	}
	return time.Duration(n) * time.Millisecond
}

// withDefaults returns c with every zero optional field filled in.
func (c Config) withDefaults() Config {
	if c.PublishStreams == 0 {
		c.PublishStreams = DefaultPublishStreams
	}
	if c.CacheStreams == 0 {
		c.CacheStreams = DefaultCacheStreams
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.MaxIdleTimeout == 0 {
		c.MaxIdleTimeout = DefaultMaxIdleTimeout
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = wire.DefaultMaxFrameBytes
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.Transport == "" {
		c.Transport = defaultTransport
	}
	if c.AutoFallback == 0 {
		c.AutoFallback = DefaultAutoFallback
	}
	if c.auto == nil {
		c.auto = &autoChoice{}
	}
	return c
}

// validate reports every bad value at once.
func (c Config) validate() error {
	errs := []error{c.envErr}
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Addr == "" {
		bad("Addr (FELIX_BROKER_ADDR) is required")
	} else if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		bad("Addr %q: %v", c.Addr, err)
	}
	if c.Tenant == "" {
		bad("Tenant (FELIX_TENANT) is required")
	}
	if c.Token == "" {
		bad("Token (FELIX_TOKEN or FELIX_TOKEN_FILE) is required")
	}
	if c.CAFile == "" && c.RootCAs == nil {
		bad("CAFile (FELIX_CA_FILE) or RootCAs is required: the broker is always verified")
	}
	if c.PublishStreams < 1 || c.PublishStreams > maxStreamsPerPool {
		bad("PublishStreams %d: want 1..%d", c.PublishStreams, maxStreamsPerPool)
	}
	if c.CacheStreams < 1 || c.CacheStreams > maxStreamsPerPool {
		bad("CacheStreams %d: want 1..%d", c.CacheStreams, maxStreamsPerPool)
	}
	if c.KeepAlive < 0 || c.MaxIdleTimeout < 0 || c.DialTimeout < 0 || c.AutoFallback < 0 {
		bad("KeepAlive, MaxIdleTimeout, DialTimeout and AutoFallback must not be negative")
	}
	switch c.Transport {
	case TransportQUIC, TransportTCP, TransportAuto:
	default:
		bad("Transport %q (FELIX_TRANSPORT): want %q, %q or %q", c.Transport, TransportQUIC, TransportTCP, TransportAuto)
	}
	if c.MaxFrameBytes < 1024 {
		bad("MaxFrameBytes %d: want at least 1024", c.MaxFrameBytes)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("felix: invalid config: %w", err)
	}
	return nil
}

// tlsConfig builds the TLS 1.3 client configuration.
func (c Config) tlsConfig() (*tls.Config, error) {
	roots := c.RootCAs
	if roots == nil {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("felix: CAFile: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("felix: CAFile %s: no PEM certificates found", c.CAFile)
		}
	}
	name := c.ServerName
	if name == "" {
		name, _, _ = net.SplitHostPort(c.Addr)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{ALPN},
		RootCAs:      roots,
		ServerName:   name,
		Certificates: c.Certificates,
	}, nil
}
