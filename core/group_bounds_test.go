package core

import (
	"slices"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// A group's dead letters are bounded: one past FELIX_GROUP_MAX_DEAD_LETTERS
// discards the lowest-offset one (counted in
// felix_group_dead_letters_dropped_total), the queue keeps moving, and the
// state file agrees after a restart.
func TestGroupDeadLettersAreBoundedOldestDiscarded(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{now: time.Unix(1000, 0)}
	cfg := Config{Groups: GroupConfig{Now: clk.Now, MaxDeadLetters: 2}}
	b, st := newDurableStream(t, dir, cfg, wire.StreamSpec{Shards: 1})
	sh, err := st.Shard(0)
	if err != nil {
		t.Fatal(err)
	}
	groupPublish(t, sh, 0, 6)
	g := groupsOf(t, sh)
	if got := offsetsOf(poll(t, g, 6)); len(got) != 6 {
		t.Fatalf("polled %v", got)
	}
	for _, o := range []uint64{0, 1, 2} {
		if err := g.DeadLetter("g", o); err != nil {
			t.Fatal(err)
		}
	}
	if dl, _ := g.DeadLetters("g"); !slices.Equal(dl, []uint64{1, 2}) {
		t.Fatalf("dead letters %v, want [1 2]", dl)
	}
	if v := metricValue(t, b, "felix_group_dead_letters_dropped_total"); v != 1 {
		t.Fatalf("felix_group_dead_letters_dropped_total = %v, want 1", v)
	}
	if v := metricValue(t, b, "felix_group_dead_letters_total"); v != 3 {
		t.Fatalf("felix_group_dead_letters_total = %v, want 3", v)
	}
	// Past the limit above the cursor too: 4 is listed, 1 goes, and the
	// cursor still moves over both once 3 is acknowledged.
	if err := g.DeadLetter("g", 4); err != nil {
		t.Fatal(err)
	}
	if err := g.Ack("g", 3); err != nil {
		t.Fatal(err)
	}
	if c := committed(t, g); c != 5 {
		t.Fatalf("cursor %d, want 5", c)
	}
	if dl, _ := g.DeadLetters("g"); !slices.Equal(dl, []uint64{2, 4}) {
		t.Fatalf("dead letters %v, want [2 4]", dl)
	}
	if v := metricValue(t, b, "felix_group_dead_letters_dropped_total"); v != 2 {
		t.Fatalf("felix_group_dead_letters_dropped_total = %v, want 2", v)
	}
	b.Close()

	_, st2 := newDurableStream(t, dir, cfg, wire.StreamSpec{Shards: 1})
	sh2, _ := st2.Shard(0)
	g2 := groupsOf(t, sh2)
	if dl, _ := g2.DeadLetters("g"); !slices.Equal(dl, []uint64{2, 4}) {
		t.Fatalf("dead letters after restart %v, want [2 4]", dl)
	}
	if c := committed(t, g2); c != 5 {
		t.Fatalf("cursor after restart %d, want 5", c)
	}
}

// A group with nothing in flight and no request for
// FELIX_GROUP_IDLE_EVICT_MS is dropped from memory; the next request
// reloads its cursor and dead letters, and the new state takes an ack
// for anything below the log tail it first saw, not past it.
func TestGroupIdleStateIsDroppedAndReloaded(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	b, sh := groupShard(t, t.TempDir(), clk, 8)
	g := groupsOf(t, sh)
	poll(t, g, 8)
	for _, o := range []uint64{0, 1, 3, 4, 5, 6} {
		if err := g.Ack("g", o); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []uint64{2, 7} {
		if err := g.DeadLetter("g", o); err != nil {
			t.Fatal(err)
		}
	}
	// A second group keeps a claim: it is never dropped, however idle.
	if recs, err := g.Poll("busy", 1, 0); err != nil || len(recs) != 1 {
		t.Fatalf("busy poll %v %v", recs, err)
	}
	if v := metricValue(t, b, "felix_groups_in_memory"); v != 2 {
		t.Fatalf("felix_groups_in_memory = %v, want 2", v)
	}
	clk.advance(DefaultGroupIdleEvict - time.Second)
	if v := metricValue(t, b, "felix_groups_in_memory"); v != 2 {
		t.Fatalf("felix_groups_in_memory = %v before the idle time, want 2", v)
	}
	// Looked for at most every quarter of the idle time.
	clk.advance(DefaultGroupIdleEvict/4 + time.Second)
	if v := metricValue(t, b, "felix_groups_in_memory"); v != 1 {
		t.Fatalf("felix_groups_in_memory = %v after the idle time, want 1 (the group with a claim)", v)
	}
	g.mu.Lock()
	_, held := g.groups["g"]
	g.mu.Unlock()
	if held {
		t.Fatal("the idle group is still held")
	}

	groupPublish(t, sh, 8, 2) // 8 and 9, written while the group was dropped
	if c := committed(t, g); c != 8 {
		t.Fatalf("cursor after reload %d, want 8", c)
	}
	if dl, _ := g.DeadLetters("g"); !slices.Equal(dl, []uint64{2, 7}) {
		t.Fatalf("dead letters after reload %v, want [2 7]", dl)
	}
	if v := metricValue(t, b, "felix_groups_in_memory"); v != 2 {
		t.Fatalf("felix_groups_in_memory = %v after the reload, want 2", v)
	}
	// Below the tail the reloaded state first saw (10): taken.
	if err := g.Ack("g", 9); err != nil {
		t.Fatal(err)
	}
	// Written after it: stale_claim.
	groupPublish(t, sh, 10, 1)
	wantCode(t, g.Ack("g", 10), wire.CodeStaleClaim)
	if got := offsetsOf(poll(t, g, 10)); !slices.Equal(got, []uint64{8, 10}) {
		t.Fatalf("after reload: %v, want [8 10]", got)
	}
	for _, o := range []uint64{8, 10} {
		if err := g.Ack("g", o); err != nil {
			t.Fatal(err)
		}
	}
	if c := committed(t, g); c != 11 {
		t.Fatalf("cursor %d, want 11", c)
	}
}

// Groups dropped idle still count against the shard's group limit.
func TestGroupDroppedIdleStillCountsAgainstTheLimit(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	cfg := Config{Groups: GroupConfig{Now: clk.Now, MaxGroups: 1}}
	_, st := newDurableStream(t, t.TempDir(), cfg, wire.StreamSpec{Shards: 1})
	sh, _ := st.Shard(0)
	g := groupsOf(t, sh)
	if _, _, err := g.Seek("a", GroupStart{Latest: true}, false); err != nil {
		t.Fatal(err)
	}
	clk.advance(DefaultGroupIdleEvict + time.Second)
	if _, err := g.Poll("b", 1, 0); err == nil {
		t.Fatal("a second group made past the limit of one")
	}
	g.mu.Lock()
	n := len(g.groups)
	g.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d groups held, want the idle one dropped", n)
	}
	if info, err := g.Describe("a"); err != nil || info.Committed == nil {
		t.Fatalf("the dropped group: %+v %v", info, err)
	}
}
