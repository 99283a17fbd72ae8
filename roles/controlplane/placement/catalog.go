package placement

import "github.com/felixmq/felix/wire"

// StreamResource is the Resource placement sees for a catalog stream.
func StreamResource(s wire.StreamSpec) Resource {
	return Resource{
		Key:               ResourceKey{Kind: KindStream, TenantID: s.TenantID, Namespace: s.Namespace, Name: s.Stream},
		Incarnation:       s.Incarnation,
		Shards:            s.Shards,
		Durable:           s.Durable,
		ReplicationFactor: max(s.ReplicationFactor, 1),
		Consistency:       consistencyOrLeader(s.Consistency),
	}
}

// CacheResource is the Resource placement sees for a catalog cache. A
// CacheSpec carries no durability, replication factor or consistency yet:
// caches are placed as in-memory, one copy, "leader", until it does
// (part 2, with the log-backed cache). Shards 0 counts as one shard.
func CacheResource(c wire.CacheSpec) Resource {
	return Resource{
		Key:               ResourceKey{Kind: KindCache, TenantID: c.TenantID, Namespace: c.Namespace, Name: c.Cache},
		Incarnation:       c.Incarnation,
		Shards:            c.Shards,
		ReplicationFactor: 1,
		Consistency:       "leader",
	}
}

// consistencyOrLeader is c, or "leader" (the catalog's default) when empty.
func consistencyOrLeader(c string) string {
	if c == "" {
		return "leader"
	}
	return c
}
