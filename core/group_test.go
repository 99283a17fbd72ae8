package core

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// fakeClock is an injectable clock for group tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// groupShard makes a durable one-shard stream under dir with n records
// published and returns its shard.
func groupShard(t *testing.T, dir string, clk *fakeClock, n int) (*Broker, *Shard) {
	t.Helper()
	cfg := Config{Groups: GroupConfig{Now: clk.Now, MaxAttempts: 3, MaxInFlight: 100}}
	b, st := newDurableStream(t, dir, cfg, wire.StreamSpec{Shards: 1})
	sh, err := st.Shard(0)
	if err != nil {
		t.Fatal(err)
	}
	groupPublish(t, sh, sh.NextOffset(), n)
	return b, sh
}

func groupPublish(t *testing.T, sh *Shard, from uint64, n int) {
	t.Helper()
	for i := range n {
		if _, err := sh.Publish(context.Background(), [][]byte{fmt.Appendf(nil, "r%d", from+uint64(i))}, ""); err != nil {
			t.Fatal(err)
		}
	}
}

func groupsOf(t *testing.T, sh *Shard) *Groups {
	t.Helper()
	g, err := sh.Groups()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func poll(t *testing.T, g *Groups, max int) []GroupRecord {
	t.Helper()
	recs, err := g.Poll("g", max, 0)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func offsetsOf(recs []GroupRecord) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Offset
	}
	return out
}

func committed(t *testing.T, g *Groups) uint64 {
	t.Helper()
	info, err := g.Describe("g")
	if err != nil || info.Committed == nil {
		t.Fatalf("describe: %+v %v", info, err)
	}
	return *info.Committed
}

func wantCode(t *testing.T, err error, code wire.Code) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
}

func TestGroupCursorAdvancesOnlyOverContiguousAcks(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	_, sh := groupShard(t, t.TempDir(), clk, 5)
	g := groupsOf(t, sh)
	recs := poll(t, g, 10)
	if len(recs) != 5 || recs[0].Attempts != 1 || string(recs[2].Payload) != "r2" {
		t.Fatalf("poll: %+v", recs)
	}
	if err := g.Ack("g", 2); err != nil {
		t.Fatal(err)
	}
	if c := committed(t, g); c != 0 {
		t.Fatalf("cursor %d after acking 2 with 0 in flight, want 0", c)
	}
	for _, o := range []uint64{0, 1} {
		if err := g.Ack("g", o); err != nil {
			t.Fatal(err)
		}
	}
	if c := committed(t, g); c != 3 {
		t.Fatalf("cursor %d after acking 0..2, want 3", c)
	}
	if err := g.Ack("g", 1); err != nil { // a repeated ack is a no-op
		t.Fatal(err)
	}
	info, _ := g.Describe("g")
	if info.InFlight != 2 || info.Tail != 5 {
		t.Fatalf("describe %+v", info)
	}
}

func TestGroupRedeliversAfterVisibilityLapses(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	_, sh := groupShard(t, t.TempDir(), clk, 2)
	g := groupsOf(t, sh)
	if recs := poll(t, g, 10); len(recs) != 2 {
		t.Fatalf("first poll %v", offsetsOf(recs))
	}
	if recs := poll(t, g, 10); len(recs) != 0 {
		t.Fatalf("records handed out twice while claimed: %v", offsetsOf(recs))
	}
	clk.advance(DefaultGroupVisibility - time.Millisecond)
	if recs := poll(t, g, 10); len(recs) != 0 {
		t.Fatalf("redelivered before the visibility lapsed: %v", offsetsOf(recs))
	}
	clk.advance(2 * time.Millisecond)
	recs := poll(t, g, 10)
	if len(recs) != 2 || recs[0].Attempts != 2 || recs[1].Attempts != 2 {
		t.Fatalf("redelivery %+v", recs)
	}
	if err := g.Nack("g", 0, new(uint32(1)), 0); err == nil {
		t.Fatal("a nack naming the first delivery took the second one's claim")
	} else {
		wantCode(t, err, wire.CodeStaleClaim)
	}
}

