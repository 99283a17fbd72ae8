package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// chaosClient keeps creating streams with unique names and reading each
// back through a random member. A call is retried with backoff, on any
// member, until it succeeds or a minute has passed; only calls that never
// succeeded count as failures.
type chaosClient struct {
	c        *cpCluster
	mu       sync.Mutex
	acked    []string
	failures []string
	attempts int
}

const chaosStreams = "/v1/tenants/default/namespaces/default/streams"

func (cl *chaosClient) run(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		if i%10 == 9 {
			cl.batch(ctx, i)
			continue
		}
		name := fmt.Sprintf("chaos-%05d", i)
		if err := cl.create(ctx, name); err != nil {
			if ctx.Err() != nil {
				return // stopped mid-call: not a failure of the cluster
			}
			cl.fail(fmt.Sprintf("create %s: %v", name, err))
			continue
		}
		cl.mu.Lock()
		cl.acked = append(cl.acked, name)
		cl.mu.Unlock()
		if err := cl.read(ctx, name); err != nil && ctx.Err() == nil {
			cl.fail(fmt.Sprintf("read %s: %v", name, err))
		}
	}
}

// batch creates two streams in one all-or-nothing call, retried with the
// same idempotency key (a retry of an applied batch answers replayed).
func (cl *chaosClient) batch(ctx context.Context, i int) {
	names := []string{fmt.Sprintf("batch-%05d-a", i), fmt.Sprintf("batch-%05d-b", i)}
	body := map[string]any{"idempotency_key": fmt.Sprintf("chaos-%d", i),
		"streams": []map[string]any{{"stream": names[0]}, {"stream": names[1], "shards": 2}}}
	err := cl.retry(ctx, func(m *cpMember) (bool, error) {
		status, resp, err := cl.c.call(ctx, m, "POST", "/v1/tenants/default/namespaces/default/batch", body)
		switch {
		case err != nil || status >= 500:
			return false, fmt.Errorf("member %d: %v %d %s", m.id, err, status, resp)
		case status == 201:
			return true, nil
		default:
			return true, fmt.Errorf("member %d: %d %s", m.id, status, resp)
		}
	})
	if err != nil {
		if ctx.Err() == nil {
			cl.fail(fmt.Sprintf("batch %d: %v", i, err))
		}
		return
	}
	cl.mu.Lock()
	cl.acked = append(cl.acked, names...)
	cl.mu.Unlock()
}

func (cl *chaosClient) fail(msg string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.failures = append(cl.failures, msg)
}

// retry calls try on random members until it reports done.
func (cl *chaosClient) retry(ctx context.Context, try func(m *cpMember) (done bool, err error)) error {
	deadline := time.Now().Add(time.Minute)
	backoff := 20 * time.Millisecond
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		m := cl.c.members[rand.IntN(len(cl.c.members))]
		cl.mu.Lock()
		cl.attempts++
		cl.mu.Unlock()
		done, err := try(m)
		if done {
			return err
		}
		last = err
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
	return fmt.Errorf("gave up: %v", last)
}

// create makes one stream. A conflict after an attempt whose outcome was
// unknown means that attempt was applied.
func (cl *chaosClient) create(ctx context.Context, name string) error {
	uncertain := false
	return cl.retry(ctx, func(m *cpMember) (bool, error) {
		status, body, err := cl.c.call(ctx, m, "POST", chaosStreams, map[string]any{"stream": name})
		switch {
		case err != nil:
			uncertain = true // the request may have reached the member
			return false, err
		case status == 201:
			return true, nil
		case status == 409 && uncertain:
			return true, nil
		case status >= 500:
			uncertain = uncertain || bytes.Contains(body, []byte("outcome_unknown")) || status == 500
			return false, fmt.Errorf("member %d: %d %s", m.id, status, body)
		default:
			return true, fmt.Errorf("member %d: %d %s", m.id, status, body)
		}
	})
}

func (cl *chaosClient) read(ctx context.Context, name string) error {
	return cl.retry(ctx, func(m *cpMember) (bool, error) {
		status, body, err := cl.c.call(ctx, m, "GET", chaosStreams+"/"+name, nil)
		switch {
		case err != nil || status >= 500:
			return false, fmt.Errorf("member %d: %v %d %s", m.id, err, status, body)
		case status == 200:
			return true, nil
		default:
			return true, fmt.Errorf("member %d: %d %s", m.id, status, body)
		}
	})
}

