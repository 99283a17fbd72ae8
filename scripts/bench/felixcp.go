package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// felixCluster is a Raft group of `felix controlplane` members on
// loopback, each in its own directory and process, for the meta workload.
type felixCluster struct {
	dir     string
	members []*child
	urls    []string // REST base URLs, member 1 first
	token   string   // admin token file of member 1
}

// freeTCPAddr returns a loopback address whose port was free a moment ago.
func freeTCPAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startFelixCluster starts n members at once and waits until every one
// answers /ready (which needs a quorum).
func startFelixCluster(ctx context.Context, p *procs, bin, dir string, n int) (*felixCluster, error) {
	c := &felixCluster{dir: dir}
	var peers, rest []string
	for i := 1; i <= n; i++ {
		r, err := freeTCPAddr()
		if err != nil {
			return nil, err
		}
		peer, err := freeTCPAddr()
		if err != nil {
			return nil, err
		}
		rest = append(rest, r)
		peers = append(peers, fmt.Sprintf("%d=http://%s", i, peer))
	}
	for i, r := range rest {
		mdir := filepath.Join(dir, fmt.Sprintf("member-%d", i+1))
		if err := os.MkdirAll(mdir, 0o755); err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "controlplane", "--data-dir", mdir, "--controlplane-addr", r,
			"--raft-node-id", fmt.Sprint(i+1), "--raft-peers", strings.Join(peers, ","))
		cmd.Env = append(os.Environ(), "FELIX_LOG_LEVEL=warn")
		ch, err := p.start(fmt.Sprintf("felix controlplane %d", i+1), cmd)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.members = append(c.members, ch)
		c.urls = append(c.urls, "http://"+r)
	}
	c.token = filepath.Join(dir, "member-1", "admin.token")
	deadline := time.Now().Add(60 * time.Second)
	for i, u := range c.urls {
		for !httpReady(ctx, u+"/ready") {
			select {
			case <-c.members[i].exited:
				c.stop()
				return nil, fmt.Errorf("felix controlplane %d exited: %v; stderr: %s", i+1, c.members[i].err, clip(c.members[i].stderr.String(), 600))
			case <-ctx.Done():
				c.stop()
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				c.stop()
				return nil, fmt.Errorf("felix controlplane %d did not become ready within 60s; stderr: %s", i+1, clip(c.members[i].stderr.String(), 600))
			}
		}
	}
	for {
		if _, err := os.Stat(c.token); err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("felix controlplane 1 wrote no admin token")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// httpReady reports whether GET url answers 200 within a short timeout.
func httpReady(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (c *felixCluster) stop() {
	for _, m := range c.members {
		m.stop(20 * time.Second)
	}
}

// benchArgs point a `felix bench` client at the group through a follower,
// which hands every write to the leader: the usual case for a client
// given one member's URL, and the slower one (sending to the leader
// measured ~20% more creates/s), so the figure does not depend on which
// member won the election.
func (c *felixCluster) benchArgs(ctx context.Context) ([]string, error) {
	lead, err := c.leader(ctx)
	if err != nil {
		return nil, err
	}
	target := c.urls[0]
	if lead == 1 {
		target = c.urls[1]
	}
	return []string{"--controlplane", target, "--token-file", c.token, "--data-dir", filepath.Join(c.dir, "no-client-json")}, nil
}

// leader asks member 1 which member leads, waiting for one to be known.
func (c *felixCluster) leader(ctx context.Context) (uint64, error) {
	tok, err := os.ReadFile(c.token)
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.urls[0]+"/v1/members", nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		var st struct {
			Leader uint64 `json:"leader"`
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err == nil && st.Leader != 0 {
				return st.Leader, nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("felix controlplane group has no leader after 30s")
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
