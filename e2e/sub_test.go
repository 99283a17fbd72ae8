package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCreateThenUseAtOnce creates a stream and a cache and uses them at
// once on a node whose periodic catalog sync is ten minutes away: the
// broker asks the catalog when it misses a name. A name that does not
// exist is refused as not found.
func TestCreateThenUseAtOnce(t *testing.T) {
	n := startServe(t, "FELIX_CATALOG_SYNC_INTERVAL_MS=600000")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "events", "--durable")
	n.mustFelix(ctx, "pub", "events", "--ack", "one")
	if got := strings.TrimSpace(n.mustFelix(ctx, "sub", "events", "--from", "earliest", "--count", "1")); got != "one" {
		t.Fatalf("sub printed %q, want one", got)
	}
	n.mustFelix(ctx, "admin", "cache", "create", "sessions")
	n.mustFelix(ctx, "cache", "put", "sessions", "user-1", "hello")
	if got := strings.TrimSpace(n.mustFelix(ctx, "cache", "get", "sessions", "user-1")); got != "hello" {
		t.Fatalf("cache get printed %q, want hello", got)
	}
	_, errOut, code := n.felix(ctx, "sub", "nope")
	if code != 1 || !strings.Contains(errOut, "stream not found") || !strings.Contains(errOut, "not_found") {
		t.Fatalf("sub of a missing stream: exit %d, stderr %q", code, errOut)
	}
}

// liveFelix is a client command running in the background.
type liveFelix struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
	err            error
}

// startLive starts a client command in n's directory; it is killed at
// the end of the test if it still runs.
func startLive(t *testing.T, n *node, args ...string) *liveFelix {
	t.Helper()
	l := &liveFelix{cmd: exec.Command(felixBin, args...), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	l.cmd.Dir = n.dir
	l.cmd.Stdout, l.cmd.Stderr = l.stdout, l.stderr
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		l.err = l.cmd.Wait()
		close(l.done)
	}()
	t.Cleanup(func() {
		l.cmd.Process.Signal(syscall.SIGKILL)
		<-l.done
	})
	return l
}

// waitFor polls the command's stderr for s, failing if it exits first.
func (l *liveFelix) waitFor(t *testing.T, s string) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("felix to print %q", s), func() bool {
		select {
		case <-l.done:
			t.Fatalf("felix exited (%v) before printing %q\nstdout: %s\nstderr: %s", l.err, s, l.stdout, l.stderr)
		default:
		}
		return strings.Contains(l.stderr.String(), s)
	})
}

// lines returns the complete lines printed so far.
func (l *liveFelix) lines() []string {
	out := l.stdout.String()
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		return strings.Split(out[:i], "\n")
	}
	return nil
}

// wait waits for the command to exit within d.
func (l *liveFelix) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(d):
		t.Fatalf("felix still runs after %v\nstdout: %s\nstderr: %s", d, l.stdout, l.stderr)
	}
	if l.err != nil {
		t.Fatalf("felix: %v\nstdout: %s\nstderr: %s", l.err, l.stdout, l.stderr)
	}
}

// TestSubMergesShardsAndResumesAfterRestart runs felix sub on a durable
// stream of four shards: it says when it is subscribed to all of them,
// prints the messages of every shard with their shard and offset, and
// carries on after its server restarts with nothing lost or repeated.
func TestSubMergesShardsAndResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	addr := freeUDPAddr(t)
	n := startServeOn(t, dir, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "orders", "--shards", "4", "--durable")
	sub := startLive(t, n, "sub", "orders", "--count", "16", "-o", "json")
	sub.waitFor(t, "subscribed to orders (shards 0-3)")
	publish := func(n *node, from, to int) {
		for i := from; i < to; i++ {
			n.mustFelix(ctx, "pub", "orders", "--ack", "--key", fmt.Sprintf("key-%d", i), fmt.Sprintf("m%d", i))
		}
	}
	publish(n, 0, 8)
	eventually(t, 20*time.Second, "the first 8 messages to be printed", func() bool { return len(sub.lines()) >= 8 })

	if err := n.stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	m := startServeOn(t, dir, addr)
	publish(m, 8, 16)
	sub.wait(t, 60*time.Second)
	t.Logf("felix sub said:\n%s", sub.stderr)
	if !strings.Contains(sub.stderr.String(), "resumed at ") {
		t.Errorf("sub did not say it resumed; stderr: %s", sub.stderr)
	}

	type line struct {
		Shard   *uint32 `json:"shard"`
		Offset  *uint64 `json:"offset"`
		Payload string  `json:"payload"`
	}
	var payloads []string
	shards := map[uint32]bool{}
	for _, l := range sub.lines() {
		var v line
		if err := json.Unmarshal([]byte(l), &v); err != nil || v.Shard == nil || v.Offset == nil {
			t.Fatalf("line %q: want shard, offset and payload (%v)", l, err)
		}
		shards[*v.Shard] = true
		payloads = append(payloads, v.Payload)
	}
	slices.Sort(payloads)
	want := make([]string, 16)
	for i := range want {
		want[i] = fmt.Sprintf("m%d", i)
	}
	slices.Sort(want)
	if !slices.Equal(payloads, want) {
		t.Fatalf("sub printed %q, want m0..m15 once each", payloads)
	}
	if len(shards) < 2 {
		t.Fatalf("16 keys all came from shards %v; want messages of several shards", shards)
	}
}
