package wire

// Messages that tell a client how a stream or cache is cut into shards:
// stream_shards (FEATURE_STREAM_SHARDS), cache_shards
// (FEATURE_CACHE_SHARDS), and publish_width (FEATURE_PUBLISH_WIDTH), by
// which a publisher declares the width it routed its keyed batches by. See
// docs/protocol.md, "Cluster messages".

// ShardRouting is how a stream maps routing keys onto its shards.
type ShardRouting string

// Routings. The spec sends routing only for jump-hash streams; absent
// (RoutingModulo, the empty string) means modulo.
const (
	RoutingModulo   ShardRouting = ""
	RoutingJumpHash ShardRouting = "jump_hash"
)

// StreamShards asks how many shards a stream was placed with and how it
// maps keys onto them.
type StreamShards struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
	RequestID uint64 `json:"request_id"`
}

// StreamShardsView answers stream_shards. Shards 0 means the broker knows
// nothing of the stream; it never means one shard.
type StreamShardsView struct {
	Shards    uint32       `json:"shards"`
	RequestID uint64       `json:"request_id"`
	Routing   ShardRouting `json:"routing,omitempty"`
}

// CacheShards asks how many shards a cache was placed with.
type CacheShards struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Cache     string `json:"cache"`
	RequestID uint64 `json:"request_id"`
}

// CacheShardsView answers cache_shards. Shards 0 means the broker knows
// nothing of the cache.
type CacheShardsView struct {
	Shards    uint32 `json:"shards"`
	RequestID uint64 `json:"request_id"`
}

// PublishWidth declares, on a publish stream, the shard count (Width) the
// client routed the keyed batches that follow to Stream by. It is not
// answered; a later keyed batch to that stream is refused with stale_width
// (NewStaleWidth) when the stream does not have Width shards. A new
// publish_width for the same stream replaces the old one. The shape is a
// Felix pin: the spec names the message but not its members.
type PublishWidth struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
	Width     uint32 `json:"width"`
}

// Validate checks the required fields of a stream_shards.
func (m *StreamShards) Validate() error {
	return requireNames("stream_shards", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"stream", m.Stream})
}

// Validate refuses a routing the receiver cannot compute: a client that
// routes keys itself must use the stream's own mapping or none.
func (m *StreamShardsView) Validate() error {
	switch m.Routing {
	case RoutingModulo, RoutingJumpHash:
		return nil
	}
	return NewError(CodeInvalidRequest, "stream_shards_view: unknown routing %q", m.Routing)
}

// Validate checks the required fields of a cache_shards.
func (m *CacheShards) Validate() error {
	return requireNames("cache_shards", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"cache", m.Cache})
}

// Validate checks the required fields of a publish_width; a width of 0
// routes nothing and is refused.
func (m *PublishWidth) Validate() error {
	if err := requireNames("publish_width", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"stream", m.Stream}); err != nil {
		return err
	}
	if m.Width == 0 {
		return NewError(CodeInvalidRequest, "publish_width: width must be at least 1")
	}
	return nil
}

// Detail keys of stale_width and shard-out-of-range refusals.
const (
	// DetailWidth is the width a refused keyed batch was routed by.
	DetailWidth = "width"
	// DetailShards is the shard count the stream has.
	DetailShards = "shards"
)

// ReasonShardOutOfRange: a request named a shard the stream or cache does
// not have (code invalid_request). It is refused, never wrapped onto
// another shard.
const ReasonShardOutOfRange = "shard_out_of_range"

// NewStaleWidth refuses a keyed batch to stream routed by width shards
// when the stream has shards: code stale_width (retry), with both counts
// in the detail. Nothing of the batch was written.
func NewStaleWidth(stream string, width, shards uint32) *Error {
	return NewError(CodeStaleWidth, "keyed batch routed by %d shards: stream %s has %d", width, stream, shards).
		WithDetail(DetailWidth, width).WithDetail(DetailShards, shards)
}

// CheckShard returns nil when shard is below shards, and otherwise the
// invalid_request refusal (reason shard_out_of_range, the count under
// shards) for kind ("stream" or "cache") name.
func CheckShard(kind, name string, shard, shards uint32) error {
	if shard < shards {
		return nil
	}
	return NewError(CodeInvalidRequest, "shard %d out of range: %s %s has %d shards", shard, kind, name, shards).
		WithDetail(DetailReason, ReasonShardOutOfRange).WithDetail(DetailShards, shards)
}

func (*StreamShards) MessageType() string     { return "stream_shards" }
func (*StreamShardsView) MessageType() string { return "stream_shards_view" }
func (*CacheShards) MessageType() string      { return "cache_shards" }
func (*CacheShardsView) MessageType() string  { return "cache_shards_view" }
func (*PublishWidth) MessageType() string     { return "publish_width" }
