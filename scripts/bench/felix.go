package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// buildFelix builds the checkout's binary into dir unless FELIX_BIN names one.
func buildFelix(ctx context.Context, repo, dir string) (string, error) {
	if bin := os.Getenv("FELIX_BIN"); bin != "" {
		return filepath.Abs(bin)
	}
	bin := filepath.Join(dir, "felix")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = repo
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building felix in %s: %w\n%s", repo, err, out.String())
	}
	return bin, nil
}

// felixNode is one `felix serve` in its own directory, every port chosen by
// the kernel.
type felixNode struct {
	dir     string
	proc    *child
	metrics string
}

var metricsLine = regexp.MustCompile(`metrics\s+(http://\S+)/metrics`)

// felixEnv is the broker environment every benchmark run uses.
var felixEnv = []string{"FELIX_PUB_INGRESS_WAIT=true", "FELIX_MAX_CONNECTIONS_PER_SOURCE=20000"}

func startFelix(ctx context.Context, p *procs, bin, dir string, env []string) (*felixNode, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--data-dir", filepath.Join(dir, "felix-data"),
		"--broker-addr", "127.0.0.1:0", "--controlplane-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), felixEnv...), env...)
	out := &tailBuffer{max: 64 << 10}
	cmd.Stdout = out
	c, err := p.start("felix serve", cmd)
	if err != nil {
		return nil, err
	}
	n := &felixNode{dir: dir, proc: c}
	deadline := time.Now().Add(30 * time.Second)
	for n.metrics == "" {
		if m := metricsLine.FindStringSubmatch(out.String()); m != nil {
			n.metrics = m[1]
			break
		}
		if err := n.pause(ctx, deadline, "report its addresses", out); err != nil {
			return nil, err
		}
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "felix-data", "client.json")); err == nil && n.ready(ctx) {
			return n, nil
		}
		if err := n.pause(ctx, deadline, "become ready", out); err != nil {
			return nil, err
		}
	}
}

// pause waits a moment, failing if the node died, the deadline passed or
// ctx ended.
func (n *felixNode) pause(ctx context.Context, deadline time.Time, what string, out *tailBuffer) error {
	select {
	case <-n.proc.exited:
		return fmt.Errorf("felix serve exited before it could %s: %v\nstdout: %s\nstderr: %s",
			what, n.proc.err, clip(out.String(), 600), clip(n.proc.stderr.String(), 600))
	case <-ctx.Done():
		n.proc.stop(5 * time.Second)
		return ctx.Err()
	case <-time.After(25 * time.Millisecond):
	}
	if time.Now().After(deadline) {
		n.proc.stop(5 * time.Second)
		return fmt.Errorf("felix serve did not %s within 30s; stderr: %s", what, clip(n.proc.stderr.String(), 600))
	}
	return nil
}

func (n *felixNode) ready(ctx context.Context) bool { return httpReady(ctx, n.metrics+"/ready") }

func (n *felixNode) stop() { n.proc.stop(20 * time.Second) }

// benchResult is what `felix bench ... -o json` prints.
type benchResult struct {
	Scenario string         `json:"scenario"`
	Params   map[string]any `json:"params"`
	Figures  []struct {
		Name  string  `json:"name"`
		Value float64 `json:"value"`
		Unit  string  `json:"unit"`
	} `json:"figures"`
}

// runFelixBench runs `felix bench <args> -o json` against the node as its
// own process, bounded by limit, and returns the figures by name.
func runFelixBench(ctx context.Context, p *procs, bin string, n *felixNode, limit time.Duration, args ...string) (figures, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	full := append([]string{"bench"}, args...)
	if n != nil {
		full = append(full, "--data-dir", filepath.Join(n.dir, "felix-data"))
	}
	full = append(full, "-o", "json")
	cmd := exec.Command(bin, full...)
	if n != nil {
		cmd.Dir = n.dir
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	c, err := p.start("felix "+strings.Join(args[:1], " "), cmd)
	if err != nil {
		return nil, err
	}
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	return parseBenchJSON(out.Bytes())
}

// parseBenchJSON reads the last JSON object line of a bench run.
func parseBenchJSON(b []byte) (figures, error) {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var r benchResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("felix bench output: %w", err)
		}
		f := figures{}
		for _, x := range r.Figures {
			f[x.Name] = x.Value
		}
		return f, nil
	}
	return nil, fmt.Errorf("felix bench printed no JSON: %q", clip(string(b), 200))
}

// figures are one run's named values.
type figures map[string]float64
