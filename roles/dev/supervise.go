package dev

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
)

// readyPoll is how often the supervisor asks a starting node whether it
// is ready.
const readyPoll = 200 * time.Millisecond

// supervisor runs the plan's nodes: it starts them, waits until each is
// ready, reports those that exit and stops them all on a signal. It is
// driven by one goroutine (run).
type supervisor struct {
	plan     *plan
	s        settings
	out, err io.Writer
	mu       sync.Mutex // shared by the children's line writers and run's own lines
	children []*child
	http     *http.Client
}

func newSupervisor(c *cli.Context, p *plan, s settings) *supervisor {
	return &supervisor{plan: p, s: s, out: c.App.Writer, err: c.App.ErrWriter, http: &http.Client{Timeout: 2 * time.Second}}
}

// say writes one line of felix dev's own to its stderr.
func (sv *supervisor) say(format string, args ...any) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	fmt.Fprintf(sv.err, "felix dev: "+format+"\n", args...)
}

func (sv *supervisor) run() error {
	sigC := make(chan os.Signal, 2)
	signal.Notify(sigC, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigC)
	for i := range sv.plan.nodes {
		n := &sv.plan.nodes[i]
		ch, err := startChild(n, sv.out, sv.err, &sv.mu)
		if err != nil {
			sv.say("start %s: %v", n.Name, err)
			return sv.stop(sigC, 1)
		}
		sv.children = append(sv.children, ch)
	}
	if err := writeDevFile(sv.plan.dataDir, sv.plan.nodes); err != nil {
		sv.say("write dev.json: %v", err)
		return sv.stop(sigC, 1)
	}
	if err := writeClientFile(sv.plan); err != nil {
		sv.say("write client.json: %v", err)
		return sv.stop(sigC, 1)
	}
	ready := make([]bool, len(sv.children))
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	announced, lastWait := false, time.Now()
	for {
		select {
		case s := <-sigC:
			sv.say("%s: stopping every node", s)
			return sv.stop(sigC, 0)
		case <-tick.C:
		}
		if sv.reap() {
			sv.say("no node is left running")
			return cli.Exit("", 1)
		}
		if announced {
			continue
		}
		for i, ch := range sv.children {
			if !ready[i] && !ch.exited() {
				ready[i] = sv.ready(ch.info)
			}
		}
		if all(ready) {
			announced = true
			sv.summary()
		} else if time.Since(lastWait) >= 10*time.Second {
			lastWait = time.Now()
			sv.say("waiting for %s to be ready", strings.Join(sv.notReady(ready), ", "))
		}
	}
}

// reap reports each child that exited since the last call, records it in
// dev.json as stopped, and returns whether none is left.
func (sv *supervisor) reap() (none bool) {
	none, changed := true, false
	for _, ch := range sv.children {
		if !ch.exited() {
			none = false
			continue
		}
		if ch.info.PID == 0 {
			continue // reported already
		}
		sv.say("%s (pid %d) exited: %v; the others keep running. Start it again with:\n  %s%s",
			ch.info.Name, ch.info.PID, exitText(ch.err), envPrefix(ch.info.Env), shellJoin(ch.info.Argv))
		ch.info.PID, changed = 0, true
	}
	if changed {
		if err := writeDevFile(sv.plan.dataDir, sv.plan.nodes); err != nil {
			sv.say("write dev.json: %v", err)
		}
	}
	return none
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// ready asks the node's broker (/ready on its metrics listener) and its
// control plane (/ready) whether they serve.
func (sv *supervisor) ready(n *nodeInfo) bool {
	return sv.readyAt("http://"+n.MetricsAddr+"/ready") && sv.readyAt(n.ControlPlaneURL+"/ready")
}

func (sv *supervisor) readyAt(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := sv.http.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct{ Status string }
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&h)
	return resp.StatusCode == http.StatusOK && (h.Status == "" || h.Status == "ready")
}

func all(b []bool) bool {
	for _, v := range b {
		if !v {
			return false
		}
	}
	return true
}

func (sv *supervisor) notReady(ready []bool) []string {
	var names []string
	for i, ch := range sv.children {
		if !ready[i] && !ch.exited() {
			names = append(names, ch.info.Name)
		}
	}
	return names
}

// stop sends SIGTERM to every node, waits up to --stop-timeout (or a
// second signal), then kills what is left. code is the exit code when
// every node stopped in time.
func (sv *supervisor) stop(sigC <-chan os.Signal, code int) error {
	for _, ch := range sv.children {
		ch.signal(syscall.SIGTERM)
	}
	deadline := time.NewTimer(sv.s.stopTimeout)
	defer deadline.Stop()
	killed := false
	for _, ch := range sv.children {
		select {
		case <-ch.done:
			continue
		case <-deadline.C:
			sv.say("the nodes did not stop within --stop-timeout %v: killing them", sv.s.stopTimeout)
		case s := <-sigC:
			sv.say("%s again: killing every node", s)
		}
		killed = true
		break
	}
	if killed {
		for _, ch := range sv.children {
			ch.signal(syscall.SIGKILL)
		}
		code = 1
	}
	for _, ch := range sv.children {
		<-ch.done
		ch.info.PID = 0
	}
	if err := writeDevFile(sv.plan.dataDir, sv.plan.nodes); err != nil {
		sv.say("write dev.json: %v", err)
	}
	sv.say("every node stopped")
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

// summary prints the cluster's addresses and commands to try.
func (sv *supervisor) summary() {
	dir := sv.plan.dataDir
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, dir); err == nil && !strings.HasPrefix(r, "..") {
			dir = "./" + r
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "felix dev: a %d-node cluster is ready\n", len(sv.plan.nodes))
	for _, n := range sv.plan.nodes {
		fmt.Fprintf(&b, "  %-6s %-9s pid %-7d broker %s  control plane %s  metrics http://%s/metrics\n",
			n.Name, n.NodeID, n.PID, n.BrokerAddr, n.ControlPlaneURL, n.MetricsAddr)
	}
	fmt.Fprintf(&b, "  state, client.json and dev.json in %s\n", sv.plan.dataDir)
	fmt.Fprintf(&b, "try:\n")
	for _, cmd := range []string{
		"felix admin brokers list",
		"felix admin stream create orders --shards 6",
		"felix admin placement show orders",
		"felix sub orders --count 1 DIR &",
		"felix pub orders hello",
	} {
		if !strings.Contains(cmd, "DIR") {
			cmd += " DIR"
		}
		fmt.Fprintf(&b, "  %s\n", strings.Replace(cmd, "DIR", "--data-dir "+shellQuote(dir), 1))
	}
	fmt.Fprintf(&b, "Ctrl-C stops every node.\n")
	sv.mu.Lock()
	defer sv.mu.Unlock()
	io.WriteString(sv.out, b.String())
}

// shellJoin quotes argv for a POSIX shell.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func envPrefix(env []string) string {
	if len(env) == 0 {
		return ""
	}
	return shellJoin(env) + " "
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
