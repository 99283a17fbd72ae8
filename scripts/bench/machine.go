package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Machine is what a figure was measured on and with.
type Machine struct {
	CPU     string            `json:"cpu"`
	Cores   int               `json:"cores"`
	Kernel  string            `json:"kernel"`
	Go      string            `json:"go"`
	Felix   string            `json:"felix"`
	Modules map[string]string `json:"modules"` // peer module path -> version
}

func describeMachine(ctx context.Context, repo, felixBin string) Machine {
	m := Machine{CPU: cpuModel(), Cores: runtime.NumCPU(), Kernel: kernel(), Go: runtime.Version(), Modules: map[string]string{}}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/nats-io/nats-server/v2", "github.com/nats-io/nats.go",
				"go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/client/v3":
				m.Modules[d.Path] = d.Version
			}
		}
	}
	m.Felix = felixVersion(ctx, repo, felixBin)
	return m
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return "Linux " + strings.TrimSpace(string(b))
}

// felixVersion is the binary's own version line plus the checkout's commit
// (read-only git), marked dirty when the tree has changes.
func felixVersion(ctx context.Context, repo, bin string) string {
	out := func(name string, args ...string) string {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = repo
		b, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	v := strings.TrimPrefix(strings.SplitN(out(bin, "version"), "\n", 2)[0], "felix ")
	if v == "" {
		v = "unknown"
	}
	if rev := out("git", "rev-parse", "--short", "HEAD"); rev != "" {
		v += " " + rev
		if out("git", "status", "--porcelain", "--untracked-files=no") != "" {
			v += "+dirty"
		}
	}
	return v
}
