package wire

// Messages of the keyed cache watch (FEATURE_CACHE_WATCH and
// FEATURE_CACHE_WATCH_RETAINED).
//
// A client sends cache_watch on its control stream. The broker answers
// cache_watch_ok (or an error naming the request), then opens an event
// stream whose first frame is an event_stream_hello carrying the watch id
// as its subscription_id. On that stream come, in order:
//
//   - with a retained start, or a resume the broker can no longer serve
//     from its history (a resnapshot), one cache_change per matching key
//     holding its current value (retained: true), then one
//     cache_watch_state;
//   - with a resume it can serve, the cache_change records from the
//     requested offset on;
//   - then every applied change to a matching key, in the cache's write
//     order.
//
// Offsets increase by one with every write to the cache, so a key or
// prefix watch sees gaps; they are comparable only within one cache. A
// watch that falls behind ends with cache_watch_lagged naming the offset
// to watch again from; one refused later (revoked, cache deleted) ends
// with an error frame.

// CacheWatch asks to watch one key of a cache, or with Prefix every key
// starting with Key (an empty Key then watches the whole cache).
// FromOffset resumes after a disconnect: the first change delivered is the
// first at or after it. Retained starts with each matching key's current
// value. The two are mutually exclusive. WatchID, when set, is the id the
// broker uses for the watch's event stream; otherwise it picks one.
type CacheWatch struct {
	TenantID   string  `json:"tenant_id"`
	Namespace  string  `json:"namespace"`
	Cache      string  `json:"cache"`
	Key        string  `json:"key"`
	Prefix     bool    `json:"prefix,omitempty"`
	FromOffset *uint64 `json:"from_offset,omitempty"`
	Retained   bool    `json:"retained,omitempty"`
	WatchID    *uint64 `json:"watch_id,omitempty"`
	// Shard, on a prefix watch, names the one shard of a multi-shard
	// cache the watch reads (a Felix pin: the spec says a prefix watch
	// reads one shard, not how it is named). A key watch reads its key's
	// shard and needs none. A prefix watch without one reads every shard,
	// which only a broker that owns them all can serve.
	Shard     *uint32 `json:"shard,omitempty"`
	RequestID uint64  `json:"request_id"`
}

// CacheWatchOK accepts a cache_watch. Offset is the offset the next write
// to the cache will take. Resnapshot is true when a FromOffset was older
// than the broker's history, so the watch starts with current values
// instead (the client must replace, not merge, what it held for the
// watched keys).
type CacheWatchOK struct {
	RequestID  uint64 `json:"request_id"`
	WatchID    uint64 `json:"watch_id"`
	Offset     uint64 `json:"offset"`
	Resnapshot bool   `json:"resnapshot,omitempty"`
}

// CacheChangeOp is what a change did to its key.
type CacheChangeOp string

// Change kinds.
const (
	CacheOpPut    CacheChangeOp = "put"
	CacheOpDelete CacheChangeOp = "delete"
	// CacheOpExpire: the entry's time to live ran out and the broker
	// removed it.
	CacheOpExpire CacheChangeOp = "expire"
)

// CacheChange is one change on a watch's event stream. Value is the new
// value of a put (present, possibly empty) and null otherwise;
// ExpiresAtMs is a put's absolute expiry in Unix milliseconds. Retained
// marks a current value sent before cache_watch_state; its Offset is the
// write that set it.
type CacheChange struct {
	Offset      uint64        `json:"offset"`
	Op          CacheChangeOp `json:"op"`
	Key         string        `json:"key"`
	Value       []byte        `json:"value"`
	ExpiresAtMs *uint64       `json:"expires_at_ms,omitempty"`
	Retained    bool          `json:"retained,omitempty"`
}

// CacheWatchState ends the current values of a retained start or a
// resnapshot: Count values were sent, and every change from Offset on
// follows.
type CacheWatchState struct {
	Offset uint64 `json:"offset"`
	Count  uint64 `json:"count"`
}

// CacheWatchLagged is the last frame of a watch that fell behind: its
// queue on the broker passed its bound. ResumeFrom is the first offset it
// was not sent; a cache_watch from there misses nothing.
type CacheWatchLagged struct {
	WatchID    uint64 `json:"watch_id"`
	ResumeFrom uint64 `json:"resume_from"`
}

func (*CacheWatch) MessageType() string       { return "cache_watch" }
func (*CacheWatchOK) MessageType() string     { return "cache_watch_ok" }
func (*CacheChange) MessageType() string      { return "cache_change" }
func (*CacheWatchState) MessageType() string  { return "cache_watch_state" }
func (*CacheWatchLagged) MessageType() string { return "cache_watch_lagged" }

// newCacheWatchMessage returns an empty cache-watch message of type t, or
// nil.
func newCacheWatchMessage(t string) Message {
	switch t {
	case "cache_watch":
		return &CacheWatch{}
	case "cache_watch_ok":
		return &CacheWatchOK{}
	case "cache_change":
		return &CacheChange{}
	case "cache_watch_state":
		return &CacheWatchState{}
	case "cache_watch_lagged":
		return &CacheWatchLagged{}
	}
	return newInfoMessage(t)
}

// Validate checks the required fields of a cache_watch.
func (m *CacheWatch) Validate() error {
	if err := requireNames("cache_watch", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"cache", m.Cache}); err != nil {
		return err
	}
	if !m.Prefix && m.Key == "" {
		return NewError(CodeInvalidRequest, "cache_watch: missing field key (set prefix to watch a prefix)")
	}
	if m.Retained && m.FromOffset != nil {
		return NewError(CodeInvalidRequest, "cache_watch: retained and from_offset are mutually exclusive")
	}
	return nil
}

// Validate checks that a cache_change names a key and a known operation,
// and that only a put carries a value.
func (m *CacheChange) Validate() error {
	switch m.Op {
	case CacheOpPut:
		if m.Value == nil {
			return NewError(CodeInvalidRequest, "cache_change: put without a value")
		}
	case CacheOpDelete, CacheOpExpire:
		if m.Value != nil {
			return NewError(CodeInvalidRequest, "cache_change: %s with a value", m.Op)
		}
	default:
		return NewError(CodeInvalidRequest, "cache_change: unknown op %q", m.Op)
	}
	return nil
}
