package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
)

// Where client settings come from besides flags and FELIX_* variables.
const (
	envClientConfig = "FELIX_CLIENT_CONFIG" // path of a client.json to use
	envContext      = "FELIX_CONTEXT"
	flagContext     = "context"
	contextsDir     = "contexts" // under the user config directory: NAME.json
)

// clientFileSource says which client.json a command reads and how it was
// chosen, for error messages.
type clientFileSource struct {
	path     string // the file to read; "" when there is none to read
	required bool   // named explicitly (a context, FELIX_CLIENT_CONFIG): it must exist
	tried    []string
}

// locateClientFile picks the client.json of a command, the first of:
//
//  1. <dir>/client.json for --data-dir DIR (or FELIX_DATA_DIR);
//  2. the file FELIX_CLIENT_CONFIG names;
//  3. <config>/felix/contexts/NAME.json for --context NAME (or FELIX_CONTEXT);
//  4. ./felix-data/client.json, when it exists (what felix serve writes);
//  5. the user's <config>/felix/client.json, when it exists,
//
// where <config> is $XDG_CONFIG_HOME, else ~/.config. Relative paths in
// the file are relative to the directory holding it.
func locateClientFile(c *cli.Context) (clientFileSource, error) {
	if c.String(flagDataDir) != "" {
		return clientFileSource{path: filepath.Join(c.String(flagDataDir), clientFileName)}, nil
	}
	if p := strings.TrimSpace(os.Getenv(envClientConfig)); p != "" {
		return clientFileSource{path: p, required: true}, nil
	}
	cfgDir, cfgErr := userConfigDir()
	if name := c.String(flagContext); name != "" {
		if strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
			return clientFileSource{}, usageErrorf(c, "--context %q: a context is a name, not a path (use %s for a path)", name, envClientConfig)
		}
		if cfgErr != nil {
			return clientFileSource{}, fmt.Errorf("--context %s: %w", name, cfgErr)
		}
		return clientFileSource{path: filepath.Join(cfgDir, "felix", contextsDir, name+".json"), required: true}, nil
	}
	src := clientFileSource{tried: []string{filepath.Join(defaultDataDir, clientFileName)}}
	if exists(src.tried[0]) {
		src.path = src.tried[0]
		return src, nil
	}
	if cfgErr == nil {
		user := filepath.Join(cfgDir, "felix", clientFileName)
		src.tried = append(src.tried, user)
		if exists(user) {
			src.path = user
		}
	}
	return src, nil
}

// describe names the file read, or every place looked in.
func (s clientFileSource) describe() string {
	if s.path != "" {
		return s.path
	}
	return strings.Join(s.tried, " or ")
}

// userConfigDir is $XDG_CONFIG_HOME when it is an absolute path, else
// ~/.config (the XDG default, on every system: felix keeps one place).
func userConfigDir() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no user config directory: %w", err)
	}
	return filepath.Join(home, ".config"), nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
