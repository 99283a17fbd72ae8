package broker

import (
	"fmt"
	"testing"

	"github.com/felixmq/felix/wire"
)

const durableFlags = wire.FlagBinaryEventBatchShared | wire.FlagEventBatchOffsets | wire.FlagEventBatchTimestamps |
	wire.FlagEventBatchPublisher | wire.FlagBinaryPublishAckOffset

const durableFeatures = allFeatures | wire.FeatureSubscriptionLagged | wire.FeatureStreamRead | wire.FeatureRecordTimestamps

// startDurable starts a broker with storage and a durable stream "log".
func startDurable(t *testing.T, cfg Config, extra ...wire.StreamSpec) *env {
	t.Helper()
	cfg.Durable.StorageDir = t.TempDir()
	cfg.Durable.RecordPublishers = true
	return startEnv(t, cfg, append([]wire.StreamSpec{{Stream: "log", Durable: true}}, extra...)...)
}

// publishAcked publishes n numbered payloads, one acked batch each, from
// first on, and returns the offsets the acks carried.
func publishAcked(t *testing.T, s *tstream, stream string, first, n int) []uint64 {
	t.Helper()
	var offs []uint64
	for i := first; i < first+n; i++ {
		s.write(binPublish(stream, true, uint64(i+1), numbered(i)))
		m := s.recv()
		ok, isOK := m.(*wire.PublishOK)
		if !isOK || ok.RequestID != uint64(i+1) {
			t.Fatalf("publish %d not acked: %#v", i, m)
		}
		if ok.Offset == nil {
			t.Fatalf("publish_ok %d carries no offset", i)
		}
		offs = append(offs, *ok.Offset)
	}
	return offs
}

func TestDurableAckCarriesOffset(t *testing.T) {
	e := startDurable(t, testConfig())
	s := e.authed(e.dial(0), durableFlags, durableFeatures, "stream.publish:*")
	offs := publishAcked(t, s, "log", 0, 3)
	if fmt.Sprint(offs) != "[0 1 2]" {
		t.Fatalf("ack offsets %v", offs)
	}
	// A batch's ack names its first offset.
	s.write(binPublish("log", true, 99, numbered(3), numbered(4)))
	if ok := s.recv().(*wire.PublishOK); ok.Offset == nil || *ok.Offset != 3 {
		t.Fatalf("batch ack %#v", ok)
	}
}

