package felix

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

const durableFeatures = wire.FeatureStreamRead | wire.FeatureRecordTimestamps | wire.FeatureSubscriptionLagged

// The auth frames the client sends, as the broker receives them, offer
// the flags and features durable streams need.
func TestAuthOffersDurableFlagsAndFeatures(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	if _, err := c.Subscribe(context.Background(), "ns", "s"); err != nil {
		t.Fatal(err)
	}
	fb.nextSubscription()
	fb.mu.Lock()
	auths := append([]wire.Auth(nil), fb.authMsgs...)
	fb.mu.Unlock()
	if len(auths) == 0 {
		t.Fatal("the fake broker received no auth")
	}
	for i, a := range auths {
		for _, f := range []uint16{wire.FlagEventBatchOffsets, wire.FlagEventBatchSkipped, wire.FlagEventBatchTimestamps,
			wire.FlagEventBatchPublisher, wire.FlagBinaryPublishAckOffset} {
			if a.ClientFlags&f == 0 {
				t.Errorf("auth %d: client_flags %#x lacks %s", i, a.ClientFlags, wire.FlagNames[f])
			}
		}
		for _, f := range []uint64{wire.FeatureSubscriptionLagged, wire.FeatureStreamRead, wire.FeatureRecordTimestamps} {
			if a.Features&f == 0 {
				t.Errorf("auth %d: features %#x lack %#x", i, a.Features, f)
			}
		}
	}
}

func TestSubscribeStartPositionsEncode(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	ctx := context.Background()
	cases := []struct {
		start StartPosition
		shard uint32
		want  string
	}{
		{Latest(), 0, `"latest"`},
		{Earliest(), 3, `"earliest"`},
		{AtOffset(1200), 7, `{"offset":1200}`},
	}
	for _, tc := range cases {
		if _, err := c.SubscribeFrom(ctx, "ns", "s", SubscribeOptions{Start: tc.start, Shard: tc.shard}); err != nil {
			t.Fatal(err)
		}
		m := fb.nextSubscription().msg
		if m.Start == nil || m.Shard == nil {
			t.Fatalf("start or shard missing: %+v", m)
		}
		got, _ := m.Start.MarshalJSON()
		if string(got) != tc.want || *m.Shard != tc.shard {
			t.Fatalf("sent start %s shard %d, want %s shard %d", got, *m.Shard, tc.want, tc.shard)
		}
	}
	if _, err := c.Subscribe(ctx, "ns", "s"); err != nil {
		t.Fatal(err)
	}
	if m := fb.nextSubscription().msg; m.Start != nil || m.Shard != nil {
		t.Fatalf("plain subscribe sent a start or shard: %+v", m)
	}
}

func TestSubscribeReportsStartAndLiveOffsets(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, subscribed: durableAnswer(100, 250)})
	c := connect(t, fb)
	sub, err := c.SubscribeFrom(context.Background(), "ns", "s", SubscribeOptions{Start: AtOffset(120)})
	if err != nil {
		t.Fatal(err)
	}
	fb.nextSubscription()
	if off, ok := sub.StartOffset(); !ok || off != 120 {
		t.Fatalf("start offset %d %v", off, ok)
	}
	if off, ok := sub.LiveOffset(); !ok || off != 250 {
		t.Fatalf("live offset %d %v", off, ok)
	}
	plain, err := c.Subscribe(context.Background(), "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	fb.nextSubscription()
	if _, ok := plain.StartOffset(); ok {
		t.Fatal("a plain subscribe reported a start offset")
	}
	if _, ok := plain.LiveOffset(); ok {
		t.Fatal("a plain subscribe reported a live offset")
	}
}

func TestSubscribeCursorErrorIsTyped(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, subscribed: durableAnswer(100, 250)})
	c := connect(t, fb)
	ctx := context.Background()
	_, err := c.SubscribeFrom(ctx, "ns", "s", SubscribeOptions{Start: AtOffset(5)})
	var ce *SubscribeCursorError
	if !errors.As(err, &ce) {
		t.Fatalf("want *SubscribeCursorError, got %T %v", err, err)
	}
	if !ce.TooOld || ce.Reason != wire.CursorTooOld || ce.Requested != 5 || ce.Available != 100 {
		t.Fatalf("got %+v", ce)
	}
	_, err = c.SubscribeFrom(ctx, "ns", "s", SubscribeOptions{Start: AtOffset(900)})
	if !errors.As(err, &ce) || ce.TooOld || ce.Reason != wire.CursorInFuture || ce.Available != 250 {
		t.Fatalf("got %T %v", err, err)
	}
}

