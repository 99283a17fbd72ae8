package felix

import (
	"context"
	"fmt"

	"github.com/felixmq/felix/wire"
)

// Broker is one broker of a cluster's topology: its node id and the
// address a client reaches it at.
type Broker = wire.TopologyBroker

// ShardOwner is one shard's owner as a broker reported it (see
// wire.ShardOwner): NodeID and Addr, or Unavailable with the reason
// nobody serves it now. An entry with neither is the answer of a broker
// not in a cluster: it serves the shard itself.
type ShardOwner = wire.ShardOwner

// ShardKind says whether ShardOwners asks about a stream or a cache.
type ShardKind = wire.ShardKind

// Shard kinds.
const (
	KindStream = wire.ShardKindStream
	KindCache  = wire.ShardKindCache
)

// SupportsCluster reports whether the broker advertised every cluster
// message a ClusterClient asks: topology, stream_shards, cache_shards and
// shard_owners.
func (c *Client) SupportsCluster() bool {
	const all = wire.FeatureTopology | wire.FeatureStreamShards | wire.FeatureCacheShards | wire.FeatureShardOwners
	return c.serverFeatures&all == all
}

// needFeature fails, sending nothing, when the broker did not advertise
// bit: a request it does not know is never sent.
func (c *Client) needFeature(bit uint64, what string) error {
	if c.serverFeatures&bit == 0 {
		return notSent(unsupported(what))
	}
	return nil
}

// Topology asks the broker which brokers a client may connect to. An
// empty list is the normal answer of a single node. A broker that did not
// advertise FEATURE_TOPOLOGY gets nothing: the call fails with a
// *BrokerError of code unsupported.
func (c *Client) Topology(ctx context.Context) ([]Broker, error) {
	if err := c.needFeature(wire.FeatureTopology, "topology"); err != nil {
		return nil, err
	}
	var id uint64
	m := &wire.Topology{RequestID: &id}
	res, err := c.requestCall(ctx, m, &id)
	if err != nil {
		return nil, err
	}
	ans, ok := res.msg.(*wire.TopologyView)
	if !ok {
		return nil, fmt.Errorf("felix: topology answered with %s", typeOf(res.msg))
	}
	if err := ans.Validate(); err != nil {
		return nil, fmt.Errorf("felix: %w", err)
	}
	return ans.Brokers, nil
}

// StreamShards asks how many shards namespace/stream has; 0 means the
// broker knows nothing of it. It needs FEATURE_STREAM_SHARDS (see
// Topology).
func (c *Client) StreamShards(ctx context.Context, namespace, stream string) (uint32, error) {
	if err := c.needFeature(wire.FeatureStreamShards, "stream_shards"); err != nil {
		return 0, err
	}
	m := &wire.StreamShards{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream}
	res, err := c.requestCall(ctx, m, &m.RequestID)
	if err != nil {
		return 0, err
	}
	ans, ok := res.msg.(*wire.StreamShardsView)
	if !ok {
		return 0, fmt.Errorf("felix: stream_shards answered with %s", typeOf(res.msg))
	}
	return ans.Shards, nil
}

// CacheShards asks how many shards namespace/cache has; 0 means the
// broker knows nothing of it. It needs FEATURE_CACHE_SHARDS.
func (c *Client) CacheShards(ctx context.Context, namespace, cache string) (uint32, error) {
	if err := c.needFeature(wire.FeatureCacheShards, "cache_shards"); err != nil {
		return 0, err
	}
	m := &wire.CacheShards{TenantID: c.cfg.Tenant, Namespace: namespace, Cache: cache}
	res, err := c.requestCall(ctx, m, &m.RequestID)
	if err != nil {
		return 0, err
	}
	ans, ok := res.msg.(*wire.CacheShardsView)
	if !ok {
		return 0, fmt.Errorf("felix: cache_shards answered with %s", typeOf(res.msg))
	}
	return ans.Shards, nil
}

// ShardOwners asks which broker owns each shard of the stream or cache
// name: one entry per shard, in shard order. It needs
// FEATURE_SHARD_OWNERS.
func (c *Client) ShardOwners(ctx context.Context, namespace, name string, kind ShardKind) ([]ShardOwner, error) {
	if err := c.needFeature(wire.FeatureShardOwners, "shard_owners"); err != nil {
		return nil, err
	}
	m := &wire.ShardOwners{TenantID: c.cfg.Tenant, Namespace: namespace, Name: name, Kind: kind}
	res, err := c.requestCall(ctx, m, &m.RequestID)
	if err != nil {
		return nil, err
	}
	ans, ok := res.msg.(*wire.ShardOwnersView)
	if !ok {
		return nil, fmt.Errorf("felix: shard_owners answered with %s", typeOf(res.msg))
	}
	if err := ans.Validate(); err != nil {
		return nil, fmt.Errorf("felix: %w", err)
	}
	return ans.Owners, nil
}
