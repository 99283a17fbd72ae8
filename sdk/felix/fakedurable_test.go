package felix

import (
	"testing"

	"github.com/felixmq/felix/wire"
)

// The fake's durable side: one log per stream (shard 0) for stream_read
// and offset_for_time, and helpers that send what a durable stream's
// event stream carries.

// setLog replaces the records of ns/stream.
func (fb *fakeBroker) setLog(ns, stream string, recs []wire.StreamRecord) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if fb.logs == nil {
		fb.logs = map[string][]wire.StreamRecord{}
	}
	fb.logs[ns+"/"+stream] = recs
}

// readRequests returns the stream_read requests received so far.
func (fb *fakeBroker) readRequests() []wire.StreamRead {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return append([]wire.StreamRead(nil), fb.reads...)
}

// streamRead answers a page of the log, or a cursor error for a from
// outside [first, tail].
func (fb *fakeBroker) streamRead(m *wire.StreamRead) wire.Message {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	fb.reads = append(fb.reads, *m)
	recs := fb.logs[m.Namespace+"/"+m.Stream]
	first, tail := uint64(0), uint64(0)
	if len(recs) > 0 {
		first, tail = recs[0].Offset, recs[len(recs)-1].Offset+1
	}
	id := m.RequestID
	switch {
	case m.From < first:
		return &wire.SubscribeCursorError{Reason: wire.CursorTooOld, Requested: m.From, Available: first, RequestID: &id}
	case m.From > tail:
		return &wire.SubscribeCursorError{Reason: wire.CursorInFuture, Requested: m.From, Available: tail, RequestID: &id}
	}
	limit := int(m.MaxRecords)
	if limit == 0 {
		limit = max(fb.opts.readCap, 3)
	}
	out := &wire.StreamRecords{Records: []wire.StreamRecord{}, NextOffset: m.From, RequestID: id}
	for _, r := range recs {
		if r.Offset < m.From || (m.End != nil && r.Offset >= *m.End) || len(out.Records) == limit {
			continue
		}
		out.Records = append(out.Records, r)
		out.NextOffset = r.Offset + 1
	}
	return out
}

// offsetForTime answers the first record at or after the time.
func (fb *fakeBroker) offsetForTime(m *wire.OffsetForTime) wire.Message {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	for _, r := range fb.logs[m.Namespace+"/"+m.Stream] {
		if r.TimestampMicros >= m.AtMicros {
			off := r.Offset
			return &wire.OffsetValue{Offset: &off, RequestID: m.RequestID}
		}
	}
	return &wire.OffsetValue{RequestID: m.RequestID}
}

// sendWith writes one shared binary batch with the option flags given
// (FLAG_BINARY_EVENT_BATCH_SHARED is added).
func (s *fakeSub) sendWith(t testing.TB, flags uint16, h wire.EventBatchHeader, payloads ...[]byte) {
	t.Helper()
	frame := wire.AppendSharedEventBatchFrame(nil, flags|wire.FlagBinaryEventBatchShared, &h, payloads)
	if _, err := s.es.Write(frame); err != nil {
		t.Fatalf("fake send: %v", err)
	}
}

// lag ends the subscription the way a broker does after its queue
// dropped: subscription_lagged, then the end of the stream.
func (s *fakeSub) lag(t testing.TB, resumeFrom uint64) {
	t.Helper()
	if err := writeMsg(s.es, &wire.SubscriptionLagged{SubscriptionID: s.id, ResumeFrom: resumeFrom}); err != nil {
		t.Fatal(err)
	}
	_ = s.es.Close()
}

// durableAnswer answers a subscribe with a start like a durable stream
// whose log holds [first, tail): start and live offsets, or a cursor
// error.
func durableAnswer(first, tail uint64) func(m *wire.Subscribe) wire.Message {
	return func(m *wire.Subscribe) wire.Message {
		if m.Start == nil {
			return &wire.Subscribed{}
		}
		start := tail
		switch m.Start.Kind {
		case wire.StartEarliest:
			start = first
		case wire.StartOffset:
			start = m.Start.Offset
		}
		switch {
		case start < first:
			return &wire.SubscribeCursorError{Reason: wire.CursorTooOld, Requested: start, Available: first, Message: "retention"}
		case start > tail:
			return &wire.SubscribeCursorError{Reason: wire.CursorInFuture, Requested: start, Available: tail}
		}
		live := tail
		return &wire.Subscribed{StartOffset: &start, LiveOffset: &live}
	}
}
