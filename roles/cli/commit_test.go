package cli

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/felixmq/felix/sdk/felix"
)

// fakeCommit is one commit the fake took.
type fakeCommit struct {
	entityKey string
	shard     *uint32
	ops       []felix.CommitOp
	offset    uint64
}

// fakeStateValue is a state key's value and version.
type fakeStateValue struct {
	value   string
	version uint64
}

func (f *fakeBroker) commit(entityKey []byte, shard *uint32, ops []felix.CommitOp, expected *uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tail := uint64(len(f.commits))
	if expected != nil && *expected != tail {
		return 0, &felix.OffsetMismatchError{Expected: *expected, Tail: tail}
	}
	f.commits = append(f.commits, fakeCommit{entityKey: string(entityKey), shard: shard, ops: ops, offset: tail})
	return tail, nil
}

func (f *fakeBroker) Commit(_ context.Context, _ string, ek []byte, ops []felix.CommitOp) (uint64, error) {
	return f.commit(ek, nil, ops, nil)
}

func (f *fakeBroker) CommitIf(_ context.Context, _ string, ek []byte, ops []felix.CommitOp, expected uint64) (uint64, error) {
	return f.commit(ek, nil, ops, &expected)
}

func (f *fakeBroker) CommitOnShard(_ context.Context, _ string, shard uint32, ops []felix.CommitOp) (uint64, error) {
	return f.commit(nil, &shard, ops, nil)
}

func (f *fakeBroker) CommitIfOnShard(_ context.Context, _ string, shard uint32, ops []felix.CommitOp, expected uint64) (uint64, error) {
	return f.commit(nil, &shard, ops, &expected)
}

func (f *fakeBroker) StateGet(_ context.Context, _, stream string, ek []byte, key string) ([]byte, uint64, bool, error) {
	return f.stateGet(stream, string(ek), key)
}

func (f *fakeBroker) StateGetOnShard(_ context.Context, _, stream string, shard uint32, key string) ([]byte, uint64, bool, error) {
	return f.stateGet(stream, "shard", key)
}

func (f *fakeBroker) stateGet(stream, ek, key string) ([]byte, uint64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.state[stream+"/"+ek+"/"+key]
	return []byte(v.value), v.version, ok, nil
}

func TestCommitSendsOneEventAndTheStateOps(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	fb := &fakeBroker{}
	tk := fb.toolkit()
	r := run(t, tk, nil, "commit", "orders", "order-1", "--event", "placed", "--put", "status=placed", "--put", "note=a=b,c", "--delete", "total", "--data-dir", dir)
	if r.err != nil || r.stdout != "offset 0\n" {
		t.Fatalf("commit: %q, %v", r.stdout, r.err)
	}
	want := []felix.CommitOp{felix.CommitPublish("orders", []byte("placed")), felix.CommitPut("orders", "status", []byte("placed")),
		felix.CommitPut("orders", "note", []byte("a=b,c")), felix.CommitDelete("orders", "total")}
	if len(fb.commits) != 1 || fb.commits[0].entityKey != "order-1" || fb.commits[0].shard != nil || !reflect.DeepEqual(fb.commits[0].ops, want) {
		t.Fatalf("commit sent %+v", fb.commits)
	}
	r = run(t, tk, nil, "commit", "orders", "--shard", "2", "--event", "x", "--enqueue", "-o", "json", "--data-dir", dir)
	if r.err != nil || r.stdout != `{"offset":1,"stream":"orders","written":true}`+"\n" {
		t.Fatalf("commit --shard -o json: %q, %v", r.stdout, r.err)
	}
	if c := fb.commits[1]; c.shard == nil || *c.shard != 2 || !reflect.DeepEqual(c.ops, []felix.CommitOp{felix.CommitEnqueue("orders", []byte("x"))}) {
		t.Fatalf("commit --shard 2 --enqueue sent %+v", c)
	}
}

func TestCommitIfOffsetRefusalExits3(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	fb := &fakeBroker{}
	tk := fb.toolkit()
	if r := run(t, tk, nil, "commit", "orders", "k", "--event", "a", "--if-offset", "0", "--data-dir", dir); r.err != nil || r.stdout != "offset 0\n" {
		t.Fatalf("commit --if-offset 0: %q, %v", r.stdout, r.err)
	}
	r := run(t, tk, nil, "commit", "orders", "k", "--event", "late", "--if-offset", "0", "--data-dir", dir)
	if r.exitCode() != exitConditionRefused || r.stdout != "" || !strings.Contains(r.message(), "at offset 1") {
		t.Fatalf("stale commit --if-offset: exit %d %q stdout %q", r.exitCode(), r.message(), r.stdout)
	}
	r = run(t, tk, nil, "commit", "orders", "k", "--event", "late", "--if-offset", "5", "-o", "json", "--data-dir", dir)
	if r.exitCode() != exitConditionRefused || r.stdout != `{"expected":5,"stream":"orders","tail":1,"written":false}`+"\n" {
		t.Fatalf("commit --if-offset -o json refused: exit %d %q", r.exitCode(), r.stdout)
	}
	if len(fb.commits) != 1 {
		t.Fatalf("refused commits were taken: %+v", fb.commits)
	}
}

func TestCommitUsageErrors(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	fb := &fakeBroker{}
	for _, args := range [][]string{
		{"commit", "orders", "k"},                                     // no event
		{"commit", "orders", "k", "--event", "e", "--put", "novalue"}, // not KEY=VALUE
		{"commit", "orders", "k", "--event", "e", "--shard", "1"},     // both ENTITY_KEY and --shard
		{"commit", "orders", "--event", "e"},                          // neither
		{"state", "get", "orders", "k"},                               // no KEY
		{"state", "get", "orders", "e", "k", "--shard", "1"},          // both
		{"pub", "orders", "a", "--idempotent", "--if-offset", "0"},    // two kinds of publish
		{"pub", "orders", "a", "--idempotent", "--ack"},               // --ack is implied
	} {
		if r := run(t, fb.toolkit(), nil, append(args, "--data-dir", dir)...); r.exitCode() != 2 {
			t.Errorf("%v: exit %d (%q), want a usage error", args, r.exitCode(), r.message())
		}
	}
	if len(fb.commits) != 0 {
		t.Fatalf("a usage error sent a commit: %+v", fb.commits)
	}
}

func TestStateGet(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	fb := &fakeBroker{state: map[string]fakeStateValue{"orders/order-1/status": {"placed", 7}, "orders/shard/status": {"s", 3}}}
	tk := fb.toolkit()
	if r := run(t, tk, nil, "state", "get", "orders", "order-1", "status", "--data-dir", dir); r.err != nil || r.stdout != "7\nplaced\n" {
		t.Fatalf("state get: %q, %v", r.stdout, r.err)
	}
	if r := run(t, tk, nil, "state", "get", "orders", "status", "--shard", "1", "-o", "json", "--data-dir", dir); r.err != nil ||
		r.stdout != `{"found":true,"key":"status","stream":"orders","value":"s","version":3}`+"\n" {
		t.Fatalf("state get --shard -o json: %q, %v", r.stdout, r.err)
	}
	r := run(t, tk, nil, "state", "get", "orders", "order-2", "status", "-o", "json", "--data-dir", dir)
	if r.exitCode() != exitGeneric || !strings.Contains(r.message(), "not found") || r.stdout != `{"found":false,"key":"status","stream":"orders"}`+"\n" {
		t.Fatalf("state get of a missing key: exit %d %q stdout %q", r.exitCode(), r.message(), r.stdout)
	}
}
