package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/felixmq/felix/wire"
)

func durableShard0(t *testing.T, dir string, cfg Config) (*Broker, *Shard) {
	t.Helper()
	b, st := newDurableStream(t, dir, cfg, wire.StreamSpec{})
	sh, err := st.Shard(0)
	if err != nil {
		t.Fatal(err)
	}
	return b, sh
}

func mustStateGet(t *testing.T, sh *Shard, key string) ([]byte, uint64, bool) {
	t.Helper()
	v, ver, ok, err := sh.StateGet(key)
	if err != nil {
		t.Fatal(err)
	}
	return v, ver, ok
}

// A commit is one record: readers get the event alone at its offset, and
// state_get answers the state with that offset as its version; a delete
// makes the key read as absent; the offsets around it are plain records.
func TestCommitIsOneRecordWhoseOffsetVersionsTheState(t *testing.T) {
	_, sh := durableShard0(t, t.TempDir(), Config{})
	ctx := context.Background()
	if _, err := sh.Publish(ctx, [][]byte{[]byte("before")}, ""); err != nil {
		t.Fatal(err)
	}
	off, err := sh.Commit(ctx, []byte("placed"), []StateOp{{Key: "order-42", Value: []byte("placed")}, {Key: "n", Value: []byte("1")}}, "", nil)
	if err != nil || off != 1 {
		t.Fatalf("commit: offset %d, %v", off, err)
	}
	recs, next, err := sh.Read(0, 10, 10, 1<<20)
	if err != nil || len(recs) != 2 || next != 2 {
		t.Fatalf("read: %d records, next %d, %v", len(recs), next, err)
	}
	if string(recs[1].Payload) != "placed" || recs[1].Offset != 1 {
		t.Fatalf("commit record: %+v", recs[1])
	}
	if v, ver, ok := mustStateGet(t, sh, "order-42"); !ok || ver != 1 || string(v) != "placed" {
		t.Fatalf("state_get: %q v%d %v", v, ver, ok)
	}
	if _, err := sh.Commit(ctx, []byte("shipped"), []StateOp{{Key: "order-42", Delete: true}}, "", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := mustStateGet(t, sh, "order-42"); ok {
		t.Fatal("a deleted key still reads")
	}
	if _, _, ok := mustStateGet(t, sh, "never"); ok {
		t.Fatal("a key never written reads")
	}
	if v, ver, ok := mustStateGet(t, sh, "n"); !ok || ver != 1 || string(v) != "1" {
		t.Fatalf("state_get n: %q v%d %v", v, ver, ok)
	}
}

// The state is rebuilt from the log at open: a broker opening the same
// directory answers the same values and versions, deletes included.
func TestCommitStateIsRebuiltWhenTheShardOpensAgain(t *testing.T) {
	dir := t.TempDir()
	b, sh := durableShard0(t, dir, Config{})
	ctx := context.Background()
	for i := range 20 {
		ops := []StateOp{{Key: "k" + strconv.Itoa(i%5), Value: fmt.Appendf(nil, "v%d", i)}}
		if i == 19 {
			ops = append(ops, StateOp{Key: "k0", Delete: true})
		}
		if _, err := sh.Commit(ctx, fmt.Appendf(nil, "e%d", i), ops, "", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := sh.Publish(ctx, [][]byte{[]byte("plain")}, ""); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{}
	for _, k := range []string{"k0", "k1", "k2", "k3", "k4"} {
		if v, ver, ok := mustStateGet(t, sh, k); ok {
			want[k] = fmt.Sprintf("%s@%d", v, ver)
		}
	}
	bytesBefore := sh.CommitStateBytes()
	b.Close()
	_, sh2 := durableShard0(t, dir, Config{})
	for _, k := range []string{"k0", "k1", "k2", "k3", "k4"} {
		got := ""
		if v, ver, ok := mustStateGet(t, sh2, k); ok {
			got = fmt.Sprintf("%s@%d", v, ver)
		}
		if got != want[k] {
			t.Fatalf("%s after reopen: %q, want %q", k, got, want[k])
		}
	}
	if _, ok := want["k0"]; ok {
		t.Fatal("k0 was deleted before the reopen")
	}
	if sh2.CommitStateBytes() != bytesBefore {
		t.Fatalf("state bytes after reopen %d, before %d", sh2.CommitStateBytes(), bytesBefore)
	}
}

// No reader sees part of a commit: under concurrent commits, a state read
// always names a version whose record is readable and holds the event
// that wrote that value, and a reader that has read an event never then
// reads the state older than it.
func TestNoReaderSeesPartOfACommit(t *testing.T) {
	_, sh := durableShard0(t, t.TempDir(), Config{})
	ctx := context.Background()
	const writers, perWriter = 4, 150
	var wg sync.WaitGroup
	var done atomic.Bool
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				v := fmt.Appendf(nil, "w%d-%d", w, i)
				if _, err := sh.Commit(ctx, v, []StateOp{{Key: "k", Value: v}}, "", nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for n := 0; !done.Load() && n < 100000; n++ {
				v, ver, ok, err := sh.StateGet("k")
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					recs, _, err := sh.Read(ver, ver+1, 1, 1<<20)
					if err != nil || len(recs) != 1 || !bytes.Equal(recs[0].Payload, v) {
						t.Errorf("state %q at version %d: the record there reads %v, %v", v, ver, recs, err)
						return
					}
				}
				tail := sh.NextOffset()
				if tail == 0 {
					continue
				}
				_, ver2, ok2, _ := sh.StateGet("k")
				if !ok2 || ver2 < tail-1 {
					t.Errorf("the event at %d is readable but the state is at %d (%v)", tail-1, ver2, ok2)
					return
				}
			}
		}()
	}
	wg.Wait()
	done.Store(true)
	readers.Wait()
	if sh.NextOffset() != writers*perWriter {
		t.Fatalf("next offset %d", sh.NextOffset())
	}
}

// commit_if racing at one expected offset: exactly one is written, the
// rest are refused offset_mismatch and change no state.
func TestCommitIfRacingExactlyOneWins(t *testing.T) {
	_, sh := durableShard0(t, t.TempDir(), Config{})
	const writers, rounds = 6, 15
	for round := range uint64(rounds) {
		var wg sync.WaitGroup
		var wins atomic.Int32
		var claims sync.Map
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				exp := round
				v := fmt.Appendf(nil, "r%d-w%d", round, w)
				c, err := sh.ClaimCommit(v, []StateOp{{Key: "owner", Value: v}}, "", &exp)
				if err != nil {
					var we *wire.Error
					if !errors.As(err, &we) || we.Code != wire.CodeOffsetMismatch {
						t.Errorf("round %d writer %d: %v", round, w, err)
					}
					return
				}
				wins.Add(1)
				claims.Store(string(v), c)
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d winners", round, wins.Load())
		}
		claims.Range(func(k, c any) bool {
			if err := c.(*Claimed).Finish(context.Background()); err != nil {
				t.Fatal(err)
			}
			if v, ver, ok := mustStateGet(t, sh, "owner"); !ok || ver != round || string(v) != k.(string) {
				t.Fatalf("round %d: state %q v%d, winner %s", round, v, ver, k)
			}
			return true
		})
	}
}

