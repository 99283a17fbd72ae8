package cli

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
)

// Names of the shared client flags.
const (
	flagBroker       = "broker"
	flagBrokerTCP    = "broker-tcp"
	flagTransport    = "transport"
	flagControlPlane = "controlplane"
	flagCAFile       = "ca-file"
	flagTokenFile    = "token-file"
	flagTenant       = "tenant"
	flagNamespace    = "namespace"
	flagDataDir      = "data-dir"
	flagOutput       = "output"
	flagConnTimeout  = "connect-timeout"

	defaultDataDir   = "./felix-data"
	clientFileName   = "client.json"
	defaultTenant    = "default"
	defaultNamespace = "default"
	maxTokenFileSize = 64 << 10 // a token file larger than this is not a token
	maxClientFile    = 1 << 20

	// defaultConnectTimeout bounds connecting (and authenticating) to the
	// broker, and connecting to the control plane, unless
	// --connect-timeout says otherwise.
	defaultConnectTimeout = 5 * time.Second
	maxConnectTimeout     = 10 * time.Minute
)

const connCategory = "connection"

// ClientFlags are the shared connection flags of every client command:
// --broker, --controlplane, --ca-file, --token-file, --tenant, --namespace,
// --connect-timeout, --data-dir and --context, each with its FELIX_*
// variable. They do not include
// -o/--output (see OutputFlag), so a command that reuses them keeps its own
// choice of output flag.
func ClientFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagBroker, Category: connCategory, EnvVars: []string{"FELIX_BROKER_ADDR"},
			Usage: "broker QUIC address `HOST:PORT`"},
		&cli.StringFlag{Name: flagTransport, Category: connCategory, EnvVars: []string{"FELIX_TRANSPORT"},
			Usage: "how to reach the broker: quic, tcp (TLS over TCP, where UDP is dropped) or auto (QUIC, and TCP if QUIC has not connected within a second) (default: client.json, else quic)"},
		&cli.StringFlag{Name: flagBrokerTCP, Category: connCategory, EnvVars: []string{"FELIX_BROKER_TCP_ADDR"},
			Usage: "broker TCP address `HOST:PORT` for --transport tcp or auto (default: client.json, else --broker's)"},
		&cli.StringFlag{Name: flagControlPlane, Category: connCategory, EnvVars: []string{"FELIX_CONTROLPLANE_URL"},
			Usage: "control plane REST `URL`, e.g. http://127.0.0.1:5080"},
		&cli.StringFlag{Name: flagCAFile, Category: connCategory, EnvVars: []string{"FELIX_CA_FILE"},
			Usage: "PEM `FILE` of the CA that signed the broker's certificate (default: system roots)"},
		&cli.StringFlag{Name: flagTokenFile, Category: connCategory, EnvVars: []string{"FELIX_TOKEN_FILE"},
			Usage: "`FILE` holding the Felix token (FELIX_TOKEN may carry the token itself)"},
		&cli.StringFlag{Name: flagTenant, Category: connCategory, EnvVars: []string{"FELIX_TENANT"},
			Usage: "tenant `ID` (default: client.json, else \"default\")"},
		&cli.StringFlag{Name: flagNamespace, Category: connCategory, EnvVars: []string{"FELIX_NAMESPACE"},
			Usage: "namespace `NAME` (default: client.json, else \"default\")"},
		&cli.DurationFlag{Name: flagConnTimeout, Category: connCategory, EnvVars: []string{"FELIX_CONNECT_TIMEOUT"}, Value: defaultConnectTimeout,
			Usage: "give up connecting to the broker or control plane after `DURATION`"},
		&cli.StringFlag{Name: flagDataDir, Category: connCategory, EnvVars: []string{"FELIX_DATA_DIR"},
			Usage: "`DIR` whose client.json (written by felix serve) supplies any setting not given. Without it: " +
				"the file FELIX_CLIENT_CONFIG names, else --context's, else ./felix-data/client.json, " +
				"else $XDG_CONFIG_HOME/felix/client.json (~/.config/felix/client.json)"},
		&cli.StringFlag{Name: flagContext, Category: connCategory, EnvVars: []string{envContext},
			Usage: "read settings from the named client file `NAME`: $XDG_CONFIG_HOME/felix/contexts/NAME.json"},
	}
}

