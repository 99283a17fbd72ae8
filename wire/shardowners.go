package wire

import "encoding/json"

// Messages about who owns each shard: shard_owners (FEATURE_SHARD_OWNERS)
// and shard_moved, the last frame of an event stream whose shard moved
// (FEATURE_SHARD_MOVED). See docs/protocol.md, "Cluster messages".

// ShardKind says whether a shard_owners names a stream or a cache.
type ShardKind string

// Shard kinds.
const (
	ShardKindStream ShardKind = "stream"
	ShardKindCache  ShardKind = "cache"
)

// OwnerNotAssigned is the unavailable reason of a shard the control plane
// has placed on no broker yet. Clients tolerate reasons they do not know.
const OwnerNotAssigned = "not_assigned"

// ShardOwners asks which broker owns each shard of the stream or cache
// Name.
type ShardOwners struct {
	TenantID  string    `json:"tenant_id"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Kind      ShardKind `json:"kind"`
	RequestID uint64    `json:"request_id"`
}

// ShardOwner is one shard of a shard_owners_view: its owner and the
// generation of that ownership, or, when nobody can serve it now, no
// owner and the reason in Unavailable.
//
// Invariant: NodeID and Unavailable are never both set; Addr is set only
// with NodeID. An entry with neither NodeID nor Unavailable is the answer
// of a broker not in a cluster: it serves the shard itself.
type ShardOwner struct {
	Shard       uint32 `json:"shard"`
	NodeID      string `json:"node_id,omitempty"`
	Addr        string `json:"addr,omitempty"`
	Generation  uint64 `json:"generation"`
	Unavailable string `json:"unavailable,omitempty"`
}

// ShardOwnersView answers shard_owners: one entry per shard, in shard
// order from 0 (a broker not in a cluster answers one entry).
//
// Invariant: Owners is never nil after ParseMessage, and is encoded as []
// (never null) when empty.
type ShardOwnersView struct {
	RequestID uint64       `json:"request_id"`
	Owners    []ShardOwner `json:"owners"`
}

// MarshalJSON writes an empty Owners as [].
func (m *ShardOwnersView) MarshalJSON() ([]byte, error) {
	type plain ShardOwnersView
	p := plain(*m)
	if p.Owners == nil {
		p.Owners = []ShardOwner{}
	}
	return json.Marshal(&p)
}

// UnmarshalJSON reads an absent or null owners as an empty list.
func (m *ShardOwnersView) UnmarshalJSON(b []byte) error {
	type plain ShardOwnersView
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if p.Owners == nil {
		p.Owners = []ShardOwner{}
	}
	*m = ShardOwnersView(p)
	return nil
}

// ShardMoved is the last frame on the event stream of a subscription or a
// cache watch whose shard moved to another broker. The old owner sends it
// after everything it committed. SubscriptionID is the id of the stream's
// event_stream_hello (a watch's watch_id). NodeID and Addr name the new
// owner when the old one knows it; otherwise any broker redirects.
// Generation is the new ownership's. ResumeFrom, on a durable stream or a
// log-backed cache, is the first offset the new owner serves that this
// stream did not deliver: resume at max(last delivered + 1, ResumeFrom).
// The shape is a Felix pin: the spec names the message, not its members.
// Sent only to a client that offered FEATURE_SHARD_MOVED.
type ShardMoved struct {
	SubscriptionID uint64  `json:"subscription_id"`
	Shard          uint32  `json:"shard"`
	NodeID         string  `json:"node_id,omitempty"`
	Addr           string  `json:"addr,omitempty"`
	Generation     uint64  `json:"generation"`
	ResumeFrom     *uint64 `json:"resume_from,omitempty"`
}

// Validate checks the required fields and the kind of a shard_owners.
func (m *ShardOwners) Validate() error {
	if err := requireNames("shard_owners", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"name", m.Name}); err != nil {
		return err
	}
	switch m.Kind {
	case ShardKindStream, ShardKindCache:
		return nil
	case "":
		return NewError(CodeInvalidRequest, "shard_owners: missing field kind")
	}
	return NewError(CodeInvalidRequest, "shard_owners: kind %q is neither stream nor cache", m.Kind)
}

// Validate checks each owner's invariant and that the entries are the
// shards 0, 1, … in order.
func (m *ShardOwnersView) Validate() error {
	for i, o := range m.Owners {
		if uint64(o.Shard) != uint64(i) {
			return NewError(CodeInvalidRequest, "shard_owners_view: entry %d is for shard %d", i, o.Shard)
		}
		if err := o.validate(); err != nil {
			return err
		}
	}
	return nil
}

func (o *ShardOwner) validate() error {
	if o.NodeID != "" && o.Unavailable != "" {
		return NewError(CodeInvalidRequest, "shard_owners_view: shard %d has both node_id and unavailable", o.Shard)
	}
	if o.NodeID != "" && o.Addr == "" {
		return NewError(CodeInvalidRequest, "shard_owners_view: shard %d has node_id but no addr", o.Shard)
	}
	if o.NodeID == "" && o.Addr != "" {
		return NewError(CodeInvalidRequest, "shard_owners_view: shard %d has addr but no node_id", o.Shard)
	}
	return nil
}

// Validate checks that an address comes with the node id it belongs to.
func (m *ShardMoved) Validate() error {
	if m.NodeID == "" && m.Addr != "" {
		return NewError(CodeInvalidRequest, "shard_moved: addr without node_id")
	}
	return nil
}

func (*ShardOwners) MessageType() string     { return "shard_owners" }
func (*ShardOwnersView) MessageType() string { return "shard_owners_view" }
func (*ShardMoved) MessageType() string      { return "shard_moved" }

// newClusterMessage returns an empty cluster message of type t, or nil.
func newClusterMessage(t string) Message {
	switch t {
	case "topology":
		return &Topology{}
	case "topology_view":
		return &TopologyView{}
	case "not_leader":
		return &NotLeader{}
	case "stream_shards":
		return &StreamShards{}
	case "stream_shards_view":
		return &StreamShardsView{}
	case "cache_shards":
		return &CacheShards{}
	case "cache_shards_view":
		return &CacheShardsView{}
	case "shard_owners":
		return &ShardOwners{}
	case "shard_owners_view":
		return &ShardOwnersView{}
	case "shard_moved":
		return &ShardMoved{}
	case "publish_width":
		return &PublishWidth{}
	}
	return nil
}