// TestRaftChaos runs three real control plane members while a client
// creates and reads streams, and injects a rolling restart, a SIGKILL of
// the leader, a SIGSTOP of the leader past an election timeout and a
// follower restarted with a wiped data directory. No call may fail in the
// end, and every member must hold the same catalog with every
// acknowledged stream.
func TestRaftChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test")
	}
	c := startCPCluster(t, 3, "FELIX_RAFT_TICK_MS=50", "FELIX_RAFT_SNAPSHOT_EVERY=200", "FELIX_LOG_LEVEL=warn")
	cl := &chaosClient{c: c}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl.run(ctx)
	}()
	defer func() { cancel(); wg.Wait() }()
	progress := func(what string) {
		t.Helper()
		cl.mu.Lock()
		n := len(cl.acked)
		cl.mu.Unlock()
		eventually(t, 60*time.Second, "writes after "+what, func() bool {
			cl.mu.Lock()
			defer cl.mu.Unlock()
			return len(cl.acked) >= n+5
		})
		t.Logf("after %s: %d streams acknowledged", what, n+5)
	}
	progress("start")

	for _, m := range c.members {
		c.restart(m, syscall.SIGTERM, false)
	}
	progress("rolling restart")

	c.restart(c.leader(), syscall.SIGKILL, false)
	progress("SIGKILL of the leader")

	lead := c.leader()
	lead.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(2 * time.Second) // four election timeouts at a 50ms tick
	lead.cmd.Process.Signal(syscall.SIGCONT)
	c.waitServing(lead, 60*time.Second)
	progress("SIGSTOP/SIGCONT of the leader")

	lead = c.leader()
	follower := c.members[lead.id%3]
	c.restart(follower, syscall.SIGTERM, true)
	progress("a follower's wiped restart")

	cancel()
	wg.Wait()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if len(cl.failures) > 0 {
		t.Fatalf("%d calls failed (of %d acknowledged creates), first: %s", len(cl.failures), len(cl.acked), cl.failures[0])
	}
	c.checkIdentical(cl.acked)
	c.checkMembersList()
}

// checkMembersList runs `felix admin members list` against the group: three
// voters, one leader.
func (c *cpCluster) checkMembersList() {
	c.t.Helper()
	tok := filepath.Join(c.t.TempDir(), "admin.token")
	if err := os.WriteFile(tok, []byte(c.token+"\n"), 0o600); err != nil {
		c.t.Fatal(err)
	}
	m := c.members[1]
	out, err := exec.Command(felixBin, "admin", "members", "list", "-o", "json",
		"--controlplane", "http://"+m.restAddr, "--token-file", tok, "--data-dir", c.t.TempDir()).Output()
	if err != nil {
		c.t.Fatalf("felix admin members list: %v", err)
	}
	var v membersView
	if err := json.Unmarshal(out, &v); err != nil {
		c.t.Fatalf("members list %s: %v", out, err)
	}
	voters := 0
	for _, mb := range v.Members {
		if mb.Voter {
			voters++
		}
	}
	if len(v.Members) != 3 || voters != 3 || v.Leader == 0 || v.Applied == 0 {
		c.t.Fatalf("members list = %s", out)
	}
}

// checkIdentical compares every member's feed snapshots of every kind and
// checks that each acknowledged stream is in them.
func (c *cpCluster) checkIdentical(acked []string) {
	c.t.Helper()
	var first map[string][]byte
	for _, m := range c.members {
		snaps := map[string][]byte{}
		for _, kind := range []string{"tenants", "namespaces", "caches", "streams", "revocations"} {
			status, body, err := c.call(context.Background(), m, "GET", "/v1/catalog/"+kind+"/snapshot", nil)
			if err != nil || status != 200 {
				c.t.Fatalf("member %d %s snapshot: %v %d %s", m.id, kind, err, status, body)
			}
			snaps[kind] = body
		}
		var streams struct {
			Items []struct {
				Stream struct {
					Stream string `json:"stream"`
				} `json:"stream"`
			} `json:"items"`
		}
		if err := json.Unmarshal(snaps["streams"], &streams); err != nil {
			c.t.Fatal(err)
		}
		have := map[string]bool{}
		for _, it := range streams.Items {
			have[it.Stream.Stream] = true
		}
		for _, name := range acked {
			if !have[name] {
				c.t.Fatalf("member %d lacks acknowledged stream %s", m.id, name)
			}
		}
		if first == nil {
			first = snaps
			continue
		}
		for kind, b := range snaps {
			if !bytes.Equal(b, first[kind]) {
				c.t.Fatalf("member %d's %s differ from member 1's:\n%s\nvs\n%s", m.id, kind, b, first[kind])
			}
		}
	}
	c.t.Logf("%d acknowledged streams on all %d members, identical catalogs", len(acked), len(c.members))
}
