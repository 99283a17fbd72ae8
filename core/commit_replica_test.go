package core

import (
	"context"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// A follower's copy holds whole commits (the state section travels with
// the record), and a follower promoted over its copy answers the state
// the old leader's commits wrote, with their offsets as versions.
func TestAPromotedFollowerAnswersTheCommittedState(t *testing.T) {
	ctx := context.Background()
	_, leader := durableShard0(t, t.TempDir(), Config{})
	for i, v := range []string{"a", "b", "c"} {
		ops := []StateOp{{Key: "k", Value: []byte(v)}}
		if i == 2 {
			ops = append(ops, StateOp{Key: "gone", Delete: true})
		} else {
			ops = append(ops, StateOp{Key: "gone", Value: []byte("x")})
		}
		if _, err := leader.Commit(ctx, []byte("e-"+v), ops, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	recs, _, err := leader.Read(0, 10, 10, 1<<20)
	if err != nil || len(recs) != 3 || recs[2].State == nil {
		t.Fatalf("leader's records: %d %v", len(recs), err)
	}
	b, k := newPlacedBroker(t, t.TempDir(), wire.StreamSpec{Durable: true})
	r, err := b.OpenStreamReplica(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if next, _, err := r.Append(ctx, 0, recs); err != nil || next != 3 {
		t.Fatalf("copy: %d %v", next, err)
	}
	if err := b.OpenStreamShardAsNewLeader(k, 0, 2); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stream(k)
	sh, _ := st.Shard(0)
	if v, ver, ok := mustStateGet(t, sh, "k"); !ok || ver != 2 || string(v) != "c" {
		t.Fatalf("promoted follower: k = %q v%d %v", v, ver, ok)
	}
	if _, _, ok := mustStateGet(t, sh, "gone"); ok {
		t.Fatal("promoted follower: a deleted key reads")
	}
	// Its own commits follow the generation start (offset 3).
	if off, err := sh.Commit(ctx, []byte("e-d"), []StateOp{{Key: "k", Value: []byte("d")}}, "", nil); err != nil || off != 4 {
		t.Fatalf("commit after the promotion: %d %v", off, err)
	}
}

// On a replicated shard a commit's state is visible only once the
// committed mark passes its record, as the record itself is.
func TestCommitStateWaitsForTheMajority(t *testing.T) {
	gate := newHeldGate()
	b := NewBroker(Config{PlacedShards: true, Storage: &StorageConfig{Dir: t.TempDir()},
		ReplicationFor: func(StreamKey, uint32) Replication { return gate }})
	t.Cleanup(b.Close)
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s", Durable: true}); err != nil {
		t.Fatal(err)
	}
	k := StreamKey{"t", "ns", "s"}
	if err := b.OpenStreamShard(k, 0, 1); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stream(k)
	sh, _ := st.Shard(0)
	c, err := sh.ClaimCommit([]byte("e"), []StateOp{{Key: "k", Value: []byte("v")}}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Finish(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("finished before a majority held it: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if _, _, ok := mustStateGet(t, sh, "k"); ok {
		t.Fatal("the state is visible before a majority holds its commit")
	}
	gate.commit(1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, ver, ok := mustStateGet(t, sh, "k"); !ok || ver != 0 || string(v) != "v" {
		t.Fatalf("after the majority: %q v%d %v", v, ver, ok)
	}
}
