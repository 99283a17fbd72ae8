package wire

// Messages of durable streams: reading a range, finding an offset by time,
// and the two ways a subscription on a durable stream is told about its
// position (a refused start, and the end after its broker queue dropped).

// CursorReason says why a start offset cannot be served.
type CursorReason string

// Cursor reasons.
const (
	// CursorTooOld: retention removed the requested offset.
	CursorTooOld CursorReason = "too_old"
	// CursorInFuture: the requested offset is past the shard's tail.
	CursorInFuture CursorReason = "in_future"
)

// SubscribeCursorError answers a subscribe or a stream_read whose start
// the broker cannot serve. Available is the nearest offset that would
// have worked: the oldest retained for too_old, the tail for in_future.
// RequestID is set when it answers a stream_read.
type SubscribeCursorError struct {
	Reason    CursorReason `json:"reason"`
	Requested uint64       `json:"requested"`
	Available uint64       `json:"available"`
	Message   string       `json:"message,omitempty"`
	RequestID *uint64      `json:"request_id,omitempty"`
}

// SubscriptionLagged is the last frame on the event stream of a
// durable-stream subscription whose broker queue dropped records;
// ResumeFrom is the first offset the queue dropped. Sent only to a client
// that negotiated FEATURE_SUBSCRIPTION_LAGGED.
type SubscriptionLagged struct {
	SubscriptionID uint64 `json:"subscription_id"`
	ResumeFrom     uint64 `json:"resume_from"`
}

// StreamRead asks for the committed records of one shard from From, up to
// End (exclusive; absent means up to what is committed), at most
// MaxRecords (0 means the broker's cap). Gated by FEATURE_STREAM_READ.
type StreamRead struct {
	TenantID   string  `json:"tenant_id"`
	Namespace  string  `json:"namespace"`
	Stream     string  `json:"stream"`
	Shard      uint32  `json:"shard"`
	From       uint64  `json:"from"`
	End        *uint64 `json:"end,omitempty"`
	MaxRecords uint32  `json:"max_records,omitempty"`
	RequestID  uint64  `json:"request_id"`
}

// StreamRecord is one record of a stream_records page.
type StreamRecord struct {
	Offset          uint64 `json:"offset"`
	Payload         []byte `json:"payload"`
	TimestampMicros uint64 `json:"timestamp_micros,omitempty"`
	Publisher       string `json:"publisher,omitempty"`
}

// StreamRecords is one page answering a stream_read. NextOffset is where
// the next page starts; the page may be short or empty.
type StreamRecords struct {
	Records    []StreamRecord `json:"records"`
	NextOffset uint64         `json:"next_offset"`
	RequestID  uint64         `json:"request_id"`
}

// OffsetForTime asks for the first offset of a shard appended at or after
// AtMicros. Gated by FEATURE_RECORD_TIMESTAMPS.
type OffsetForTime struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
	Shard     uint32 `json:"shard"`
	AtMicros  uint64 `json:"at_micros"`
	RequestID uint64 `json:"request_id"`
}

// OffsetValue answers offset_for_time; Offset is absent when nothing that
// recent is committed yet.
type OffsetValue struct {
	Offset    *uint64 `json:"offset,omitempty"`
	RequestID uint64  `json:"request_id"`
}

func (*SubscribeCursorError) MessageType() string { return "subscribe_cursor_error" }
func (*SubscriptionLagged) MessageType() string   { return "subscription_lagged" }
func (*StreamRead) MessageType() string           { return "stream_read" }
func (*StreamRecords) MessageType() string        { return "stream_records" }
func (*OffsetForTime) MessageType() string        { return "offset_for_time" }
func (*OffsetValue) MessageType() string          { return "offset_value" }

// newDurableMessage returns an empty durable-stream message of type t, or
// nil.
func newDurableMessage(t string) Message {
	switch t {
	case "subscribe_cursor_error":
		return &SubscribeCursorError{}
	case "subscription_lagged":
		return &SubscriptionLagged{}
	case "stream_read":
		return &StreamRead{}
	case "stream_records":
		return &StreamRecords{}
	case "offset_for_time":
		return &OffsetForTime{}
	case "offset_value":
		return &OffsetValue{}
	}
	return newCacheWatchMessage(t)
}

// Validate checks the required fields of a stream_read.
func (m *StreamRead) Validate() error {
	if err := requireNames("stream_read", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"stream", m.Stream}); err != nil {
		return err
	}
	if m.End != nil && *m.End < m.From {
		return NewError(CodeInvalidRequest, "stream_read: end %d is before from %d", *m.End, m.From)
	}
	return nil
}

// Validate checks the required fields of an offset_for_time.
func (m *OffsetForTime) Validate() error {
	return requireNames("offset_for_time", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"stream", m.Stream})
}

// Error makes a SubscribeCursorError usable as an error.
func (m *SubscribeCursorError) Error() string {
	if m.Message != "" {
		return m.Message
	}
	return "subscribe_cursor_error: " + string(m.Reason)
}