// The state's byte bound refuses a commit overloaded (commit_state_full),
// writing nothing and taking no offset; the metric reports the bytes.
func TestCommitStateBoundRefusesPastTheLimit(t *testing.T) {
	b, sh := durableShard0(t, t.TempDir(), Config{CommitStateMaxBytes: 1000})
	ctx := context.Background()
	val := bytes.Repeat([]byte("x"), 200)
	n := 0
	var err error
	for ; n < 100; n++ {
		if _, err = sh.Commit(ctx, []byte("e"), []StateOp{{Key: "k" + strconv.Itoa(n), Value: val}}, "", nil); err != nil {
			break
		}
	}
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeOverloaded || we.Detail["reason"] != ReasonCommitStateFull {
		t.Fatalf("after %d commits: %v, want overloaded commit_state_full", n, err)
	}
	if n == 0 || sh.NextOffset() != uint64(n) {
		t.Fatalf("%d commits written, next offset %d", n, sh.NextOffset())
	}
	if sh.CommitStateBytes() > 1000 || b.cfg.metrics.commitState.bytes.Load() != sh.CommitStateBytes() {
		t.Fatalf("state bytes %d, metric %d", sh.CommitStateBytes(), b.cfg.metrics.commitState.bytes.Load())
	}
	// Overwriting a held key frees the older version once it is visible.
	for range 10 {
		if _, err := sh.Commit(ctx, []byte("e"), []StateOp{{Key: "k0", Value: []byte("small")}}, "", nil); err != nil {
			t.Fatal(err)
		}
	}
}

// An in-memory stream has no log: a commit is refused not_durable.
func TestCommitOnAnInMemoryStreamIsRefused(t *testing.T) {
	b := NewBroker(Config{})
	t.Cleanup(b.Close)
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s"}); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stream(StreamKey{"t", "ns", "s"})
	sh, _ := st.Shard(0)
	_, err := sh.ClaimCommit([]byte("e"), []StateOp{{Key: "k", Value: []byte("v")}}, "", nil)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeInvalidRequest || we.Detail["reason"] != "not_durable" {
		t.Fatalf("commit: %v", err)
	}
	if _, _, _, err := sh.StateGet("k"); !errors.As(err, &we) || we.Detail["reason"] != "not_durable" {
		t.Fatalf("state_get: %v", err)
	}
}

// The state section's encoding round-trips, and truncated or trailing
// bytes are refused.
func TestStateOpsEncoding(t *testing.T) {
	ops := []StateOp{{Key: "a", Value: []byte("1")}, {Key: "b", Delete: true}, {Key: "c", Value: []byte{}}}
	b := encodeStateOps(ops)
	got, err := decodeStateOps(b)
	if err != nil || len(got) != 3 || got[0].Key != "a" || string(got[0].Value) != "1" || !got[1].Delete || got[2].Key != "c" || got[2].Delete {
		t.Fatalf("decode: %+v %v", got, err)
	}
	for i := range len(b) {
		if _, err := decodeStateOps(b[:i]); err == nil {
			t.Fatalf("a section cut at %d decoded", i)
		}
	}
	if _, err := decodeStateOps(append(b, 0)); err == nil {
		t.Fatal("trailing bytes decoded")
	}
}
