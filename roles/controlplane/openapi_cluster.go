package controlplane

// withClusterSchemas adds the broker registry's and the feature gate's
// schemas to s.
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
		"state":             obj{"type": "string", "enum": []string{"live", "draining", "down", "deregistered"}},
		"registrations":     integer(1, 0, "registrations under this node id"),
		"registered_at_ms":  integer(0, 0, "Unix ms of the last registration (the control plane's clock)"),
		"last_heartbeat_ms": integer(0, 0, "Unix ms of the last heartbeat or registration"),
		"down_at_ms":        integer(0, 0, "Unix ms when the leader marked it down"),
		"shards_owned":      integer(0, 0, "shards placed on it (0 until placement exists)"),
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
	})
	s["FleetFeatures"] = object([]string{"features"}, obj{"features": obj{"type": "array", "items": object([]string{"name", "supported", "finalized"}, obj{
		"name":      str("feature name, e.g. majority_ack"),
		"supported": obj{"type": "boolean", "description": "a broker is live and every live or draining broker reports it"},
		"finalized": obj{"type": "boolean", "description": "on for good; brokers without it are refused at registration"},
		"missing":   strs("live or draining brokers that lack it"),
	})}})
	s["FinalizeRequest"] = object(nil, obj{"features": strs("features to finalize; none: every supported one")})
	return s
}