func TestDurableSubscribeFromOffsetCarriesPositions(t *testing.T) {
	e := startDurable(t, testConfig())
	qc := e.dial(0)
	pub := e.authed(qc, durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, pub, "log", 0, 5)

	s := e.authed(qc, durableFlags, durableFeatures, "stream.subscribe:*")
	start := wire.StartPosition{Kind: wire.StartOffset, Offset: 1}
	sub, sd := e.subscribeWith(qc, s, &wire.Subscribe{TenantID: testTenant, Namespace: "prod", Stream: "log", Start: &start})
	if sd.StartOffset == nil || *sd.StartOffset != 1 || sd.LiveOffset == nil || *sd.LiveOffset != 5 {
		t.Fatalf("subscribed %+v", sd)
	}
	publishAcked(t, pub, "log", 5, 2)
	next := uint64(1)
	for next < 7 {
		f := sub.frame()
		b, err := wire.ParseSharedEventBatch(f.Flags, f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if b.BaseOffset != next {
			t.Fatalf("batch at %d, want %d", b.BaseOffset, next)
		}
		for i, p := range b.Payloads {
			if string(p) != string(numbered(int(next)+i)) || b.Timestamps[i] == 0 || b.Publisher != "tester" {
				t.Fatalf("event %d: %q time %d publisher %q", next+uint64(i), p, b.Timestamps[i], b.Publisher)
			}
		}
		next += uint64(len(b.Payloads))
	}

	s2 := e.authed(qc, durableFlags, durableFeatures, "stream.subscribe:*")
	far := wire.StartPosition{Kind: wire.StartOffset, Offset: 99}
	s2.send(&wire.Subscribe{TenantID: testTenant, Namespace: "prod", Stream: "log", Start: &far})
	ce, ok := s2.recv().(*wire.SubscribeCursorError)
	if !ok || ce.Reason != wire.CursorInFuture || ce.Requested != 99 || ce.Available != 7 {
		t.Fatalf("subscribe past the tail: %#v", ce)
	}
}

func TestStreamReadAndOffsetForTime(t *testing.T) {
	e := startDurable(t, testConfig(), wire.StreamSpec{Stream: "mem"})
	qc := e.dial(0)
	pub := e.authed(qc, durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, pub, "log", 0, 10)

	r := e.authed(qc, durableFlags, durableFeatures, "stream.subscribe:*")
	end := uint64(8)
	var got []wire.StreamRecord
	for from := uint64(0); ; {
		r.send(&wire.StreamRead{TenantID: testTenant, Namespace: "prod", Stream: "log", From: from, End: &end, MaxRecords: 3, RequestID: 7})
		page, ok := r.recv().(*wire.StreamRecords)
		if !ok || page.RequestID != 7 || len(page.Records) > 3 {
			t.Fatalf("page %#v", page)
		}
		if len(page.Records) == 0 {
			break
		}
		got = append(got, page.Records...)
		from = page.NextOffset
	}
	if len(got) != 8 {
		t.Fatalf("read %d records of [0,8)", len(got))
	}
	for i, rec := range got {
		if rec.Offset != uint64(i) || string(rec.Payload) != string(numbered(i)) || rec.TimestampMicros == 0 || rec.Publisher != "tester" {
			t.Fatalf("record %d: %+v", i, rec)
		}
	}

	r.send(&wire.OffsetForTime{TenantID: testTenant, Namespace: "prod", Stream: "log", AtMicros: got[5].TimestampMicros, RequestID: 8})
	ov, ok := r.recv().(*wire.OffsetValue)
	if !ok || ov.Offset == nil || *ov.Offset > 5 || got[*ov.Offset].TimestampMicros != got[5].TimestampMicros {
		t.Fatalf("offset_for_time: %#v", ov)
	}
	r.send(&wire.OffsetForTime{TenantID: testTenant, Namespace: "prod", Stream: "log", AtMicros: got[7].TimestampMicros + 3_600_000_000, RequestID: 9})
	if ov := r.recv().(*wire.OffsetValue); ov.Offset != nil || ov.RequestID != 9 {
		t.Fatalf("a time after every record: %#v", ov)
	}

	r.send(&wire.StreamRead{TenantID: testTenant, Namespace: "prod", Stream: "log", From: 50, RequestID: 10})
	if ce, ok := r.recv().(*wire.SubscribeCursorError); !ok || ce.Reason != wire.CursorInFuture || ce.RequestID == nil || *ce.RequestID != 10 {
		t.Fatalf("read past the tail: %#v", ce)
	}
	r.send(&wire.StreamRead{TenantID: testTenant, Namespace: "prod", Stream: "mem", RequestID: 11})
	expectCode(t, r.recv(), wire.CodeInvalidRequest)

	denied := e.authed(qc, durableFlags, durableFeatures, "stream.publish:*")
	denied.send(&wire.StreamRead{TenantID: testTenant, Namespace: "prod", Stream: "log", RequestID: 12})
	expectCode(t, denied.recv(), wire.CodeForbidden)
}

func TestStreamReadUnsupportedWithoutStorage(t *testing.T) {
	e := startEnv(t, testConfig(), wire.StreamSpec{Stream: "log", Durable: true})
	s := e.authed(e.dial(0), durableFlags, durableFeatures, "stream.subscribe:*")
	s.send(&wire.StreamRead{TenantID: testTenant, Namespace: "prod", Stream: "log", RequestID: 3})
	u, ok := s.recv().(*wire.Unsupported)
	if !ok || u.RequestType != "stream_read" {
		t.Fatalf("stream_read without storage: %#v", u)
	}
}

func TestDurableSlowSubscriberGetsLagged(t *testing.T) {
	cfg := testConfig()
	cfg.Core.SubQueueCapacity = 2
	e := startDurable(t, cfg)
	pub := e.authed(e.dial(0), durableFlags, durableFeatures, "stream.publish:*")
	// A 4 KiB stream window: the writer stalls after a frame or so.
	qc := e.dial(4 << 10)
	s := e.authed(qc, durableFlags, durableFeatures, "stream.subscribe:*")
	sub, _ := e.subscribeWith(qc, s, &wire.Subscribe{TenantID: testTenant, Namespace: "prod", Stream: "log"})
	big := make([]byte, 3000)
	for i := range 20 {
		pub.write(binPublish("log", true, uint64(i+1), big))
		if _, ok := pub.recv().(*wire.PublishOK); !ok {
			t.Fatal("publish refused")
		}
	}
	next := uint64(0)
	for {
		f := sub.frame()
		if f.Flags != 0 {
			b, err := wire.ParseSharedEventBatch(f.Flags, f.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if b.BaseOffset != next {
				t.Fatalf("batch at %d before the lag, want %d", b.BaseOffset, next)
			}
			next += uint64(len(b.Payloads))
			continue
		}
		m, err := wire.ParseMessage(f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		lag, ok := m.(*wire.SubscriptionLagged)
		if !ok || lag.SubscriptionID != sub.id || lag.ResumeFrom != next || next >= 20 {
			t.Fatalf("last frame %#v after offset %d", m, next)
		}
		break
	}
	if _, err := sub.next(); err == nil {
		t.Fatal("frames after subscription_lagged")
	}
}
