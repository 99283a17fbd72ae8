package felix

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/felixmq/felix/transport"
	"github.com/felixmq/felix/wire"
)

const groupFeatureBits = wire.FeatureConsumerGroup | wire.FeatureGroupClaimControl | wire.FeatureGroupDeadLetters | wire.FeatureGroupAdmin

// groupOp answers group requests as a durable broker would, simply: a
// poll hands out the stream's unclaimed records (attempts 1), an ack
// finishes one, a nack naming a delivery other than 1 is stale_claim.
func (fb *fakeBroker) groupOp(s transport.Stream, msg wire.Message) bool {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if fb.groupClaims == nil {
		fb.groupClaims = map[uint64]bool{}
	}
	fb.groupMsgs = append(fb.groupMsgs, msg)
	var ans wire.Message
	switch m := msg.(type) {
	case *wire.GroupPoll:
		recs := []wire.GroupRecord{}
		for off, r := range fb.published[m.Namespace+"/"+m.Stream] {
			if len(recs) < int(m.MaxRecords) && !fb.groupClaims[uint64(off)] {
				fb.groupClaims[uint64(off)] = true
				recs = append(recs, wire.GroupRecord{Offset: uint64(off), Payload: r.payload, Attempts: 1})
			}
		}
		ans = &wire.GroupRecords{Records: recs, RequestID: m.RequestID}
	case *wire.GroupAck:
		fb.groupAcked = append(fb.groupAcked, *m.Offset)
		ans = &wire.CacheOK{RequestID: m.RequestID}
	case *wire.GroupNack:
		if m.Attempts != nil && *m.Attempts != 1 {
			e := wire.NewError(wire.CodeStaleClaim, "the claim no longer stands").ErrorMessage(true)
			e.RequestID = &m.RequestID
			ans = e
		} else {
			delete(fb.groupClaims, *m.Offset)
			ans = &wire.CacheOK{RequestID: m.RequestID}
		}
	case *wire.GroupExtend:
		ans = &wire.GroupExtended{VisibleMS: m.ExtendMS, RequestID: m.RequestID}
	case *wire.GroupDeadLetters:
		ans = &wire.GroupDeadLetterList{Offsets: []uint64{7}, RequestID: m.RequestID}
	case *wire.GroupSeek:
		ans = &wire.GroupPosition{Offset: m.Start.Offset, Moved: !m.IfNew, RequestID: m.RequestID}
	case *wire.GroupDescribe:
		c := uint64(1)
		ans = &wire.GroupInfo{Committed: &c, Tail: 3, InFlight: 2, RequestID: m.RequestID}
	case *wire.GroupDelete:
		ans = &wire.GroupDeleted{Existed: true, RequestID: m.RequestID}
	}
	return writeMsg(s, ans) == nil
}