// OutputFlag is -o/--output (text or json).
func OutputFlag() cli.Flag {
	return &cli.StringFlag{Name: flagOutput, Aliases: []string{"o"}, Value: "text",
		Usage: "output `FORMAT`: text or json"}
}

// Settings are the resolved connection settings of a client command.
// Paths are usable as is (client.json's relative paths are already joined
// to the data directory). Token holds the token itself, read from
// TokenFile (or FELIX_TOKEN) and trimmed.
type Settings struct {
	Broker, ControlPlane, CAFile, TokenFile, Token, Tenant, Namespace string
	// Transport is "quic", "tcp" or "auto"; BrokerTCP the broker's TCP
	// address ("" for Broker's host and port).
	Transport, BrokerTCP string
	// ConnectTimeout bounds connecting to the broker (QUIC handshake and
	// authentication) and to the control plane; positive.
	ConnectTimeout time.Duration
	// MoreBrokers and MoreControlPlanes are the cluster's other nodes
	// (client.json's broker_addrs and controlplane_urls, which felix dev
	// writes), tried in order when Broker or ControlPlane does not
	// answer. Empty when the flag or variable named the address.
	MoreBrokers, MoreControlPlanes []string

	clientFile string // the client.json consulted (or every place looked), for error messages
}

// clientFile is the JSON shape of <data-dir>/client.json.
type clientFile struct {
	BrokerAddr      string `json:"broker_addr"`
	BrokerTCPAddr   string `json:"broker_tcp_addr"`
	Transport       string `json:"transport"`
	ControlPlaneURL string `json:"controlplane_url"`
	CAFile          string `json:"ca_file"`
	TokenFile       string `json:"token_file"`
	Tenant          string `json:"tenant"`
	Namespace       string `json:"namespace"`
	// Every node of a cluster (felix dev), broker_addr and
	// controlplane_url among them.
	BrokerAddrs      []string `json:"broker_addrs"`
	ControlPlaneURLs []string `json:"controlplane_urls"`
}

// others returns list without first, when first came from the file.
func others(flagSet bool, first string, list []string) []string {
	if flagSet {
		return nil
	}
	var out []string
	for _, v := range list {
		if v != "" && v != first {
			out = append(out, v)
		}
	}
	return out
}

