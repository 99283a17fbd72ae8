package serve

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"
)

// options are the settings of the server roles. Each comes from a flag,
// else a FELIX_* variable, else the YAML file given with --config, else
// its default.
type options struct {
	DataDir          string
	BrokerAddr       string
	TCPAddr          string // the broker's TLS-over-TCP listener: "" its QUIC port, "off" none
	PeerAddr         string // the broker's listener for other brokers
	ControlPlaneAddr string
	MetricsAddr      string
	ControlPlaneURL  string // broker role alone: where the control plane is
	TokenFile        string // broker role alone: token for the catalog feeds
	Hosts            []string
	ShutdownTimeout  time.Duration
	// env resolves FELIX_* variables: the process environment first, then
	// the YAML file's env section.
	env func(string) string
}

// fileConfig is the YAML file's shape. Keys are the flag names; env sets
// FELIX_* variables that the process environment does not.
type fileConfig struct {
	DataDir          string            `yaml:"data-dir"`
	BrokerAddr       string            `yaml:"broker-addr"`
	TCPAddr          string            `yaml:"tcp-addr"`
	PeerAddr         string            `yaml:"peer-addr"`
	ControlPlaneAddr string            `yaml:"controlplane-addr"`
	MetricsAddr      string            `yaml:"metrics-addr"`
	ControlPlaneURL  string            `yaml:"controlplane-url"`
	TokenFile        string            `yaml:"token-file"`
	Hosts            []string          `yaml:"hosts"`
	ShutdownTimeout  string            `yaml:"shutdown-timeout"`
	Env              map[string]string `yaml:"env"`
}

// serverFlags are the flags of every server role together (the options
// tests parse them all at once).
func serverFlags() []cli.Flag {
	return append(append(commonFlags(), brokerFlags()...), controlPlaneFlags()...)
}

// roleFlags are the flags of the roles selected, and only those: each role
// lists what applies to it. A flag a role lacks reads as unset, and its
// option stays empty, unused by that role.
func roleFlags(withControlPlane, withBroker bool) []cli.Flag {
	flags := commonFlags()
	if withBroker {
		flags = append(flags, brokerFlags()...)
	}
	if withControlPlane {
		flags = append(flags, controlPlaneFlags()...)
	}
	if withBroker && !withControlPlane {
		flags = append(flags, brokerOnlyFlags()...)
	}
	return flags
}

// commonFlags apply to every server role.
func commonFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "YAML `FILE` with defaults for these flags and an env: map of FELIX_* settings", EnvVars: []string{"FELIX_CONFIG"}},
		&cli.StringFlag{Name: "data-dir", Usage: "`DIR` for all state: catalog, TLS, tokens, client.json", EnvVars: []string{"FELIX_DATA_DIR"}, Value: "./felix-data"},
		&cli.DurationFlag{Name: "shutdown-timeout", Usage: "how long a graceful shutdown may take (a `DURATION` such as 10s) before connections are closed", EnvVars: []string{"FELIX_SHUTDOWN_TIMEOUT"}, Value: 10 * time.Second},
	}
}

// brokerFlags apply wherever a broker runs (serve, broker).
func brokerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "broker-addr", Usage: "UDP address `HOST:PORT` the broker's QUIC listener binds", EnvVars: []string{"FELIX_BROKER_ADDR", "FELIX_QUIC_BIND"}, Value: "127.0.0.1:5000"},
		&cli.StringFlag{Name: "tcp-addr", Usage: "TCP address `HOST:PORT` of the broker's TLS-over-TCP listener (the same protocol, for networks that drop UDP); default: --broker-addr's host and port, \"off\" for none", EnvVars: []string{"FELIX_TCP_LISTEN"}},
		&cli.StringFlag{Name: "peer-addr", Usage: "UDP address `HOST:PORT` of the broker's listener for other brokers (mutual TLS with node certificates)", EnvVars: []string{"FELIX_NODE_PEER_ADDR"}, Value: "127.0.0.1:0"},
		&cli.StringFlag{Name: "metrics-addr", Usage: "TCP address `HOST:PORT` for the broker's /metrics, /live and /ready", EnvVars: []string{"FELIX_BROKER_METRICS_BIND", "FELIX_METRICS_ADDR"}, Value: "127.0.0.1:8080"},
		&cli.StringSliceFlag{Name: "host", Usage: "extra `NAME` or IP for the broker's development certificate (repeatable)", EnvVars: []string{"FELIX_TLS_HOSTS"}},
	}
}