func TestGroupCallsOverTheWire(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: groupFeatureBits})
	fb.record("ns", "jobs", [][]byte{[]byte("a"), []byte("b")}, false, nil)
	c := connect(t, fb)
	ctx := context.Background()
	recs, err := c.GroupPoll(ctx, "ns", "jobs", 0, "g", 5, GroupPollOptions{Wait: time.Second, Visibility: time.Minute})
	if err != nil || len(recs) != 2 || string(recs[1].Payload) != "b" || recs[0].Attempts != 1 || recs[1].Shard != 0 {
		t.Fatalf("poll: %+v %v", recs, err)
	}
	if err := c.GroupAck(ctx, "ns", "jobs", 0, "g", 0); err != nil {
		t.Fatal(err)
	}
	stale := recs[1]
	stale.Attempts = 2
	err = c.GroupNack(ctx, "ns", "jobs", 0, "g", stale, 0)
	if be := asBroker(t, err); be.Code != wire.CodeStaleClaim {
		t.Fatalf("stale nack: %v", err)
	}
	if err := c.GroupNack(ctx, "ns", "jobs", 0, "g", recs[1], 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if d, err := c.GroupExtend(ctx, "ns", "jobs", 0, "g", recs[1], time.Minute); err != nil || d != time.Minute {
		t.Fatalf("extend: %v %v", d, err)
	}
	if dl, err := c.GroupDeadLetters(ctx, "ns", "jobs", 0, "g"); err != nil || len(dl) != 1 || dl[0] != 7 {
		t.Fatalf("dead letters: %v %v", dl, err)
	}
	if off, moved, err := c.GroupSeek(ctx, "ns", "jobs", 0, "g", GroupAt(1), false); err != nil || off != 1 || !moved {
		t.Fatalf("seek: %d %v %v", off, moved, err)
	}
	if _, created, err := c.GroupCreate(ctx, "ns", "jobs", 0, "g", GroupLatest); err != nil || created {
		t.Fatalf("create (a seek with if_new): %v %v", created, err)
	}
	info, err := c.GroupDescribe(ctx, "ns", "jobs", 0, "g")
	if err != nil || info.Committed == nil || *info.Committed != 1 || info.Lag() != 2 || info.InFlight != 2 {
		t.Fatalf("describe: %+v %v", info, err)
	}
	if existed, err := c.GroupDelete(ctx, "ns", "jobs", 0, "g"); err != nil || !existed {
		t.Fatalf("delete: %v %v", existed, err)
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	p := fb.groupMsgs[0].(*wire.GroupPoll)
	if p.WaitMS != 1000 || p.VisibilityMS == nil || *p.VisibilityMS != 60000 || p.Group != "g" || p.TenantID == "" {
		t.Fatalf("poll sent as %+v", p)
	}
	n := fb.groupMsgs[3].(*wire.GroupNack)
	if n.Attempts == nil || *n.Attempts != 1 || n.DelayMS == nil || *n.DelayMS != 5000 {
		t.Fatalf("nack sent as %+v", n)
	}
	if sk := fb.groupMsgs[7].(*wire.GroupSeek); !sk.IfNew || !sk.Start.Latest {
		t.Fatalf("create sent as %+v", sk)
	}
}

// Without the feature bits nothing is sent: consumer groups need
// FEATURE_CONSUMER_GROUP, a visibility or delay FEATURE_GROUP_CLAIM_CONTROL,
// seek FEATURE_GROUP_ADMIN.
func TestGroupCallsNeedTheirFeatures(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: wire.FeatureCacheDelete})
	c := connect(t, fb)
	ctx := context.Background()
	_, err := c.GroupPoll(ctx, "ns", "jobs", 0, "g", 1, GroupPollOptions{})
	if be := asBroker(t, err); be.Code != wire.CodeUnsupported || !wasNotSent(err) {
		t.Fatalf("poll without groups: %v", err)
	}
	only := newFakeBroker(t, fakeOpts{features: wire.FeatureConsumerGroup})
	c2 := connect(t, only)
	_, err = c2.GroupPoll(ctx, "ns", "jobs", 0, "g", 1, GroupPollOptions{Visibility: time.Minute})
	if be := asBroker(t, err); be.Code != wire.CodeUnsupported {
		t.Fatalf("poll with a visibility without claim control: %v", err)
	}
	_, _, err = c2.GroupSeek(ctx, "ns", "jobs", 0, "g", GroupLatest, true)
	var be *BrokerError
	if !errors.As(err, &be) || be.Code != wire.CodeUnsupported {
		t.Fatalf("seek without admin: %v", err)
	}
	only.mu.Lock()
	defer only.mu.Unlock()
	if len(only.groupMsgs) != 0 || len(fb.groupMsgs) != 0 {
		t.Fatal("a refused call was sent")
	}
}

// Consume acks what the handler finished and nacks (naming the delivery)
// what it failed, which then comes round again; it returns nil when its
// context ends.
func TestGroupConsumeAcksAndNacks(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{features: groupFeatureBits})
	fb.record("ns", "jobs", [][]byte{[]byte("a"), []byte("b"), []byte("c")}, false, nil)
	c := connect(t, fb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	failed := false
	seen := 0
	go func() { // end the loop once the three records are acked
		for ctx.Err() == nil {
			fb.mu.Lock()
			n := len(fb.groupAcked)
			fb.mu.Unlock()
			if n >= 3 {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	err := c.Group("ns", "jobs", 0, "g").Consume(ctx, func(_ context.Context, r GroupRecord) error {
		seen++
		if string(r.Payload) == "b" && !failed {
			failed = true
			return errors.New("not yet")
		}
		return nil
	}, ConsumeOptions{MaxRecords: 2, Wait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.groupAcked) != 3 {
		t.Fatalf("acked %v, want the three records", fb.groupAcked)
	}
	nacks := 0
	for _, m := range fb.groupMsgs {
		if n, ok := m.(*wire.GroupNack); ok {
			nacks++
			if *n.Offset != 1 || n.Attempts == nil || *n.Attempts != 1 {
				t.Fatalf("nack %+v", n)
			}
		}
	}
	if nacks != 1 {
		t.Fatalf("%d nacks, want 1", nacks)
	}
}