func TestEventsCarryOffsetsTimesAndPublisher(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	sub, fs := subscribeFake(t, c, fb)
	all := wire.FlagEventBatchOffsets | wire.FlagEventBatchSkipped | wire.FlagEventBatchTimestamps | wire.FlagEventBatchPublisher
	t0 := uint64(1767225600000000)
	fs.sendWith(t, all, wire.EventBatchHeader{BaseOffset: 40, SkippedBefore: 2, Timestamps: []uint64{t0, t0 + 5}, Publisher: "svc-orders"},
		[]byte("a"), []byte("b"))
	fs.sendWith(t, wire.FlagEventBatchOffsets, wire.EventBatchHeader{BaseOffset: 42}, []byte("c"))
	skipped := uint64(1)
	if err := writeMsg(fs.es, &wire.EventBatch{Namespace: "ns", Stream: "s", Payloads: [][]byte{[]byte("d")},
		BaseOffset: ptr(uint64(44)), SkippedBefore: &skipped}); err != nil {
		t.Fatal(err)
	}

	a, b, cc, d := next(t, sub), next(t, sub), next(t, sub), next(t, sub)
	if a.Offset != 40 || !a.HasOffset || a.SkippedBefore != 2 || a.Publisher != "svc-orders" ||
		a.TimestampMicros != t0 || !a.Timestamp.Equal(time.UnixMicro(int64(t0))) {
		t.Fatalf("first event %+v", a)
	}
	if b.Offset != 41 || b.SkippedBefore != 0 || b.Publisher != "svc-orders" || b.TimestampMicros != t0+5 {
		t.Fatalf("second event %+v", b)
	}
	if cc.Offset != 42 || cc.Publisher != "" || !cc.Timestamp.IsZero() || cc.TimestampMicros != 0 {
		t.Fatalf("third event %+v", cc)
	}
	if d.Offset != 44 || d.SkippedBefore != 1 || string(d.Payload) != "d" {
		t.Fatalf("JSON event %+v", d)
	}
}

func TestLaggedAfterQueuedEvents(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	sub, fs := subscribeFake(t, c, fb)
	fs.send(t, 10, []byte("x"), []byte("y"))
	fs.lag(t, 12)
	for _, want := range []uint64{10, 11} {
		if ev := next(t, sub); ev.Offset != want {
			t.Fatalf("got offset %d, want %d", ev.Offset, want)
		}
	}
	err := nextErr(t, sub)
	var lagged *SubscriptionLagged
	if !errors.As(err, &lagged) || lagged.ResumeFrom != 12 || lagged.SubscriptionID != fs.id {
		t.Fatalf("got %T %v", err, err)
	}
	if _, err := sub.Next(context.Background()); !errors.As(err, &lagged) {
		t.Fatalf("a second Next: %v", err)
	}
}

// testLog is a durable shard with offsets 10..19 (offset 15 holds no
// record), one record per second from t0.
func testLog() []wire.StreamRecord {
	var recs []wire.StreamRecord
	for off := uint64(10); off < 20; off++ {
		if off == 15 {
			continue
		}
		recs = append(recs, wire.StreamRecord{Offset: off, Payload: fmt.Appendf(nil, "r%d", off),
			TimestampMicros: 1_000_000 * off, Publisher: "p"})
	}
	return recs
}

func TestReadPagesToTheEnd(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, features: durableFeatures})
	fb.setLog("ns", "s", testLog())
	c := connect(t, fb)
	if !c.SupportsRead() || !c.SupportsOffsetForTime() {
		t.Fatal("features not seen")
	}
	ctx := context.Background()
	end := uint64(18)
	var got []uint64
	pages := 0
	for from := uint64(10); from < end; {
		page, err := c.Read(ctx, "ns", "s", 2, from, &end, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) == 0 {
			break
		}
		pages++
		for _, r := range page.Records {
			if string(r.Payload) != fmt.Sprintf("r%d", r.Offset) || r.Publisher != "p" ||
				!r.Timestamp.Equal(time.UnixMicro(int64(1_000_000*r.Offset))) {
				t.Fatalf("record %+v", r)
			}
			got = append(got, r.Offset)
		}
		from = page.NextOffset
	}
	if fmt.Sprint(got) != "[10 11 12 13 14 16 17]" || pages != 3 {
		t.Fatalf("read %v in %d pages", got, pages)
	}
	reqs := fb.readRequests()
	if reqs[0].Shard != 2 || reqs[0].End == nil || *reqs[0].End != 18 || reqs[0].MaxRecords != 3 || reqs[0].TenantID != "acme" {
		t.Fatalf("request %+v", reqs[0])
	}
	// Without an end it reads what is committed; an empty page at the tail.
	page, err := c.Read(ctx, "ns", "s", 0, 20, nil, 0)
	if err != nil || len(page.Records) != 0 || page.NextOffset != 20 {
		t.Fatalf("tail page %+v %v", page, err)
	}
}

