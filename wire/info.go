package wire

// Stream information and cache key listing: Felix extensions that the
// spec does not name (docs/protocol.md documents them). Both are asked on
// a control stream and answered there; a broker that does not know them
// answers unsupported (FEATURE_UNSUPPORTED) like any unknown request.

// StreamInfo asks for a stream's per-shard information on this broker.
// It needs stream.subscribe on the stream.
type StreamInfo struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
	RequestID uint64 `json:"request_id"`
}

// StreamInfoOK answers stream_info: one entry per shard, in shard order,
// as of AtMicros (the broker's clock, microseconds since the epoch). The
// counters are cumulative since the broker created the stream, so a
// client gets rates from two answers.
type StreamInfoOK struct {
	Durable   bool            `json:"durable"`
	Shards    []ShardInfoJSON `json:"shards"`
	AtMicros  uint64          `json:"at_micros"`
	RequestID uint64          `json:"request_id"`
}

// ShardInfoJSON is one shard of a stream_info_ok.
type ShardInfoJSON struct {
	Shard uint32 `json:"shard"`
	// FirstOffset and LastOffset are the oldest and newest offsets a
	// durable shard holds; both absent when it holds no record, and on an
	// in-memory shard. NextOffset is the offset the next record gets.
	FirstOffset *uint64 `json:"first_offset,omitempty"`
	LastOffset  *uint64 `json:"last_offset,omitempty"`
	NextOffset  uint64  `json:"next_offset"`
	// Records and Bytes: what a durable shard's log holds (absent on an
	// in-memory shard).
	Records *uint64 `json:"records,omitempty"`
	Bytes   *int64  `json:"bytes,omitempty"`
	// Subscribers registered on this broker.
	Subscribers int `json:"subscribers"`
	// PublishedTotal counts the records published to the shard (its next
	// offset); DeliveredTotal the events this broker wrote to the shard's
	// subscribers since its first subscriber of the current run came.
	PublishedTotal uint64 `json:"published_total"`
	DeliveredTotal uint64 `json:"delivered_total"`
	// Unavailable says why a durable shard's log did not open.
	Unavailable string `json:"unavailable,omitempty"`
}

// CacheKeys asks for one page of a cache's keys, in byte order: those
// starting with Prefix and sorting after After, at most Limit of them
// (the broker's default when 0, never more than MaxCacheKeysLimit). It
// needs cache.read on the cache.
type CacheKeys struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Cache     string `json:"cache"`
	Prefix    string `json:"prefix,omitempty"`
	After     string `json:"after,omitempty"`
	Limit     int    `json:"limit,omitempty"`
	RequestID uint64 `json:"request_id"`
}

// MaxCacheKeysLimit is the largest page cache_keys returns.
const MaxCacheKeysLimit = 1000

// CacheKeysPage answers cache_keys. Next, present when more keys remain,
// is the After of the next page (the page's last key).
type CacheKeysPage struct {
	Keys      []string `json:"keys"`
	Next      *string  `json:"next,omitempty"`
	RequestID uint64   `json:"request_id"`
}

func (*StreamInfo) MessageType() string    { return "stream_info" }
func (*StreamInfoOK) MessageType() string  { return "stream_info_ok" }
func (*CacheKeys) MessageType() string     { return "cache_keys" }
func (*CacheKeysPage) MessageType() string { return "cache_keys_page" }

// newInfoMessage returns an empty stream-info or cache-keys message of
// type t, or nil.
func newInfoMessage(t string) Message {
	switch t {
	case "stream_info":
		return &StreamInfo{}
	case "stream_info_ok":
		return &StreamInfoOK{}
	case "cache_keys":
		return &CacheKeys{}
	case "cache_keys_page":
		return &CacheKeysPage{}
	}
	return newClusterMessage(t)
}

// Validate checks the required fields of a stream_info.
func (m *StreamInfo) Validate() error {
	return requireNames("stream_info", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"stream", m.Stream})
}

// Validate checks the required fields and the limit of a cache_keys.
func (m *CacheKeys) Validate() error {
	if err := requireNames("cache_keys", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"cache", m.Cache}); err != nil {
		return err
	}
	if m.Limit < 0 || m.Limit > MaxCacheKeysLimit {
		return NewError(CodeInvalidRequest, "cache_keys: limit %d is not in 0..%d", m.Limit, MaxCacheKeysLimit)
	}
	return nil
}
