package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/internal/freeport"
)

// cpMember is one `felix controlplane` process of a Raft group, with fixed
// REST and peer ports so that a restarted member comes back where the
// others and the clients expect it.
type cpMember struct {
	t        *testing.T
	id       int
	dir      string // data directory
	restAddr string
	peerAddr string
	cmd      *exec.Cmd
	stderr   *syncBuffer
	exited   chan struct{}
	logs     []string // stderr of earlier runs, for failure reports
}

// cpCluster is a group of control plane members on loopback.
type cpCluster struct {
	t       *testing.T
	members []*cpMember
	peers   string
	env     []string
	client  *http.Client
	token   string
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := freeport.Pick(false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// startCPCluster starts n members at once and waits until each serves.
func startCPCluster(t *testing.T, n int, env ...string) *cpCluster {
	t.Helper()
	c := &cpCluster{t: t, env: env, client: &http.Client{Timeout: 5 * time.Second}}
	var peers []string
	for i := 1; i <= n; i++ {
		m := &cpMember{t: t, id: i, dir: t.TempDir(), restAddr: freeAddr(t), peerAddr: freeAddr(t)}
		c.members = append(c.members, m)
		peers = append(peers, fmt.Sprintf("%d=http://%s", i, m.peerAddr))
	}
	c.peers = strings.Join(peers, ",")
	for _, m := range c.members {
		c.start(m)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			m.stop(syscall.SIGTERM, 20*time.Second)
			if t.Failed() {
				t.Logf("member %d stderr:\n%s\n%s", m.id, strings.Join(m.logs, "\n--- restart ---\n"), m.stderr)
			}
		}
	})
	for _, m := range c.members {
		c.waitServing(m, 60*time.Second)
	}
	b, err := os.ReadFile(filepath.Join(c.members[0].dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	c.token = strings.TrimSpace(string(b))
	return c
}

func (c *cpCluster) start(m *cpMember) {
	c.t.Helper()
	if m.stderr != nil {
		m.logs = append(m.logs, m.stderr.String())
	}
	m.stderr, m.exited = &syncBuffer{}, make(chan struct{})
	m.cmd = exec.Command(felixBin, "controlplane", "--data-dir", m.dir, "--controlplane-addr", m.restAddr,
		"--raft-node-id", fmt.Sprint(m.id), "--raft-peers", c.peers)
	m.cmd.Env = append(os.Environ(), c.env...)
	m.cmd.Stdout, m.cmd.Stderr = io.Discard, m.stderr
	if err := m.cmd.Start(); err != nil {
		c.t.Fatalf("start member %d: %v", m.id, err)
	}
	cmd, exited := m.cmd, m.exited
	go func() {
		cmd.Wait()
		close(exited)
	}()
}

// waitServing waits until the member's REST API answers /ready with 200.
func (c *cpCluster) waitServing(m *cpMember, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		resp, err := c.client.Get("http://" + m.restAddr + "/ready")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-m.exited:
			c.t.Fatalf("member %d exited\n%s", m.id, m.stderr)
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("member %d never became ready (last: %v)\n%s", m.id, err, m.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop signals the member and waits up to grace, then kills it.
func (m *cpMember) stop(sig syscall.Signal, grace time.Duration) {
	select {
	case <-m.exited:
		return
	default:
	}
	m.cmd.Process.Signal(syscall.SIGCONT) // a frozen member cannot handle sig
	m.cmd.Process.Signal(sig)
	select {
	case <-m.exited:
	case <-time.After(grace):
		m.t.Errorf("member %d did not exit within %v of %v; killing it", m.id, grace, sig)
		m.cmd.Process.Kill()
		<-m.exited
	}
}

// restart stops the member with sig and starts it again (with an empty
// data directory when wipe is set), then waits until it serves.
func (c *cpCluster) restart(m *cpMember, sig syscall.Signal, wipe bool) {
	c.t.Helper()
	m.stop(sig, 20*time.Second)
	if wipe {
		if err := os.RemoveAll(m.dir); err != nil {
			c.t.Fatal(err)
		}
		if err := os.MkdirAll(m.dir, 0o700); err != nil {
			c.t.Fatal(err)
		}
	}
	c.start(m)
	c.waitServing(m, 60*time.Second)
}

// call sends one REST request to a member and returns status and body.
func (c *cpCluster) call(ctx context.Context, m *cpMember, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+m.restAddr+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, out, err
}

// membersView is the part of GET /v1/members the tests use.
type membersView struct {
	ID      int  `json:"id"`
	Leader  int  `json:"leader"`
	Applied int  `json:"applied"`
	Ready   bool `json:"ready"`
	Members []struct {
		ID    int  `json:"id"`
		Voter bool `json:"voter"`
	} `json:"members"`
}

// leader asks the members who leads, until one answers with a leader.
func (c *cpCluster) leader() *cpMember {
	c.t.Helper()
	var found *cpMember
	eventually(c.t, 30*time.Second, "a raft leader", func() bool {
		for _, m := range c.members {
			status, body, err := c.call(context.Background(), m, "GET", "/v1/members", nil)
			var v membersView
			if err != nil || status != 200 || json.Unmarshal(body, &v) != nil || v.Leader == 0 {
				continue
			}
			found = c.members[v.Leader-1]
			return true
		}
		return false
	})
	return found
}
