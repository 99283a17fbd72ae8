package controlplane

// withClusterSchemas adds the broker registry's, the feature gate's and
// the placement's schemas to s.
func withClusterSchemas(s obj) obj {
	strs := func(desc string) obj {
		return obj{"type": "array", "items": obj{"type": "string"}, "description": desc}
	}
	reg := obj{
		"node_id":      name("the broker's node id (FELIX_NODE_ID)"),
		"client_addrs": strs("addresses clients reach the broker at, preferred first"),
		"peer_addr":    str("the broker-to-broker listener (empty until peer links exist)"),
		"zone":         name("failure domain (FELIX_NODE_ZONE)"),
		"region":       name("region (FELIX_NODE_REGION)"),
		"features":     strs("fleet features the broker implements"),
		"storage_id":   name("random id of the broker's data directory, new when the directory is new"),
	}
	record := obj{
		"state":              obj{"type": "string", "enum": []string{"live", "draining", "down", "deregistered"}},
		"registrations":      integer(1, 0, "registrations under this node id"),
		"registered_at_ms":   integer(0, 0, "Unix ms of the last registration (the control plane's clock)"),
		"last_heartbeat_ms":  integer(0, 0, "Unix ms of the last heartbeat or registration"),
		"down_at_ms":         integer(0, 0, "Unix ms when the leader marked it down"),
		"shards_owned":       integer(0, 0, "shards it owns in the placement"),
		"finalized_features": strs("answers to a registration or heartbeat only: the fleet features finalized now"),
		"expiry_timeout_ms":  integer(0, 0, "answers to a registration or heartbeat only: FELIX_NODE_EXPIRY_TIMEOUT_MS; the broker serves its shards only while its last answered heartbeat was sent less than this ago"),
	}
	for k, v := range reg {
		record[k] = v
	}
	s["BrokerRegistration"] = object([]string{"node_id", "client_addrs", "features", "storage_id"}, reg)
	s["Broker"] = object([]string{"node_id", "client_addrs", "features", "storage_id", "state", "registrations", "registered_at_ms", "last_heartbeat_ms", "shards_owned"}, record)
	s["BrokerList"] = list("Broker")
	s["BrokerHeartbeat"] = object([]string{"storage_id"}, obj{
		"node_id":    name("must match the path when given"),
		"storage_id": name("the storage identity the broker registered with"),
		"suspects": obj{"type": "array", "description": "leaders of Quorum shards this broker follows that it has not heard from for FELIX_LEADER_SUSPECT_AFTER_MS (at most 4096)",
			"items": object([]string{"kind", "tenant_id", "namespace", "name", "shard", "generation", "leader"}, obj{
				"kind": obj{"type": "string", "enum": []string{"stream", "cache"}}, "tenant_id": name("tenant"), "namespace": name("namespace"),
				"name": name("the stream's name"), "shard": integer(0, 65535, "shard number"), "generation": integer(1, 0, "the leader's generation"),
				"leader": name("the silent leader's node id")})},
		"positions": obj{"type": "array", "description": "how far this broker holds each durable shard it leads with followers or follows (at most 4096); the control plane keeps the latest, stamped with the storage identity the broker is registered with",
			"items": object([]string{"kind", "tenant_id", "namespace", "name", "shard", "generation", "durable"}, obj{
				"kind": obj{"type": "string", "enum": []string{"stream", "cache"}}, "tenant_id": name("tenant"), "namespace": name("namespace"),
				"name": name("the stream's name"), "shard": integer(0, 65535, "shard number"),
				"generation": integer(1, 0, "the generation the copy is held at: the broker's own as leader, the last shipping leader's as follower"),
				"leader":     obj{"type": "boolean", "description": "the broker leads the shard"},
				"durable":    integer(0, 0, "offset past the last record held durably"),
				"end":        integer(0, 0, "leader only: offset past its last record")})},
	})
	s["FleetFeatures"] = object([]string{"features"}, obj{"features": obj{"type": "array", "items": object([]string{"name", "supported", "finalized"}, obj{
		"name":      str("feature name, e.g. majority_ack"),
		"supported": obj{"type": "boolean", "description": "a broker is live and every live or draining broker reports it"},
		"finalized": obj{"type": "boolean", "description": "on for good; brokers without it are refused at registration"},
		"missing":   strs("live or draining brokers that lack it"),
	})}})
	shard := object([]string{"kind", "tenant_id", "namespace", "name", "shard", "generation"}, obj{
		"kind":        obj{"type": "string", "enum": []string{"stream", "cache"}},
		"tenant_id":   name("tenant"),
		"namespace":   name("namespace"),
		"name":        name("the stream's or cache's name"),
		"shard":       integer(0, 65535, "shard number"),
		"incarnation": str("the resource's incarnation the assignment is for"),
		"node_id":     name("the owner: the broker that serves the shard; absent when not_assigned"),
		"storage_id":  name("durable shards: the owner's storage identity when it was given the shard"),
		"generation":  integer(0, 0, "grows with every change of owner (cluster-wide counter); 0 while unowned"),
		"unavailable": obj{"type": "string", "enum": []string{"not_assigned", "owner_down", "storage_lost"}, "description": "why the shard is not served; absent while it is"},
		"consistency": str("leader or quorum, when placed"),
		"replicas": obj{"type": "array", "description": "followers of a durable shard whose stream has a replication factor above 1 (up to factor - 1; the owner is their leader)", "items": object([]string{"node_id"}, obj{
			"node_id": name("follower's node id"), "storage_id": name("follower's storage identity when it was chosen")})},
	})
	s["ShardAssignment"] = shard
	s["HandoffRequest"] = object([]string{"kind", "tenant_id", "namespace", "name", "shard", "generation", "from", "to"}, obj{
		"kind":       obj{"type": "string", "enum": []string{"stream"}},
		"tenant_id":  name("tenant"),
		"namespace":  name("namespace"),
		"name":       name("the stream's name"),
		"shard":      integer(0, 65535, "shard number"),
		"generation": integer(1, 0, "the generation the caller leads the shard at"),
		"from":       name("the caller: the shard's owner"),
		"to":         name("the follower to hand the shard to"),
	})
	s["Placement"] = object([]string{"kind", "tenant_id", "namespace", "name", "shards", "last_generation"}, obj{
		"kind":            obj{"type": "string", "enum": []string{"stream", "cache"}},
		"tenant_id":       name("tenant"),
		"namespace":       name("namespace"),
		"name":            name("the stream's or cache's name"),
		"shards":          obj{"type": "array", "items": shard, "description": "one per shard, in shard order"},
		"last_generation": integer(0, 0, "the highest generation ever handed out"),
	})
	s["PlacementAbandon"] = object([]string{"before", "after", "kept", "lost"}, obj{
		"dry_run": obj{"type": "boolean", "description": "nothing was changed: before and after say what would be"},
		"before":  shard,
		"after":   shard,
		"kept":    strs("live brokers whose copies the shard keeps, the new leader first (it takes the furthest copy before it serves)"),
		"lost":    strs("down brokers whose copies are given up: records only they held are lost"),
	})
	s["ClusterView"] = object([]string{"tag", "placement_revision", "brokers", "assignments"}, obj{
		"cluster_id":         str("the cluster's id"),
		"tag":                str("changes whenever a broker's node id, state, addresses or storage identity, or the placement, changes; send it back as known"),
		"placement_revision": integer(0, 0, "grows with every applied placement change"),
		"brokers":            obj{"type": "array", "items": ref("Broker"), "description": "the registry, deregistered brokers left out (shards_owned not counted)"},
		"assignments":        obj{"type": "array", "items": shard, "description": "every shard of every stream and cache, by kind, tenant, namespace, name, shard"},
	})
	copyState := obj{"type": "string", "enum": []string{"live", "draining", "down", "gone"},
		"description": "the state of the copy's broker; gone: no longer registered, or registered with another storage identity"}
	copyPosition := object([]string{"generation", "durable", "report_age_ms"}, obj{
		"generation":    integer(0, 0, "the generation the copy was held at"),
		"durable":       integer(0, 0, "offset past the last record held durably"),
		"end":           integer(0, 0, "the leader's only: offset past its last record"),
		"report_age_ms": integer(0, 0, "how long before the answer the report arrived"),
	})
	s["Replication"] = object([]string{"shards"}, obj{"shards": obj{"type": "array", "description": "by kind, tenant, namespace, name, shard",
		"items": object([]string{"kind", "tenant_id", "namespace", "name", "shard", "generation", "leader", "desired", "current", "under_replicated", "replicas"}, obj{
			"kind":             obj{"type": "string", "enum": []string{"stream", "cache"}},
			"tenant_id":        name("tenant"),
			"namespace":        name("namespace"),
			"name":             name("the stream's name"),
			"shard":            integer(0, 65535, "shard number"),
			"generation":       integer(0, 0, "the assignment's generation"),
			"leader":           str("the owner's node id; empty while not assigned"),
			"leader_state":     copyState,
			"desired":          integer(1, 0, "the replication factor"),
			"current":          integer(0, 0, "copies, the leader's included, on live or draining brokers under the storage identity they were placed on"),
			"under_replicated": obj{"type": "boolean", "description": "current < desired"},
			"leader_position":  copyPosition,
			"replicas": obj{"type": "array", "description": "the followers, in placement order", "items": object([]string{"node_id", "state"}, obj{
				"node_id": name("follower's node id"), "storage_id": name("follower's storage identity when it was chosen"), "state": copyState,
				"position": copyPosition,
				"lag":      integer(0, 0, "the leader's reported end less this copy's reported durable offset, when both reported the assignment's generation")})},
		})}})
	s["ClusterViewChange"] = object([]string{"tag"}, obj{"tag": str("the view's tag now")})
	s["FinalizeRequest"] = object(nil, obj{"features": strs("features to finalize; none: every supported one")})
	return s
}