func TestGroupNackWithDelayHoldsThePlace(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	_, sh := groupShard(t, t.TempDir(), clk, 1)
	g := groupsOf(t, sh)
	r := poll(t, g, 1)[0]
	if err := g.Nack("g", r.Offset, &r.Attempts, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if info, _ := g.Describe("g"); info.InFlight != 1 || info.Owed != 1 {
		t.Fatalf("a delayed nack: %+v", info)
	}
	if recs := poll(t, g, 1); len(recs) != 0 {
		t.Fatalf("redelivered during the delay: %v", offsetsOf(recs))
	}
	clk.advance(10 * time.Second)
	recs := poll(t, g, 1)
	if len(recs) != 1 || recs[0].Attempts != 2 {
		t.Fatalf("after the delay: %+v", recs)
	}
	// An undelayed nack hands it back at once.
	if err := g.Nack("g", 0, nil, 0); err != nil {
		t.Fatal(err)
	}
	if recs := poll(t, g, 1); len(recs) != 1 || recs[0].Attempts != 3 {
		t.Fatalf("after a nack: %+v", recs)
	}
}

func TestGroupDeadLettersAfterMaxAttemptsAndRedrive(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	_, sh := groupShard(t, t.TempDir(), clk, 2)
	g := groupsOf(t, sh)
	for attempt := uint32(1); attempt <= 3; attempt++ {
		recs := poll(t, g, 1)
		if len(recs) != 1 || recs[0].Offset != 0 || recs[0].Attempts != attempt {
			t.Fatalf("attempt %d: %+v", attempt, recs)
		}
		if err := g.Nack("g", 0, &attempt, 0); err != nil {
			t.Fatal(err)
		}
	}
	recs := poll(t, g, 1) // offset 0 is past its attempts: dead, then 1
	if len(recs) != 1 || recs[0].Offset != 1 {
		t.Fatalf("after the attempts: %+v", recs)
	}
	if dl, _ := g.DeadLetters("g"); len(dl) != 1 || dl[0] != 0 {
		t.Fatalf("dead letters %v", dl)
	}
	if err := g.Ack("g", 1); err != nil {
		t.Fatal(err)
	}
	if c := committed(t, g); c != 2 {
		t.Fatalf("cursor %d, want 2 (a dead letter is finished)", c)
	}
	if err := g.Redrive("g", 0); err != nil {
		t.Fatal(err)
	}
	recs = poll(t, g, 5)
	if len(recs) != 1 || recs[0].Offset != 0 || recs[0].Attempts != 1 || string(recs[0].Payload) != "r0" {
		t.Fatalf("after redrive: %+v", recs)
	}
	if err := g.DeadLetter("g", 0); err != nil {
		t.Fatal(err)
	}
	wantCode(t, g.DeadLetter("g", 0), wire.CodeInvalidRequest)
	if err := g.Discard("g", 0); err != nil {
		t.Fatal(err)
	}
	if dl, _ := g.DeadLetters("g"); len(dl) != 0 {
		t.Fatalf("dead letters after discard %v", dl)
	}
	wantCode(t, g.Discard("g", 0), wire.CodeInvalidRequest)
}

func TestGroupExtendAndStaleClaim(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	_, sh := groupShard(t, t.TempDir(), clk, 1)
	g := groupsOf(t, sh)
	r := poll(t, g, 1)[0]
	clk.advance(20 * time.Second)
	granted, err := g.Extend("g", r.Offset, &r.Attempts, time.Minute)
	if err != nil || granted != time.Minute {
		t.Fatalf("extend: %v %v", granted, err)
	}
	clk.advance(50 * time.Second) // past the original 30 s, inside the extension
	if recs := poll(t, g, 1); len(recs) != 0 {
		t.Fatalf("an extended claim was handed out again: %v", offsetsOf(recs))
	}
	clk.advance(11 * time.Second)
	if _, err := g.Extend("g", r.Offset, &r.Attempts, time.Minute); err == nil {
		t.Fatal("extended a lapsed claim")
	} else {
		wantCode(t, err, wire.CodeStaleClaim)
	}
	r2 := poll(t, g, 1)[0]
	if _, err := g.Extend("g", r.Offset, &r.Attempts, time.Minute); err == nil {
		t.Fatal("extended a claim that went out again")
	}
	if _, err := g.Extend("g", r2.Offset, &r2.Attempts, 100*time.Hour); err != nil {
		t.Fatal(err)
	}
}

func TestGroupSeekVoidsClaims(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	_, sh := groupShard(t, t.TempDir(), clk, 4)
	g := groupsOf(t, sh)
	if off, moved, err := g.Seek("g", GroupStart{Offset: 1}, true); err != nil || !moved || off != 1 {
		t.Fatalf("seek if_new on a new group: %d %v %v", off, moved, err)
	}
	if off, moved, _ := g.Seek("g", GroupStart{Latest: true}, true); moved || off != 1 {
		t.Fatalf("seek if_new on an existing group moved it: %d %v", off, moved)
	}
	recs := poll(t, g, 10)
	if len(recs) != 3 || recs[0].Offset != 1 {
		t.Fatalf("after seek: %v", offsetsOf(recs))
	}
	if _, _, err := g.Seek("g", GroupStart{Offset: 2}, false); err != nil {
		t.Fatal(err)
	}
	wantCode(t, g.Ack("g", 2), wire.CodeStaleClaim)
	if recs := poll(t, g, 10); len(recs) != 2 || recs[0].Offset != 2 || recs[0].Attempts != 1 {
		t.Fatalf("after the second seek: %+v", recs)
	}
	_, _, err := g.Seek("g", GroupStart{Offset: 9}, false)
	wantCode(t, err, wire.CodeInvalidRequest)
	if off, _, _ := g.Seek("g", GroupStart{Earliest: true}, false); off != 0 {
		t.Fatalf("earliest = %d", off)
	}
	if existed, _ := g.Delete("g"); !existed {
		t.Fatal("delete: not existed")
	}
	if info, _ := g.Describe("g"); info.Committed != nil {
		t.Fatalf("a deleted group has a cursor: %+v", info)
	}
	if existed, _ := g.Delete("g"); existed {
		t.Fatal("deleted twice")
	}
}

func TestGroupRestartKeepsCursorAndDeadLetters(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{now: time.Unix(1000, 0)}
	b, sh := groupShard(t, dir, clk, 8)
	g := groupsOf(t, sh)
	poll(t, g, 8)
	for _, o := range []uint64{0, 1, 3} {
		if err := g.Ack("g", o); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []uint64{2, 7} { // 7 above the cursor
		if err := g.DeadLetter("g", o); err != nil {
			t.Fatal(err)
		}
	}
	if c := committed(t, g); c != 4 {
		t.Fatalf("cursor %d, want 4", c)
	}
	b.Close()

	_, st := newDurableStream(t, dir, Config{Groups: GroupConfig{Now: clk.Now}}, wire.StreamSpec{Shards: 1})
	sh2, _ := st.Shard(0)
	g2 := groupsOf(t, sh2)
	if c := committed(t, g2); c != 4 {
		t.Fatalf("cursor after restart %d, want 4", c)
	}
	if dl, _ := g2.DeadLetters("g"); len(dl) != 2 || dl[0] != 2 || dl[1] != 7 {
		t.Fatalf("dead letters after restart %v", dl)
	}
	// An ack for a claim made before the restart is still taken,
	groupPublish(t, sh2, 8, 1)
	if err := g2.Ack("g", 5); err != nil {
		t.Fatal(err)
	}
	// but not one for an offset written since and never handed out.
	wantCode(t, g2.Ack("g", 8), wire.CodeStaleClaim)
	// Claims are memory: 4 and 6 come round again; 5 (acked) and 7 (a
	// dead letter) do not.
	recs := poll(t, g2, 10)
	if got := offsetsOf(recs); len(got) != 3 || got[0] != 4 || got[1] != 6 || got[2] != 8 {
		t.Fatalf("after restart: %v", got)
	}
	for _, o := range []uint64{4, 6, 8} {
		if err := g2.Ack("g", o); err != nil {
			t.Fatal(err)
		}
	}
	if c := committed(t, g2); c != 9 {
		t.Fatalf("cursor %d, want 9", c)
	}
}

func TestGroupStateFileTornTailIsCut(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{now: time.Unix(1000, 0)}
	b, sh := groupShard(t, dir, clk, 3)
	g := groupsOf(t, sh)
	poll(t, g, 3)
	if err := g.Ack("g", 0); err != nil {
		t.Fatal(err)
	}
	b.Close()
	path := filepath.Join(ShardDir(dir, StreamKey{"t", "ns", "s"}, 0), GroupStateFile)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`0000dead {"g":"g","c":3`) // a write cut short
	f.Close()
	_, st := newDurableStream(t, dir, Config{Groups: GroupConfig{Now: clk.Now}}, wire.StreamSpec{Shards: 1})
	sh2, _ := st.Shard(0)
	if c := committed(t, groupsOf(t, sh2)); c != 1 {
		t.Fatalf("cursor %d after a torn tail, want 1", c)
	}
}

func TestGroupOneConsumerHoldsARecordAtATime(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	const n = 400
	_, sh := groupShard(t, t.TempDir(), clk, n)
	g := groupsOf(t, sh)
	var mu sync.Mutex
	got := map[uint64]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 { // bounded
				recs, err := g.Poll("g", 1+w%4, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if len(recs) == 0 {
					info, _ := g.Describe("g")
					if info.Committed != nil && *info.Committed == n {
						return
					}
					continue
				}
				for _, r := range recs {
					mu.Lock()
					got[r.Offset]++
					mu.Unlock()
					if err := g.Ack("g", r.Offset); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if len(got) != n {
		t.Fatalf("%d records delivered, want %d", len(got), n)
	}
	for o, c := range got {
		if c != 1 {
			t.Fatalf("offset %d delivered %d times with no lapse", o, c)
		}
	}
	if c := committed(t, g); c != n {
		t.Fatalf("cursor %d, want %d", c, n)
	}
}

func TestGroupInFlightCap(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	_, sh := groupShard(t, t.TempDir(), clk, 150)
	g := groupsOf(t, sh)
	if recs := poll(t, g, 1000); len(recs) != 100 {
		t.Fatalf("poll past the in-flight cap handed out %d", len(recs))
	}
	if recs := poll(t, g, 10); len(recs) != 0 {
		t.Fatalf("a group at its cap got %d more", len(recs))
	}
	if err := g.Ack("g", 7); err != nil {
		t.Fatal(err)
	}
	if recs := poll(t, g, 10); len(recs) != 1 || recs[0].Offset != 100 {
		t.Fatalf("after one ack: %v", offsetsOf(recs))
	}
}

func TestGroupWaitCIsClosedByAPublish(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	_, sh := groupShard(t, t.TempDir(), clk, 0)
	g := groupsOf(t, sh)
	c := g.WaitC()
	if recs := poll(t, g, 1); len(recs) != 0 {
		t.Fatal("records on an empty shard")
	}
	groupPublish(t, sh, 0, 1)
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatal("a publish did not wake a waiting poll")
	}
	if recs := poll(t, g, 1); len(recs) != 1 {
		t.Fatal("no record after the wake")
	}
}

func TestGroupsNeedADurableStream(t *testing.T) {
	b := NewBroker(Config{})
	t.Cleanup(b.Close)
	if err := b.ApplyStream(wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "m", Shards: 1}); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stream(StreamKey{"t", "ns", "m"})
	sh, _ := st.Shard(0)
	_, err := sh.Groups()
	wantCode(t, err, wire.CodeInvalidRequest)
}

func TestGroupNextLapseIsTheNextFutureDeadline(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	_, sh := groupShard(t, t.TempDir(), clk, 2)
	g := groupsOf(t, sh)
	if !g.NextLapse("g").IsZero() {
		t.Fatal("a lapse before any claim")
	}
	r := poll(t, g, 1)[0]
	if got, want := g.NextLapse("g"), clk.Now().Add(DefaultGroupVisibility); !got.Equal(want) {
		t.Fatalf("next lapse %v, want %v", got, want)
	}
	if err := g.Nack("g", r.Offset, &r.Attempts, 0); err != nil {
		t.Fatal(err)
	}
	if l := g.NextLapse("g"); !l.IsZero() {
		t.Fatalf("a record owed now has a lapse %v (a waiting poll would spin)", l)
	}
}

func TestGroupInFlightGauge(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	b, sh := groupShard(t, t.TempDir(), clk, 3)
	g := groupsOf(t, sh)
	poll(t, g, 3)
	if err := g.Ack("g", 1); err != nil {
		t.Fatal(err)
	}
	if v := metricValue(t, b, "felix_group_in_flight"); v != 2 {
		t.Fatalf("felix_group_in_flight = %v, want 2", v)
	}
	if v := metricValue(t, b, "felix_group_deliveries_total"); v != 3 {
		t.Fatalf("felix_group_deliveries_total = %v, want 3", v)
	}
}
