package e2e

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// Atomic commits through the binary: felix serve with storage advertises
// FEATURE_ATOMIC_COMMIT; a subscriber sees each commit's event (alone) at
// its offset; state_get answers with the commit's offset as the version;
// commit_if at a stale offset is refused with the tail; an op on another
// stream is refused before sending; after a SIGKILL and a restart the
// state is still there (rebuilt from the log) and the next commit follows.
func TestCommitStateSurvivesSIGKILLAndSubscribersSeeTheEvent(t *testing.T) {
	dir := t.TempDir()
	env := []string{"FELIX_DURABLE_FSYNC=always"}
	n := startServeIn(t, dir, env...)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "orders", "--durable")
	c := n.connect(ctx, n.adminToken())
	if c.ServerFeatures()&wire.FeatureAtomicCommit == 0 {
		t.Fatalf("felix serve does not advertise FEATURE_ATOMIC_COMMIT: %#x", c.ServerFeatures())
	}
	eventually(t, 15*time.Second, "the durable stream to reach the broker", func() bool {
		_, err := c.Read(ctx, "default", "orders", 0, 0, nil, 1)
		return err == nil
	})
	sub, err := c.SubscribeFrom(ctx, "default", "orders", felix.SubscribeOptions{Start: felix.Earliest()})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	const commits = 20
	offsets := make([]uint64, commits)
	for i := range commits {
		key := fmt.Sprintf("order-%d", i%4)
		off, err := c.Commit(ctx, "default", []byte(key), []felix.CommitOp{
			felix.CommitEnqueue("orders", fmt.Appendf(nil, "event-%d", i)),
			felix.CommitPut("orders", key, fmt.Appendf(nil, "state-%d", i)),
			felix.CommitPut("orders", "count", fmt.Appendf(nil, "%d", i+1)),
		})
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		if i > 0 && off != offsets[i-1]+1 {
			t.Fatalf("commit %d at %d, after %d", i, off, offsets[i-1])
		}
		offsets[i] = off
		v, ver, found, err := c.StateGet(ctx, "default", "orders", []byte(key), key)
		if err != nil || !found || ver != off || string(v) != fmt.Sprintf("state-%d", i) {
			t.Fatalf("state_get after commit %d: %q v%d %v %v (commit at %d)", i, v, ver, found, err, off)
		}
	}
	for i := range commits {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("subscriber, event %d: %v", i, err)
		}
		if string(ev.Payload) != fmt.Sprintf("event-%d", i) || !ev.HasOffset || ev.Offset != offsets[i] {
			t.Fatalf("subscriber got %q at %d, want event-%d at %d", ev.Payload, ev.Offset, i, offsets[i])
		}
	}
	tail := offsets[commits-1] + 1
	_, err = c.CommitIf(ctx, "default", nil, []felix.CommitOp{felix.CommitPublish("orders", []byte("stale"))}, tail-1)
	var om *felix.OffsetMismatchError
	if !errors.As(err, &om) || om.Tail != tail {
		t.Fatalf("stale commit_if: %v", err)
	}
	_, err = c.Commit(ctx, "default", nil, []felix.CommitOp{felix.CommitPublish("orders", []byte("x")), felix.CommitPut("inventory", "sku-1", []byte("3"))})
	var ce *felix.CommitError
	if !errors.As(err, &ce) || ce.Kind != felix.CommitNotOnOwningShard || ce.Index != 1 {
		t.Fatalf("an op on another stream: %v", err)
	}
	c.Close()
	n.stop(syscall.SIGKILL, 10*time.Second)

	n = startServeIn(t, dir, env...)
	c = n.connect(ctx, n.adminToken())
	eventually(t, 15*time.Second, "the durable stream to be served again", func() bool {
		_, _, _, err := c.StateGet(ctx, "default", "orders", nil, "count")
		return err == nil
	})
	for k := range 4 {
		key := fmt.Sprintf("order-%d", k)
		last := commits - 4 + k
		v, ver, found, err := c.StateGet(ctx, "default", "orders", []byte(key), key)
		if err != nil || !found || ver != offsets[last] || string(v) != fmt.Sprintf("state-%d", last) {
			t.Fatalf("%s after the restart: %q v%d %v %v, want state-%d v%d", key, v, ver, found, err, last, offsets[last])
		}
	}
	if v, ver, found, err := c.StateGet(ctx, "default", "orders", nil, "count"); err != nil || !found || string(v) != fmt.Sprint(commits) || ver != offsets[commits-1] {
		t.Fatalf("count after the restart: %q v%d %v %v", v, ver, found, err)
	}
	off, err := c.CommitIf(ctx, "default", nil, []felix.CommitOp{felix.CommitPublish("orders", []byte("next")), felix.CommitDelete("orders", "count")}, tail)
	if err != nil || off != tail {
		t.Fatalf("commit_if after the restart: %d %v", off, err)
	}
	if _, _, found, err := c.StateGet(ctx, "default", "orders", nil, "count"); err != nil || found {
		t.Fatalf("deleted count: %v %v", found, err)
	}
}