// controlPlaneFlags apply wherever a control plane runs (serve,
// controlplane).
func controlPlaneFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "controlplane-addr", Usage: "TCP address `HOST:PORT` of the control plane's REST API", EnvVars: []string{"FELIX_CONTROLPLANE_ADDR"}, Value: "127.0.0.1:5080"},
	}
}

// brokerOnlyFlags apply to the broker role alone, which reaches its
// control plane over HTTP.
func brokerOnlyFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "controlplane-url", Usage: "control plane base `URL` the broker syncs the catalog from", EnvVars: []string{"FELIX_CONTROLPLANE_URL"}, Value: "http://127.0.0.1:5080"},
		&cli.StringFlag{Name: "token-file", Usage: "`FILE` holding a token with cluster.manage, for the catalog feeds (default <data-dir>/admin.token)", EnvVars: []string{"FELIX_TOKEN_FILE"}},
	}
}

// loadOptions layers flags over the environment over the YAML file.
func loadOptions(c *cli.Context) (*options, error) {
	var fc fileConfig
	if path := c.String("config"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("--config %s: %w", path, err)
		}
	}
	o := &options{env: func(k string) string {
		if v, ok := os.LookupEnv(k); ok {
			return v
		}
		return fc.Env[k]
	}}
	pick := func(flag, fileVal string) string {
		if c.IsSet(flag) || fileVal == "" {
			return c.String(flag)
		}
		return fileVal
	}
	o.DataDir = pick("data-dir", fc.DataDir)
	o.BrokerAddr = pick("broker-addr", fc.BrokerAddr)
	o.TCPAddr = pick("tcp-addr", fc.TCPAddr)
	o.PeerAddr = pick("peer-addr", fc.PeerAddr)
	o.ControlPlaneAddr = pick("controlplane-addr", fc.ControlPlaneAddr)
	o.MetricsAddr = pick("metrics-addr", fc.MetricsAddr)
	if c.IsSet("controlplane-url") || fc.ControlPlaneURL == "" {
		o.ControlPlaneURL = c.String("controlplane-url")
	} else {
		o.ControlPlaneURL = fc.ControlPlaneURL
	}
	o.TokenFile = c.String("token-file")
	if o.TokenFile == "" {
		o.TokenFile = fc.TokenFile
	}
	o.Hosts = c.StringSlice("host")
	if len(o.Hosts) == 0 {
		o.Hosts = fc.Hosts
	}
	o.ShutdownTimeout = c.Duration("shutdown-timeout")
	if !c.IsSet("shutdown-timeout") && fc.ShutdownTimeout != "" {
		d, err := time.ParseDuration(fc.ShutdownTimeout)
		if err != nil {
			return nil, fmt.Errorf("--config: shutdown-timeout: %w", err)
		}
		o.ShutdownTimeout = d
	}
	return o, o.validate()
}

func (o *options) validate() error {
	var errs []error
	if o.DataDir == "" {
		errs = append(errs, errors.New("--data-dir (FELIX_DATA_DIR) must not be empty"))
	}
	if o.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout (FELIX_SHUTDOWN_TIMEOUT) must be positive"))
	}
	return errors.Join(errs...)
}

// envBool reads a boolean FELIX_* setting.
func (o *options) envBool(name string) (bool, error) {
	v := o.env(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
	return b, nil
}
