package core

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// newPlacedBroker makes a broker that opens only placed shards, with
// storage under dir when dir is set, and applies one stream.
func newPlacedBroker(t *testing.T, dir string, spec wire.StreamSpec) (*Broker, StreamKey) {
	t.Helper()
	cfg := Config{PlacedShards: true}
	if dir != "" {
		cfg.Storage = &StorageConfig{Dir: dir}
	}
	b := NewBroker(cfg)
	t.Cleanup(b.Close)
	spec.TenantID, spec.Namespace, spec.Stream = "t", "ns", "s"
	if err := b.ApplyStream(spec); err != nil {
		t.Fatal(err)
	}
	return b, StreamKey{"t", "ns", "s"}
}

func wantNotReady(t *testing.T, st *Stream, i uint32) {
	t.Helper()
	_, err := st.Shard(i)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeShardUnavailable || we.Detail[wire.DetailReason] != ReasonNotReady {
		t.Fatalf("shard %d not open: %v, want shard_unavailable not_ready", i, err)
	}
}

func movedTo(shard uint32, resume *uint64) *ShardMovedError {
	return &ShardMovedError{Moved: wire.ShardMoved{Shard: shard, NodeID: "n2", Addr: "127.0.0.1:1", Generation: 7, ResumeFrom: resume}}
}

func TestPlacedStreamOpensNoShardUntilAsked(t *testing.T) {
	dir := t.TempDir()
	b, k := newPlacedBroker(t, dir, wire.StreamSpec{Shards: 3, Durable: true})
	st, _ := b.Stream(k)
	for i := range uint32(3) {
		wantNotReady(t, st, i)
	}
	if _, err := os.Stat(streamDir(dir, k)); !os.IsNotExist(err) {
		t.Fatalf("a stream with no shard open claimed its directory: %v", err)
	}
	b.ApplyRetention() // nothing open: nothing to do, no crash
	if _, err := b.HeldStreams(); err != nil {
		t.Fatal(err)
	}
	info := st.Info()
	if len(info) != 3 || info[1].Unavailable != ReasonNotReady {
		t.Fatalf("info of unopened shards: %+v", info)
	}
	if err := b.OpenStreamShard(k, 1, 4); err != nil {
		t.Fatal(err)
	}
	sh, err := st.Shard(1)
	if err != nil || sh.Generation() != 4 || !sh.Durable() {
		t.Fatalf("opened shard 1: %v (generation %d)", err, sh.Generation())
	}
	if _, err := os.Stat(ShardDir(dir, k, 0)); !os.IsNotExist(err) {
		t.Fatal("opening shard 1 opened shard 0's log")
	}
	wantNotReady(t, st, 0)
	b.ApplyRetention() // one shard open, two not
	if err := b.OpenStreamShard(k, 3, 1); err == nil {
		t.Fatal("opened shard 3 of 3")
	}
	if err := b.OpenStreamShard(StreamKey{"t", "ns", "other"}, 0, 1); err == nil {
		t.Fatal("opened a shard of an unknown stream")
	}
}

