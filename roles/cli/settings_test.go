package cli

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// writeClientDir makes a data directory with client.json and a token file.
func writeClientDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cf := `{"broker_addr":"file:7000","controlplane_url":"http://file:8081","ca_file":"tls/ca.pem",
		"token_file":"admin.token","tenant":"filetenant","namespace":"filens"}`
	if err := os.WriteFile(filepath.Join(dir, clientFileName), []byte(cf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte("  file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// loadSettings runs a command with the client flags on args and returns
// what LoadClientSettings resolved.
func loadSettings(t *testing.T, args ...string) (Settings, error) {
	t.Helper()
	var s Settings
	var lerr error
	app := &cli.App{
		Name: "felix",
		Commands: []*cli.Command{{
			Name:  "probe",
			Flags: ClientFlags(),
			Action: func(c *cli.Context) error {
				s, lerr = LoadClientSettings(c)
				return nil
			},
		}},
	}
	if err := app.Run(append([]string{"felix", "probe"}, args...)); err != nil {
		t.Fatal(err)
	}
	return s, lerr
}

func TestSettingsFromClientFile(t *testing.T) {
	clearEnv(t)
	dir := writeClientDir(t)
	s, err := loadSettings(t, "--data-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{
		Broker: "file:7000", ControlPlane: "http://file:8081", CAFile: filepath.Join(dir, "tls/ca.pem"),
		TokenFile: filepath.Join(dir, "admin.token"), Token: "file-token", Tenant: "filetenant", Namespace: "filens",
		Transport: "quic", ConnectTimeout: defaultConnectTimeout,
	}
	s.clientFile = ""
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got  %+v\nwant %+v", s, want)
	}
}

// TestSettingsTransport: client.json's transport and broker_tcp_addr are
// used, --transport overrides the file, a --broker flag drops the file's
// TCP address (it belongs to the file's broker), and a bad transport is a
// usage error.
func TestSettingsTransport(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	cf := `{"broker_addr":"file:7000","broker_tcp_addr":"file:7001","transport":"auto","token_file":"admin.token"}`
	if err := os.WriteFile(filepath.Join(dir, clientFileName), []byte(cf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := loadSettings(t, "--data-dir", dir)
	if err != nil || s.Transport != "auto" || s.BrokerTCP != "file:7001" {
		t.Fatalf("from the file: %+v, %v", s, err)
	}
	cfg, err := s.SDKConfig()
	if err != nil || cfg.Transport != "auto" || cfg.TCPAddr != "file:7001" {
		t.Fatalf("SDK config %+v, %v", cfg, err)
	}
	s, err = loadSettings(t, "--data-dir", dir, "--transport", "tcp", "--broker", "other:7000")
	if err != nil || s.Transport != "tcp" || s.BrokerTCP != "" || s.Broker != "other:7000" {
		t.Fatalf("flags: %+v, %v", s, err)
	}
	if _, err := loadSettings(t, "--data-dir", dir, "--transport", "pigeon"); err == nil || !strings.Contains(err.Error(), `--transport "pigeon"`) {
		t.Fatalf("bad transport: %v", err)
	}
}

func TestSettingsPrecedence(t *testing.T) {
	clearEnv(t)
	dir := writeClientDir(t)
	other := t.TempDir()
	envToken := filepath.Join(other, "env.token")
	flagToken := filepath.Join(other, "flag.token")
	os.WriteFile(envToken, []byte("env-token"), 0o600)
	os.WriteFile(flagToken, []byte("flag-token\n"), 0o600)

	t.Setenv("FELIX_DATA_DIR", dir)
	t.Setenv("FELIX_BROKER_ADDR", "env:7000")
	t.Setenv("FELIX_TENANT", "envtenant")
	t.Setenv("FELIX_TOKEN_FILE", envToken)
	s, err := loadSettings(t, "--broker", "flag:7000", "--namespace", "flagns")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"broker (flag over env)", s.Broker, "flag:7000"},
		{"tenant (env over file)", s.Tenant, "envtenant"},
		{"namespace (flag over file)", s.Namespace, "flagns"},
		{"controlplane (file)", s.ControlPlane, "http://file:8081"},
		{"token (env file over client.json)", s.Token, "env-token"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}

	s, err = loadSettings(t, "--token-file", flagToken)
	if err != nil || s.Token != "flag-token" || s.TokenFile != flagToken {
		t.Fatalf("token flag: %+v %v", s, err)
	}

	t.Setenv("FELIX_TOKEN_FILE", "")
	t.Setenv("FELIX_TOKEN", " raw-token ")
	if s, err = loadSettings(t); err != nil || s.Token != "raw-token" {
		t.Fatalf("FELIX_TOKEN: %+v %v", s, err)
	}
}

func TestSettingsMissing(t *testing.T) {
	clearEnv(t)
	s, err := loadSettings(t, "--data-dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if s.Tenant != "default" || s.Namespace != "default" {
		t.Fatalf("defaults: %+v", s)
	}
	_, err = s.SDKConfig()
	if err == nil || !strings.Contains(err.Error(), "--broker") || !strings.Contains(err.Error(), "FELIX_BROKER_ADDR") ||
		!strings.Contains(err.Error(), "client.json") {
		t.Fatalf("SDKConfig without broker: %v", err)
	}
	s.Broker = "127.0.0.1:1"
	if _, err = s.SDKConfig(); err == nil || !strings.Contains(err.Error(), "--token-file") {
		t.Fatalf("SDKConfig without token: %v", err)
	}
	s.Token = "t"
	if cfg, err := s.SDKConfig(); err != nil || cfg.Addr != "127.0.0.1:1" || cfg.Tenant != "default" || cfg.RootCAs == nil {
		t.Fatalf("SDKConfig: %+v %v", cfg, err)
	}
	if _, err := NewAdminClient(s); err == nil || !strings.Contains(err.Error(), "--controlplane") {
		t.Fatalf("admin client without URL: %v", err)
	}
}

func TestSettingsBadFiles(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, clientFileName), []byte("{not json"), 0o644)
	if _, err := loadSettings(t, "--data-dir", dir); err == nil || !strings.Contains(err.Error(), "client.json") {
		t.Fatalf("malformed client.json: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.token")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	if _, err := loadSettings(t, "--data-dir", t.TempDir(), "--token-file", empty); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty token file: %v", err)
	}
	if _, err := loadSettings(t, "--data-dir", t.TempDir(), "--token-file", filepath.Join(dir, "nope")); err == nil {
		t.Fatal("missing token file accepted")
	}
}

// A cluster's client.json (felix dev) names every node: the first is
// used, the others are kept to try when it does not answer, unless a
// flag names the address.
func TestSettingsFromClusterClientFile(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, clientFileName), []byte(`{"broker_addrs":["a:1","b:1","c:1"],
		"controlplane_urls":["http://a:2","http://b:2"],"token_file":"t"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "t"), []byte("tok"), 0o600)
	s, err := loadSettings(t, "--data-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Broker != "a:1" || !reflect.DeepEqual(s.MoreBrokers, []string{"b:1", "c:1"}) ||
		s.ControlPlane != "http://a:2" || !reflect.DeepEqual(s.MoreControlPlanes, []string{"http://b:2"}) {
		t.Fatalf("%+v", s)
	}
	if s, err = loadSettings(t, "--data-dir", dir, "--broker", "x:1"); err != nil || s.Broker != "x:1" || s.MoreBrokers != nil {
		t.Fatalf("--broker: %+v %v", s, err)
	}
}

// With several brokers the commands connect a ClusterClient over all of
// them; with one, a single connection. Neither answers here, and each
// error says which it tried.
func TestDialBrokerUsesEveryBrokerOfACluster(t *testing.T) {
	s := Settings{Broker: "127.0.0.1:1", MoreBrokers: []string{"127.0.0.1:2"}, Token: "t", Tenant: "default",
		ConnectTimeout: 200 * time.Millisecond}
	_, err := dialBroker(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "cluster's brokers") || !strings.Contains(err.Error(), "127.0.0.1:2") {
		t.Fatalf("cluster: %v", err)
	}
	s.MoreBrokers = nil
	_, err = dialBroker(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "connect to broker 127.0.0.1:1") {
		t.Fatalf("one broker: %v", err)
	}
}
