package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procs owns every child process the harness starts. Each child leads its
// own process group, dies with the harness (Pdeathsig) and is stopped by
// group id; stopAll stops whatever is still running.
type procs struct {
	mu   sync.Mutex
	live map[*child]struct{}
}

func newProcs() *procs { return &procs{live: map[*child]struct{}{}} }

// child is one started process.
type child struct {
	name   string
	cmd    *exec.Cmd
	stderr *tailBuffer
	exited chan struct{}
	err    error
	once   sync.Once
	owner  *procs
}

// start runs cmd in its own process group. Its stderr is kept (the tail)
// for error messages; stdout is the caller's to set up before start.
func (p *procs) start(name string, cmd *exec.Cmd) (*child, error) {
	c := &child{name: name, cmd: cmd, stderr: &tailBuffer{max: 16 << 10}, exited: make(chan struct{}), owner: p}
	if cmd.Stderr == nil {
		cmd.Stderr = c.stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.mu.Lock()
	p.live[c] = struct{}{}
	p.mu.Unlock()
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// alive says whether the child is still running.
func (c *child) alive() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the child's group, waits up to grace, then kills
// the group, and waits for the child to be reaped.
func (c *child) stop(grace time.Duration) {
	c.once.Do(func() {
		select {
		case <-c.exited:
		default:
			syscall.Kill(-c.pid(), syscall.SIGTERM)
			select {
			case <-c.exited:
			case <-time.After(grace):
				syscall.Kill(-c.pid(), syscall.SIGKILL)
				<-c.exited
			}
		}
		// Anything the child left behind in its group goes too.
		syscall.Kill(-c.pid(), syscall.SIGKILL)
		c.owner.mu.Lock()
		delete(c.owner.live, c)
		c.owner.mu.Unlock()
	})
}

// wait waits for the child to exit by itself, stopping it when ctx ends.
func (c *child) wait(ctx context.Context) error {
	select {
	case <-c.exited:
		c.stop(0)
		return c.exitError()
	case <-ctx.Done():
		c.stop(2 * time.Second)
		return fmt.Errorf("%s: %w", c.name, ctx.Err())
	}
}

func (c *child) exitError() error {
	if c.err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w; stderr: %s", c.name, c.err, clip(c.stderr.String(), 600))
}

func (p *procs) stopAll() {
	p.mu.Lock()
	all := make([]*child, 0, len(p.live))
	for c := range p.live {
		all = append(all, c)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Add(1)
		go func() { defer wg.Done(); c.stop(10 * time.Second) }()
	}
	wg.Wait()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// readyLine starts reading r line by line and returns a channel that gets
// the first line with the given prefix (without it); the rest is discarded.
func readyLine(r io.Reader, prefix string) <-chan string {
	ch := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sent := false
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok && !sent {
				ch <- strings.TrimSpace(rest)
				sent = true
			}
		}
		if !sent {
			close(ch)
		}
	}()
	return ch
}

// awaitReady waits for the child's ready line, its exit or the timeout.
func awaitReady(ctx context.Context, c *child, ready <-chan string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-ready:
		if ok {
			return line, nil
		}
		<-c.exited
		return "", fmt.Errorf("%s exited before it was ready: %w", c.name, errors.Join(c.exitError(), errors.New(clip(c.stderr.String(), 600))))
	case <-c.exited:
		return "", fmt.Errorf("%s exited before it was ready: %v; stderr: %s", c.name, c.err, clip(c.stderr.String(), 600))
	case <-t.C:
		return "", fmt.Errorf("%s was not ready within %v; stderr: %s", c.name, timeout, clip(c.stderr.String(), 600))
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// vmRSS reads a process's resident set size in bytes from /proc.
func vmRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, err
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for process %d", pid)
}
