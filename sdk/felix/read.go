package felix

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/felixmq/felix/wire"
)

// Record is one record of a durable stream returned by Read.
type Record struct {
	Offset uint64
	// Payload is owned by the caller.
	Payload []byte
	// Timestamp is when the broker appended the record; zero when the
	// broker did not say. TimestampMicros is the same in microseconds
	// since the Unix epoch.
	Timestamp       time.Time
	TimestampMicros uint64
	// Publisher is the principal stored with the record, or "".
	Publisher string
}

// ReadPage is one page of a Read. Continue from NextOffset, not from the
// last record's offset plus one: offsets that hold no record are passed
// over. A page may be short or empty; empty means nothing more is
// committed in the range yet.
type ReadPage struct {
	Records    []Record
	NextOffset uint64
}

// SupportsRead reports whether the broker advertised FEATURE_STREAM_READ.
func (c *Client) SupportsRead() bool { return c.serverFeatures&wire.FeatureStreamRead != 0 }

// SupportsOffsetForTime reports whether the broker advertised
// FEATURE_RECORD_TIMESTAMPS, which offset_for_time needs.
func (c *Client) SupportsOffsetForTime() bool {
	return c.serverFeatures&wire.FeatureRecordTimestamps != 0
}

// Read returns one page of the committed records of shard of a durable
// stream, starting at from and stopping before end (nil: up to what is
// committed). maxRecords caps the page (0 means the broker's cap, which
// also bounds its bytes). No subscription is opened. A from that
// retention already removed, or that is past the tail, fails with
// *SubscribeCursorError; a broker that does not serve reads fails with a
// *BrokerError of code unsupported, without sending anything.
func (c *Client) Read(ctx context.Context, namespace, stream string, shard uint32, from uint64, end *uint64, maxRecords int) (*ReadPage, error) {
	if !c.SupportsRead() {
		return nil, notSent(unsupported("FEATURE_STREAM_READ, so it does not serve reads (stream_read)"))
	}
	if maxRecords < 0 {
		return nil, invalidArg("negative maxRecords %d", maxRecords)
	}
	m := &wire.StreamRead{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream, Shard: shard,
		From: from, End: end, MaxRecords: uint32(min(uint64(maxRecords), math.MaxUint32))}
	res, err := c.requestCall(ctx, m, &m.RequestID)
	if err != nil {
		return nil, err
	}
	recs, ok := res.msg.(*wire.StreamRecords)
	if !ok {
		return nil, fmt.Errorf("felix: stream_read answered with %s", typeOf(res.msg))
	}
	return readPage(recs), nil
}

func readPage(m *wire.StreamRecords) *ReadPage {
	page := &ReadPage{NextOffset: m.NextOffset, Records: make([]Record, len(m.Records))}
	for i, r := range m.Records {
		rec := Record{Offset: r.Offset, Payload: nonNil(r.Payload), TimestampMicros: r.TimestampMicros, Publisher: r.Publisher}
		if r.TimestampMicros != 0 {
			rec.Timestamp = time.UnixMicro(int64(r.TimestampMicros))
		}
		page.Records[i] = rec
	}
	return page
}

// OffsetForTime returns the first offset of shard appended at or after t,
// or the oldest retained offset when t is older than every record. ok is
// false when nothing that recent is committed yet (subscribe at Latest
// then). A broker without FEATURE_RECORD_TIMESTAMPS fails it with a
// *BrokerError of code unsupported, without sending anything.
func (c *Client) OffsetForTime(ctx context.Context, namespace, stream string, shard uint32, t time.Time) (offset uint64, ok bool, err error) {
	if !c.SupportsOffsetForTime() {
		return 0, false, notSent(unsupported("FEATURE_RECORD_TIMESTAMPS, so it does not serve offset_for_time"))
	}
	m := &wire.OffsetForTime{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream, Shard: shard,
		AtMicros: timeMicros(t)}
	res, err := c.requestCall(ctx, m, &m.RequestID)
	if err != nil {
		return 0, false, err
	}
	v, isValue := res.msg.(*wire.OffsetValue)
	if !isValue {
		return 0, false, fmt.Errorf("felix: offset_for_time answered with %s", typeOf(res.msg))
	}
	offset, ok = maybe(v.Offset)
	return offset, ok, nil
}

// timeMicros converts t to microseconds since the epoch, clamping times
// before the epoch to 0.
func timeMicros(t time.Time) uint64 {
	us := t.UnixMicro()
	if us < 0 {
		return 0
	}
	return uint64(us)
}

func typeOf(m wire.Message) string {
	if m == nil {
		return "an answer of the wrong kind"
	}
	return fmt.Sprintf("%q", m.MessageType())
}
