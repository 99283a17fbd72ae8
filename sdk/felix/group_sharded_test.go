package felix

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// groupCluster is a fake cluster of three brokers playing consumer
// groups, with stream ns/jobs placed on owners (one per shard), and a
// ClusterClient that knows the owners.
func groupCluster(t *testing.T, owners ...int) (*fakeCluster, *fakeGroups, *ClusterClient) {
	t.Helper()
	fg := newFakeGroups()
	cl := newFakeCluster(t, 3, fakeOpts{features: groupFeatureBits, groups: fg})
	cl.place(KindStream, "ns", "jobs", owners...)
	cc := connectClusterTest(t, cl, 0)
	learnOwners(t, cc, KindStream, "ns", "jobs")
	return cl, fg, cc
}

// addRecords appends n records "s<shard>-<offset>" to shard from offset
// from.
func addRecords(fg *fakeGroups, shard uint32, from, n int) {
	var ps []string
	for i := from; i < from+n; i++ {
		ps = append(ps, fmt.Sprintf("s%d-%d", shard, i))
	}
	fg.add("jobs", shard, ps...)
}

// consumeInBackground runs sg.Consume until stop is called, checking each
// record's payload names its shard and offset.
func consumeInBackground(t *testing.T, sg *ShardedGroup) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	done := make(chan error, 1)
	go func() {
		done <- sg.Consume(ctx, func(_ context.Context, r GroupRecord) error {
			if want := fmt.Sprintf("s%d-%d", r.Shard, r.Offset); string(r.Payload) != want {
				t.Errorf("record of shard %d offset %d carries %q", r.Shard, r.Offset, r.Payload)
			}
			return nil
		}, ConsumeOptions{MaxRecords: 4, Wait: 200 * time.Millisecond})
	}()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume: %v", err)
		}
	}
}

