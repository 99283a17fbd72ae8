package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeFile writes a client file at path, making its directory.
func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// inDir runs the rest of the test in dir (tests in this package do not
// run in parallel).
func inDir(t *testing.T, dir string) {
	t.Helper()
	t.Chdir(dir)
}

// TestUserConfigOutsideTheDataDirectory: away from ./felix-data the
// user's $XDG_CONFIG_HOME/felix/client.json (else ~/.config/felix/...)
// supplies the settings, its relative paths taken from its own directory.
func TestUserConfigOutsideTheDataDirectory(t *testing.T) {
	clearEnv(t)
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	writeFile(t, filepath.Join(xdg, "felix", "client.json"), `{"broker_addr":"user:5000","token_file":"user.token"}`)
	writeFile(t, filepath.Join(xdg, "felix", "user.token"), "user-token")
	inDir(t, t.TempDir())

	s, err := loadSettings(t)
	if err != nil || s.Broker != "user:5000" || s.Token != "user-token" {
		t.Fatalf("user config: %+v %v", s, err)
	}

	// Without XDG_CONFIG_HOME, ~/.config.
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", home)
	writeFile(t, filepath.Join(home, ".config", "felix", "client.json"), `{"broker_addr":"home:5000"}`)
	if s, err = loadSettings(t); err != nil || s.Broker != "home:5000" {
		t.Fatalf("~/.config: %+v %v", s, err)
	}

	// ./felix-data, where felix serve runs, beats the user config.
	writeFile(t, filepath.Join("felix-data", "client.json"), `{"broker_addr":"local:5000"}`)
	if s, err = loadSettings(t); err != nil || s.Broker != "local:5000" {
		t.Fatalf("./felix-data: %+v %v", s, err)
	}
}

// TestClientFilePrecedence: --data-dir (or FELIX_DATA_DIR), then
// FELIX_CLIENT_CONFIG, then --context, then ./felix-data, then the user's
// config; and a flag still beats every file.
func TestClientFilePrecedence(t *testing.T) {
	clearEnv(t)
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	writeFile(t, filepath.Join(xdg, "felix", "client.json"), `{"broker_addr":"user:1"}`)
	writeFile(t, filepath.Join(xdg, "felix", "contexts", "prod.json"), `{"broker_addr":"prod:1","tenant":"prodtenant"}`)
	named := filepath.Join(t.TempDir(), "named.json")
	writeFile(t, named, `{"broker_addr":"named:1"}`)
	dataDir := t.TempDir()
	writeFile(t, filepath.Join(dataDir, "client.json"), `{"broker_addr":"datadir:1"}`)
	inDir(t, t.TempDir())
	writeFile(t, filepath.Join("felix-data", "client.json"), `{"broker_addr":"local:1"}`)

	broker := func(args ...string) string {
		t.Helper()
		s, err := loadSettings(t, args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return s.Broker
	}
	if got := broker("--context", "prod"); got != "prod:1" {
		t.Errorf("--context prod: %s", got)
	}
	t.Setenv("FELIX_CONTEXT", "prod")
	if got := broker(); got != "prod:1" {
		t.Errorf("FELIX_CONTEXT=prod: %s", got)
	}
	t.Setenv(envClientConfig, named)
	if got := broker("--context", "prod"); got != "named:1" {
		t.Errorf("FELIX_CLIENT_CONFIG over --context: %s", got)
	}
	if got := broker("--data-dir", dataDir); got != "datadir:1" {
		t.Errorf("--data-dir over FELIX_CLIENT_CONFIG: %s", got)
	}
	if got := broker("--data-dir", dataDir, "--broker", "flag:1"); got != "flag:1" {
		t.Errorf("a flag over every file: %s", got)
	}
	t.Setenv(envClientConfig, "")
	t.Setenv("FELIX_CONTEXT", "")
	if got := broker(); got != "local:1" {
		t.Errorf("./felix-data over the user config: %s", got)
	}
}

func TestNamedClientFilesMustExist(t *testing.T) {
	clearEnv(t)
	inDir(t, t.TempDir())
	if _, err := loadSettings(t, "--context", "nope"); err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Fatalf("a missing context: %v", err)
	}
	if _, err := loadSettings(t, "--context", "../etc"); err == nil || !strings.Contains(err.Error(), "not a path") {
		t.Fatalf("a context that is a path: %v", err)
	}
	t.Setenv(envClientConfig, filepath.Join(t.TempDir(), "absent.json"))
	if _, err := loadSettings(t); err == nil || !strings.Contains(err.Error(), "absent.json") {
		t.Fatalf("a missing FELIX_CLIENT_CONFIG: %v", err)
	}
	// Nothing named and nothing found is fine; the message says where it looked.
	t.Setenv(envClientConfig, "")
	s, err := loadSettings(t)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.needBroker(); err == nil || !strings.Contains(err.Error(), "felix-data/client.json or ") ||
		!strings.Contains(err.Error(), filepath.Join("felix", "client.json")) {
		t.Fatalf("missing broker: %v", err)
	}
}

func TestConnectTimeout(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	s, err := loadSettings(t, "--data-dir", dir)
	if err != nil || s.ConnectTimeout != 5*time.Second {
		t.Fatalf("default: %v %v", s.ConnectTimeout, err)
	}
	s, err = loadSettings(t, "--data-dir", dir, "--connect-timeout", "750ms")
	if err != nil || s.ConnectTimeout != 750*time.Millisecond {
		t.Fatalf("flag: %v %v", s.ConnectTimeout, err)
	}
	s.Broker, s.Token = "127.0.0.1:1", "t"
	if cfg, err := s.SDKConfig(); err != nil || cfg.DialTimeout != 750*time.Millisecond {
		t.Fatalf("SDK dial timeout: %v %v", cfg.DialTimeout, err)
	}
	t.Setenv("FELIX_CONNECT_TIMEOUT", "2s")
	if s, err = loadSettings(t, "--data-dir", dir); err != nil || s.ConnectTimeout != 2*time.Second {
		t.Fatalf("env: %v %v", s.ConnectTimeout, err)
	}
	for _, bad := range []string{"0s", "-1s", "11m"} {
		if _, err := loadSettings(t, "--data-dir", dir, "--connect-timeout", bad); err == nil || !strings.Contains(err.Error(), "--connect-timeout") {
			t.Errorf("--connect-timeout %s: %v", bad, err)
		}
	}
}