func TestReadCursorErrors(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, features: durableFeatures})
	fb.setLog("ns", "s", testLog())
	c := connect(t, fb)
	_, err := c.Read(context.Background(), "ns", "s", 0, 3, nil, 0)
	var ce *SubscribeCursorError
	if !errors.As(err, &ce) || !ce.TooOld || ce.Requested != 3 || ce.Available != 10 {
		t.Fatalf("got %T %v", err, err)
	}
	_, err = c.Read(context.Background(), "ns", "s", 0, 50, nil, 0)
	if !errors.As(err, &ce) || ce.TooOld || ce.Available != 20 {
		t.Fatalf("got %T %v", err, err)
	}
	// The stream stays usable for the next request.
	if _, err := c.Read(context.Background(), "ns", "s", 0, 10, nil, 1); err != nil {
		t.Fatal(err)
	}
}

func TestReadAndOffsetForTimeNeedTheFeature(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags})
	c := connect(t, fb)
	if c.SupportsRead() || c.SupportsOffsetForTime() {
		t.Fatal("features reported that the broker did not advertise")
	}
	_, err := c.Read(context.Background(), "ns", "s", 0, 0, nil, 0)
	if be := asBroker(t, err); be.Code != wire.CodeUnsupported || !wasNotSent(err) {
		t.Fatalf("got %v", err)
	}
	_, _, err = c.OffsetForTime(context.Background(), "ns", "s", 0, time.Now())
	if be := asBroker(t, err); be.Code != wire.CodeUnsupported {
		t.Fatalf("got %v", err)
	}
	if len(fb.readRequests()) != 0 {
		t.Fatal("a read was sent")
	}
}

func TestOffsetForTime(t *testing.T) {
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags, features: durableFeatures})
	fb.setLog("ns", "s", testLog())
	c := connect(t, fb)
	ctx := context.Background()
	for _, tc := range []struct {
		at   time.Time
		want uint64
		ok   bool
	}{
		{time.UnixMicro(12_000_000), 12, true},
		{time.UnixMicro(14_500_000), 16, true},
		{time.UnixMicro(0), 10, true},
		{time.UnixMicro(25_000_000), 0, false},
	} {
		off, ok, err := c.OffsetForTime(ctx, "ns", "s", 0, tc.at)
		if err != nil || off != tc.want || ok != tc.ok {
			t.Fatalf("at %v: %d %v %v, want %d %v", tc.at.UnixMicro(), off, ok, err, tc.want, tc.ok)
		}
	}
}

func TestPublishAckCarriesOffset(t *testing.T) {
	for _, m := range []struct {
		name  string
		flags uint16
	}{{"binary", binaryFlags}, {"json", wire.FlagBinaryPublishAckOffset}} {
		t.Run(m.name, func(t *testing.T) {
			fb := newFakeBroker(t, fakeOpts{flags: m.flags})
			c := connect(t, fb)
			ctx := context.Background()
			res, err := c.PublishBatchAcked(ctx, "ns", "s", [][]byte{[]byte("a"), []byte("b")}, AckPerBatch)
			if err != nil || !res.HasOffset || res.Offset != 0 {
				t.Fatalf("first batch %+v %v", res, err)
			}
			res, err = c.PublishAcked(ctx, "ns", "s", []byte("c"), AckPerMessage)
			if err != nil || !res.HasOffset || res.Offset != 2 {
				t.Fatalf("second publish %+v %v", res, err)
			}
			res, err = c.PublishKeyedAcked(ctx, "ns", "s", []byte("k"), []byte("d"), AckPerMessage)
			if err != nil || !res.HasOffset || res.Offset != 3 {
				t.Fatalf("keyed publish %+v %v", res, err)
			}
			if res, err := c.PublishAcked(ctx, "ns", "s", []byte("e"), AckNone); err != nil || res.HasOffset {
				t.Fatalf("fire-and-forget %+v %v", res, err)
			}
		})
	}
	fb := newFakeBroker(t, fakeOpts{flags: binaryFlags &^ wire.FlagBinaryPublishAckOffset})
	c := connect(t, fb)
	if res, err := c.PublishAcked(context.Background(), "ns", "s", []byte("a"), AckPerMessage); err != nil || res.HasOffset {
		t.Fatalf("without the flag %+v %v", res, err)
	}
}

func ptr[T any](v T) *T { return &v }