// TestPlacedShardCloseAndReopen moves a shard away and back, durable and
// in memory: subscribers end with the moved cause, publishes to the closed
// shard are refused with not_leader, the durable log's files stay and the
// reopened shard continues its offsets; the in-memory one starts empty.
func TestPlacedShardCloseAndReopen(t *testing.T) {
	for _, durable := range []bool{true, false} {
		t.Run(map[bool]string{true: "durable", false: "memory"}[durable], func(t *testing.T) {
			dir := ""
			if durable {
				dir = t.TempDir()
			}
			b, k := newPlacedBroker(t, dir, wire.StreamSpec{Shards: 2, Durable: durable})
			st, _ := b.Stream(k)
			if err := b.OpenStreamShard(k, 0, 1); err != nil {
				t.Fatal(err)
			}
			sh := shard0(t, st)
			publish(t, sh, payloads(5, "a"))
			s := subscribe(t, sh, SubscribeOptions{})
			next := sh.NextOffset()
			moved := movedTo(0, &next)
			if !b.CloseStreamShard(k, 0, moved) {
				t.Fatal("close reported the shard not open")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := s.Next(ctx)
			var got *ShardMovedError
			if !errors.As(err, &got) || got.Moved.NodeID != "n2" || *got.Moved.ResumeFrom != 5 {
				t.Fatalf("subscriber ended with %v, want the moved cause", err)
			}
			_, err = sh.Publish(context.Background(), payloads(1, "late"), "p")
			if we := (*wire.Error)(nil); !errors.As(err, &we) || we.Code != wire.CodeNotLeader {
				t.Fatalf("publish to a closed shard: %v, want not_leader", err)
			}
			if _, err := sh.Subscribe(SubscribeOptions{}); err == nil {
				t.Fatal("subscribed to a closed shard")
			}
			wantNotReady(t, st, 0)
			if b.CloseStreamShard(k, 0, moved) {
				t.Fatal("second close reported the shard open")
			}
			if durable {
				if _, err := os.Stat(ShardDir(dir, k, 0)); err != nil {
					t.Fatalf("closing the shard removed its files: %v", err)
				}
			}
			if err := b.OpenStreamShard(k, 0, 9); err != nil {
				t.Fatal(err)
			}
			sh = shard0(t, st)
			want := uint64(0)
			if durable {
				want = 5
			}
			if sh.NextOffset() != want {
				t.Fatalf("reopened shard at %d, want %d", sh.NextOffset(), want)
			}
			if off := publish(t, sh, payloads(1, "b")); off != want {
				t.Fatalf("first publish after reopening at %d, want %d", off, want)
			}
			mustCheck(t, st)
		})
	}
}

// TestPlacedReplacementOpensNone: a replaced stream (shard count changed)
// opens none of its shards; an update keeps the open ones open; a removed
// stream refuses to open a shard.
func TestPlacedReplacementOpensNone(t *testing.T) {
	b, k := newPlacedBroker(t, "", wire.StreamSpec{Shards: 2})
	if err := b.OpenStreamShard(k, 0, 1); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stream(k)
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s", Shards: 2, SubQueuePolicy: "drop_old"}); err != nil {
		t.Fatal(err)
	}
	if cur, _ := b.Stream(k); cur != st {
		t.Fatal("an update replaced the stream")
	}
	shard0(t, st)
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s", Shards: 3}); err != nil {
		t.Fatal(err)
	}
	cur, _ := b.Stream(k)
	for i := range uint32(3) {
		wantNotReady(t, cur, i)
	}
	if err := st.open(1, 1); err == nil {
		t.Fatal("opened a shard of the replaced stream")
	}
	b.RemoveStream(k)
	if err := b.OpenStreamShard(k, 0, 1); err == nil {
		t.Fatal("opened a shard of a removed stream")
	}
}

// TestUnplacedStreamOpensEveryShard: without PlacedShards nothing changes.
func TestUnplacedStreamOpensEveryShard(t *testing.T) {
	_, st := newTestStream(t, Config{}, 4, "")
	for i := range uint32(4) {
		if _, err := st.Shard(i); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPlacedDeleteStream: deleting a stream with some shards open and
// some not closes the open ones and deletes the files.
func TestPlacedDeleteStream(t *testing.T) {
	dir := t.TempDir()
	b, k := newPlacedBroker(t, dir, wire.StreamSpec{Shards: 3, Durable: true})
	if err := b.OpenStreamShard(k, 2, 1); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stream(k)
	sh, _ := st.Shard(2)
	publish(t, sh, payloads(2, "a"))
	b.DeleteStream(k, "")
	if _, err := os.Stat(streamDir(dir, k)); !os.IsNotExist(err) {
		t.Fatalf("deleted stream's files: %v", err)
	}
	if err := b.OpenStreamShard(k, 0, 1); err == nil {
		t.Fatal("opened a shard of a deleted stream")
	}
}
