package core

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/felixmq/felix/internal/atomicfile"
	"github.com/felixmq/felix/wire"
)

// Every persisted change moves the group state's version, and a snapshot
// carries the state and its version; a state file whose version lines
// are read back keeps the version across a reopen.
func TestGroupStateVersionMovesWithEachChangeAndSurvivesAReopen(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{now: time.Unix(1000, 0)}
	b, sh := groupShard(t, dir, clk, 4)
	g := groupsOf(t, sh)
	v0 := g.Version()
	poll(t, g, 4) // makes the group: one change
	v1 := g.Version()
	if !v0.Less(v1) {
		t.Fatalf("making the group left the version at %v", v1)
	}
	if err := g.Ack("g", 1); err != nil { // above the cursor: nothing persisted
		t.Fatal(err)
	}
	if g.Version() != v1 {
		t.Fatalf("an ack that moved no cursor moved the version to %v", g.Version())
	}
	if err := g.Ack("g", 0); err != nil {
		t.Fatal(err)
	}
	if err := g.DeadLetter("g", 3); err != nil {
		t.Fatal(err)
	}
	snap, ver, err := g.Snapshot()
	if err != nil || !v1.Less(ver) || ver != g.Version() {
		t.Fatalf("snapshot at %v (%v), state at %v", ver, err, g.Version())
	}
	state, good, got, err := replayGroupFile(bytes.NewReader(snap))
	if err != nil || good != int64(len(snap)) || got != ver {
		t.Fatalf("snapshot replays %d of %d bytes at %v (%v)", good, len(snap), got, err)
	}
	if p := state["g"]; p == nil || p.cursor != 2 || len(p.dead) != 1 {
		t.Fatalf("snapshot holds %+v", state["g"])
	}
	b.Close()
	_, st := newDurableStream(t, dir, Config{Groups: GroupConfig{Now: clk.Now}}, wire.StreamSpec{Shards: 1})
	sh2, _ := st.Shard(0)
	if v := groupsOf(t, sh2).Version(); v != ver {
		t.Fatalf("version after a reopen %v, want %v", v, ver)
	}
}

// A state taken over with a cursor past the copy's log (records a
// Leader-consistency shard lost) is cut back to the log's end, dropping
// the dead letters past it, so no record written there is skipped.
func TestGroupStatePastTheLogIsCutBackToItsEnd(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{now: time.Unix(1000, 0)}
	b, sh := groupShard(t, dir, clk, 8)
	shardDir := ShardDir(dir, sh.stream.key, 0)
	b.Close()
	state := map[string]*persisted{"g": {cursor: 20, dead: map[uint64]struct{}{3: {}, 15: {}}, redriven: map[uint64]struct{}{}}}
	if err := atomicfile.Write(filepath.Join(shardDir, GroupStateFile), encodeGroupSnapshot(state, GroupVersion{Generation: 7, Seq: 3}), 0o644); err != nil {
		t.Fatal(err)
	}
	_, st := newDurableStream(t, dir, Config{Groups: GroupConfig{Now: clk.Now}}, wire.StreamSpec{Shards: 1})
	sh2, _ := st.Shard(0)
	g := groupsOf(t, sh2)
	if c := committed(t, g); c != 8 {
		t.Fatalf("cursor %d, want the log's end 8", c)
	}
	if dl, _ := g.DeadLetters("g"); !slices.Equal(dl, []uint64{3}) {
		t.Fatalf("dead letters %v, want [3]", dl)
	}
	groupPublish(t, sh2, 8, 1)
	if got := offsetsOf(poll(t, g, 5)); !slices.Equal(got, []uint64{8}) {
		t.Fatalf("after the cut: %v", got)
	}
}