// LoadClientSettings resolves the connection settings of the command in c.
// Each setting comes from its flag, else its FELIX_* variable (urfave
// applies both), else the client.json locateClientFile picks (--data-dir,
// FELIX_CLIENT_CONFIG, --context, ./felix-data, the user's config);
// tenant and namespace finally default to "default". No client.json at
// all is not an error, unless one was named (FELIX_CLIENT_CONFIG,
// --context); a malformed one is, and so is a token file that cannot be
// read. Whether a needed setting is missing is checked where it is used
// (SDKConfig, the admin client), so each command asks only for what it
// needs.
func LoadClientSettings(c *cli.Context) (Settings, error) {
	timeout := c.Duration(flagConnTimeout)
	if !c.IsSet(flagConnTimeout) && timeout == 0 {
		timeout = defaultConnectTimeout // a command built without the flag
	}
	if timeout <= 0 || timeout > maxConnectTimeout {
		return Settings{}, usageErrorf(c, "--connect-timeout %v: want a positive duration up to %v", timeout, maxConnectTimeout)
	}
	src, err := locateClientFile(c)
	if err != nil {
		return Settings{}, err
	}
	var cf clientFile
	if src.path != "" {
		if cf, err = readClientFile(src.path, src.required); err != nil {
			return Settings{}, err
		}
	}
	fileDir := filepath.Dir(src.path)
	inDir := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(fileDir, p)
	}
	s := Settings{
		Broker:       first(c.String(flagBroker), cf.BrokerAddr),
		ControlPlane: first(c.String(flagControlPlane), cf.ControlPlaneURL),
		CAFile:       first(c.String(flagCAFile), inDir(cf.CAFile)),
		Tenant:       first(c.String(flagTenant), cf.Tenant, defaultTenant),
		Namespace:    first(c.String(flagNamespace), cf.Namespace, defaultNamespace),
		Transport:    first(c.String(flagTransport), cf.Transport, felix.TransportQUIC),

		ConnectTimeout: timeout,
		clientFile:     src.describe(),
	}
	if s.Broker == "" && len(cf.BrokerAddrs) > 0 {
		s.Broker = cf.BrokerAddrs[0]
	}
	if s.ControlPlane == "" && len(cf.ControlPlaneURLs) > 0 {
		s.ControlPlane = cf.ControlPlaneURLs[0]
	}
	s.MoreBrokers = others(c.String(flagBroker) != "", s.Broker, cf.BrokerAddrs)
	// client.json's TCP address belongs to its broker_addr: a --broker
	// flag names another broker, reached on its own port.
	s.BrokerTCP = c.String(flagBrokerTCP)
	if s.BrokerTCP == "" && c.String(flagBroker) == "" && s.Broker == cf.BrokerAddr {
		s.BrokerTCP = cf.BrokerTCPAddr
	}
	switch s.Transport {
	case felix.TransportQUIC, felix.TransportTCP, felix.TransportAuto:
	default:
		return Settings{}, usageErrorf(c, "--transport %q: want quic, tcp or auto", s.Transport)
	}
	s.MoreControlPlanes = others(c.String(flagControlPlane) != "", s.ControlPlane, cf.ControlPlaneURLs)
	switch {
	case c.String(flagTokenFile) != "":
		s.TokenFile = c.String(flagTokenFile)
	case strings.TrimSpace(os.Getenv("FELIX_TOKEN")) != "":
		s.Token = strings.TrimSpace(os.Getenv("FELIX_TOKEN"))
	default:
		s.TokenFile = inDir(cf.TokenFile)
	}
	if s.Token == "" && s.TokenFile != "" {
		if s.Token, err = readTokenFile(s.TokenFile); err != nil {
			return Settings{}, err
		}
	}
	return s, nil
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// readClientFile parses client.json; a missing file yields zero settings
// unless it is required.
func readClientFile(path string, required bool) (clientFile, error) {
	var cf clientFile
	b, err := readBounded(path, maxClientFile)
	if errors.Is(err, fs.ErrNotExist) && !required {
		return cf, nil
	}
	if err != nil {
		return cf, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &cf); err != nil {
		return cf, fmt.Errorf("%s is not valid client settings: %w", path, err)
	}
	return cf, nil
}

func readTokenFile(path string) (string, error) {
	b, err := readBounded(path, maxTokenFileSize)
	if err != nil {
		return "", fmt.Errorf("read token file: %w (pass --token-file or set FELIX_TOKEN_FILE)", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

// readBounded reads a whole file, refusing one larger than limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}

// missing explains a setting nobody supplied and where it may come from.
func (s Settings) missing(what, flag, env string) error {
	return cli.Exit(fmt.Sprintf("error: no %s: pass --%s, set %s, or use --data-dir with a client.json that names it "+
		"(felix serve writes one; to use it from any directory, put one with absolute paths in ~/.config/felix/client.json; looked in %s)",
		what, flag, env, s.clientFile), exitUsage)
}

func (s Settings) needBroker() error {
	if s.Broker == "" {
		return s.missing("broker address", flagBroker, "FELIX_BROKER_ADDR")
	}
	return nil
}

func (s Settings) needControlPlane() error {
	if s.ControlPlane == "" {
		return s.missing("control plane URL", flagControlPlane, "FELIX_CONTROLPLANE_URL")
	}
	return nil
}

func (s Settings) needToken() error {
	if s.Token == "" {
		return s.missing("token", flagTokenFile, "FELIX_TOKEN_FILE (or FELIX_TOKEN)")
	}
	return nil
}

// SDKConfig is the Go client configuration for these settings. It needs a
// broker address and a token; without a CA file the system roots are
// trusted.
func (s Settings) SDKConfig() (felix.Config, error) {
	if err := s.needBroker(); err != nil {
		return felix.Config{}, err
	}
	if err := s.needToken(); err != nil {
		return felix.Config{}, err
	}
	cfg := felix.Config{Addr: s.Broker, CAFile: s.CAFile, Tenant: s.Tenant, Token: s.Token, DialTimeout: s.ConnectTimeout,
		Transport: s.Transport, TCPAddr: s.BrokerTCP}
	if s.CAFile == "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			return felix.Config{}, fmt.Errorf("no --ca-file given and the system roots are unavailable: %w", err)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}