// waitAcks waits until the fake served n acks and returns them.
func waitAcks(t *testing.T, fg *fakeGroups, n int) []fakeGroupAck {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		acks := fg.ackList()
		if len(acks) >= n {
			return acks
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d acks in 30s, want %d: %v", len(acks), n, acks)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkOnce fails unless every (shard, offset) of want was acked exactly
// once.
func checkOnce(t *testing.T, acks []fakeGroupAck, want map[uint32]int) {
	t.Helper()
	seen := map[[2]uint64]int{}
	for _, a := range acks {
		seen[[2]uint64{uint64(a.shard), a.offset}]++
	}
	total := 0
	for shard, n := range want {
		total += n
		for off := range n {
			if k := seen[[2]uint64{uint64(shard), uint64(off)}]; k != 1 {
				t.Fatalf("shard %d offset %d acked %d times", shard, off, k)
			}
		}
	}
	if len(acks) != total {
		t.Fatalf("%d acks, want %d", len(acks), total)
	}
}

// A ShardedGroup reads every shard of the stream, each from its owner,
// and acks each record on the owner of its shard.
func TestShardedGroupMergesEveryShardAndAcksOnItsOwner(t *testing.T) {
	_, fg, cc := groupCluster(t, 0, 1, 2)
	for shard := range uint32(3) {
		addRecords(fg, shard, 0, 10)
	}
	sg, err := cc.GroupSharded(context.Background(), "ns", "jobs", "g")
	if err != nil {
		t.Fatal(err)
	}
	defer sg.Close()
	if sg.Shards() != 3 {
		t.Fatalf("%d shards", sg.Shards())
	}
	stop := consumeInBackground(t, sg)
	acks := waitAcks(t, fg, 30)
	stop()
	checkOnce(t, fg.ackList(), map[uint32]int{0: 10, 1: 10, 2: 10})
	for _, a := range acks {
		if a.broker != int(a.shard) {
			t.Fatalf("the ack of shard %d offset %d went to b%d", a.shard, a.offset, a.broker)
		}
	}
}

// A shard whose owner moves mid-consume is followed: the poll waiting on
// the old owner is answered not_leader, the next goes to the new owner,
// and the shard's later records are acked there.
func TestShardedGroupFollowsAShardWhoseOwnerMoves(t *testing.T) {
	cl, fg, cc := groupCluster(t, 0, 1, 2)
	for shard := range uint32(3) {
		addRecords(fg, shard, 0, 5)
	}
	sg, err := cc.GroupSharded(context.Background(), "ns", "jobs", "g")
	if err != nil {
		t.Fatal(err)
	}
	defer sg.Close()
	stop := consumeInBackground(t, sg)
	waitAcks(t, fg, 15)
	cl.place(KindStream, "ns", "jobs", 0, 2, 2) // shard 1 moves to b2
	addRecords(fg, 1, 5, 5)
	addRecords(fg, 0, 5, 5)
	acks := waitAcks(t, fg, 25)
	stop()
	checkOnce(t, fg.ackList(), map[uint32]int{0: 10, 1: 10, 2: 5})
	for _, a := range acks {
		if a.shard == 1 && a.offset >= 5 && a.broker != 2 {
			t.Fatalf("shard 1 offset %d acked on b%d after it moved to b2", a.offset, a.broker)
		}
	}
}

// While one shard's owner is down the others are consumed; the shard is
// tried again with backoff and consumed once it has an owner again.
func TestShardedGroupKeepsConsumingWhileAShardsOwnerIsDown(t *testing.T) {
	cl, fg, cc := groupCluster(t, 0, 1, 2)
	sg, err := cc.GroupSharded(context.Background(), "ns", "jobs", "g")
	if err != nil {
		t.Fatal(err)
	}
	defer sg.Close()
	cl.node(1).Kill()
	for shard := range uint32(3) {
		addRecords(fg, shard, 0, 10)
	}
	stop := consumeInBackground(t, sg)
	acks := waitAcks(t, fg, 20)
	for _, a := range acks {
		if a.shard == 1 {
			t.Fatalf("shard 1 acked on b%d while its owner was down", a.broker)
		}
	}
	cl.place(KindStream, "ns", "jobs", 0, 2, 2) // shard 1 taken over by b2
	waitAcks(t, fg, 30)
	stop()
	checkOnce(t, fg.ackList(), map[uint32]int{0: 10, 1: 10, 2: 10})
}

// A busy shard does not starve a quiet one: a record on the quiet shard
// comes out long before the busy shard runs dry (a consumer that polled
// the shards one after the other, moving on only when one came back
// empty, would hand out all 500 busy records first).
func TestShardedGroupABusyShardDoesNotStarveAQuietOne(t *testing.T) {
	_, fg, cc := groupCluster(t, 0, 1)
	addRecords(fg, 0, 0, 500)
	ctx := context.Background()
	sg, err := cc.GroupSharded(ctx, "ns", "jobs", "g")
	if err != nil {
		t.Fatal(err)
	}
	defer sg.Close()
	recs, err := sg.Poll(ctx, 4, GroupPollOptions{})
	if err != nil || len(recs) == 0 {
		t.Fatalf("first poll: %v %v", recs, err)
	}
	fg.add("jobs", 1, "s1-0")
	busy := 0
	for range 50 { // 200 of the busy shard's 500 records at most
		for _, r := range recs {
			if r.Shard == 1 {
				t.Logf("the quiet shard's record came out after %d of the busy shard's", busy)
				return
			}
			busy++
			if err := sg.Ack(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		recs, err = sg.Poll(ctx, 4, GroupPollOptions{Wait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("the quiet shard's record did not come out in 50 polls (%d busy records)", busy)
}

// Poll hands out what it holds one record from each shard in turn,
// starting one shard later on each call: checked against a naive model.
func TestShardedGroupTakesFromEachShardInTurn(t *testing.T) {
	sizes := []int{5, 0, 2, 7}
	sg := &ShardedGroup{lanes: make([]shardLane, len(sizes))}
	model := make([][]GroupRecord, len(sizes))
	for i, n := range sizes {
		for off := range n {
			r := GroupRecord{Shard: uint32(i), Offset: uint64(off)}
			sg.lanes[i].ready = append(sg.lanes[i].ready, r)
			model[i] = append(model[i], r)
		}
	}
	first := 0
	for call := 0; ; call++ {
		max := 1 + call%4
		var want []GroupRecord
		for len(want) < max {
			took := false
			for i := range model {
				s := (first + i) % len(model)
				if len(model[s]) > 0 && len(want) < max {
					want, model[s], took = append(want, model[s][0]), model[s][1:], true
				}
			}
			if !took {
				break
			}
		}
		if len(want) > 0 {
			first = (first + 1) % len(model)
		}
		got := sg.takeLocked(max)
		if !slices.EqualFunc(got, want, func(a, b GroupRecord) bool { return a.Shard == b.Shard && a.Offset == b.Offset }) {
			t.Fatalf("call %d (max %d): took %v, want %v", call, max, got, want)
		}
		if len(got) == 0 {
			return
		}
	}
}

// The stream calls run on every shard, each on its owner (following a
// shard that moved), and answer in shard order.
func TestGroupStreamCallsRunOnEveryShard(t *testing.T) {
	cl, fg, cc := groupCluster(t, 0, 1, 2)
	addRecords(fg, 0, 0, 2)
	addRecords(fg, 1, 0, 1)
	ctx := context.Background()
	pos, err := cc.GroupCreateStream(ctx, "ns", "jobs", "g", GroupLatest)
	if err != nil || len(pos) != 3 {
		t.Fatalf("create: %v %v", pos, err)
	}
	for i, want := range []uint64{2, 1, 0} {
		if pos[i].Shard != uint32(i) || pos[i].Offset != want || !pos[i].Moved {
			t.Fatalf("create on shard %d: %+v", i, pos[i])
		}
	}
	cl.place(KindStream, "ns", "jobs", 0, 1, 0) // shard 2 moves: the client learns it from not_leader
	pos, err = cc.GroupCreateStream(ctx, "ns", "jobs", "g", GroupEarliest)
	if err != nil || slices.ContainsFunc(pos, func(p GroupPosition) bool { return p.Moved }) {
		t.Fatalf("a second create moved a group: %v %v", pos, err)
	}
	infos, err := cc.GroupDescribeStream(ctx, "ns", "jobs", "g")
	if err != nil || len(infos) != 3 {
		t.Fatalf("describe: %v %v", infos, err)
	}
	for i, want := range []uint64{2, 1, 0} {
		if infos[i].Shard != uint32(i) || infos[i].Tail != want || infos[i].Committed == nil || *infos[i].Committed != want {
			t.Fatalf("describe shard %d: %+v", i, infos[i])
		}
	}
	pos, err = cc.GroupSeekStream(ctx, "ns", "jobs", "g", GroupEarliest)
	if err != nil || len(pos) != 3 || slices.ContainsFunc(pos, func(p GroupPosition) bool { return p.Offset != 0 || !p.Moved }) {
		t.Fatalf("seek: %v %v", pos, err)
	}
	existed, err := cc.GroupDeleteStream(ctx, "ns", "jobs", "g")
	if err != nil || !slices.Equal(existed, []bool{true, true, true}) {
		t.Fatalf("delete: %v %v", existed, err)
	}
	existed, err = cc.GroupDeleteStream(ctx, "ns", "jobs", "g")
	if err != nil || !slices.Equal(existed, []bool{false, false, false}) {
		t.Fatalf("second delete: %v %v", existed, err)
	}
	if _, err := cc.GroupDescribeStream(ctx, "ns", "nothing", "g"); err == nil {
		t.Fatal("describe of a stream the cluster does not know: no error")
	}
}

// Close nacks what the group held and had not handed out, so it comes
// round at once; Poll then returns ErrClosed.
func TestShardedGroupCloseHandsBackWhatItHeld(t *testing.T) {
	_, fg, cc := groupCluster(t, 0, 1)
	addRecords(fg, 0, 0, 1)
	addRecords(fg, 1, 0, 1)
	ctx := context.Background()
	sg, err := cc.GroupSharded(ctx, "ns", "jobs", "g")
	if err != nil {
		t.Fatal(err)
	}
	got, err := sg.Poll(ctx, 1, GroupPollOptions{Wait: time.Second})
	if err != nil || len(got) != 1 {
		t.Fatalf("poll: %v %v", got, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for held := 0; held == 0; {
		sg.mu.Lock()
		for i := range sg.lanes {
			held += len(sg.lanes[i].ready)
		}
		sg.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("the other shard's record never arrived")
		}
		time.Sleep(time.Millisecond)
	}
	if err := sg.Close(); err != nil {
		t.Fatal(err)
	}
	fg.mu.Lock()
	for shard := range uint32(2) {
		_, claimed := fg.shards[fakeShardKey{"jobs", shard}].claims[0]
		if claimed != (shard == got[0].Shard) {
			fg.mu.Unlock()
			t.Fatalf("shard %d claimed %v after Close; Poll returned shard %d's record", shard, claimed, got[0].Shard)
		}
	}
	fg.mu.Unlock()
	if _, err := sg.Poll(ctx, 1, GroupPollOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Poll after Close: %v", err)
	}
}

// A refusal for good on one shard is returned by Poll; the group still
// routes by the record's shard and refuses one of a shard it lacks.
func TestShardedGroupReturnsARefusalForGood(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: wire.FeatureCacheDelete}) // no groups
	c := connect(t, fb)
	ctx := context.Background()
	sg, err := c.GroupSharded(ctx, "ns", "jobs", "g")
	if err != nil || sg.Shards() != 1 {
		t.Fatalf("GroupSharded on a broker without stream_shards: %v", err)
	}
	defer sg.Close()
	_, err = sg.Poll(ctx, 1, GroupPollOptions{Wait: time.Second})
	if be := asBroker(t, err); be.Code != wire.CodeUnsupported {
		t.Fatalf("poll without groups: %v", err)
	}
	if err := sg.Ack(ctx, GroupRecord{Shard: 1}); err == nil || !wasNotSent(err) {
		t.Fatalf("ack of a shard the stream lacks: %v", err)
	}
}
