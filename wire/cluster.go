package wire

// Cluster types: the broker registry and the fleet-wide feature gate the
// control plane keeps in Raft, as its REST API, the broker and the CLI
// exchange them (JSON; see docs/protocol.md, "Broker registry").

// BrokerState is where a registered broker stands.
type BrokerState string

// Broker states. A broker is live from its registration until the
// control plane's leader marks it down (no heartbeat within the expiry
// time) or an operator deregisters it; a down broker is live again when
// it registers again. Draining is named by the spec for a broker handing
// its shards away; nothing sets it yet.
const (
	BrokerLive         BrokerState = "live"
	BrokerDraining     BrokerState = "draining"
	BrokerDown         BrokerState = "down"
	BrokerDeregistered BrokerState = "deregistered"
)

// Serving reports whether a broker in state s counts for the feature gate
// (live or draining).
func (s BrokerState) Serving() bool { return s == BrokerLive || s == BrokerDraining }

// Fleet features: the cross-broker behaviours the fleet-wide feature gate
// turns on, with the spec's names.
const (
	FleetJumpHashRouting    = "jump_hash_routing"
	FleetGenerationStart    = "generation_start"
	FleetMajorityAck        = "majority_ack"
	FleetLeaseFreeReads     = "lease_free_reads"
	FleetFencedCaches       = "fenced_caches"
	FleetAtomicCommit       = "atomic_commit"
	FleetGroupCursorDeps    = "group_cursor_dependencies"
	FleetStreamIncarnations = "stream_incarnations"
	FleetCacheIncarnations  = "cache_incarnations"
	FleetPublisherPrincipal = "publisher_principal"
)

// FleetFeatures lists every fleet feature this release knows, in the
// order the control plane reports them.
var FleetFeatures = []string{
	FleetJumpHashRouting, FleetGenerationStart, FleetMajorityAck, FleetLeaseFreeReads,
	FleetFencedCaches, FleetAtomicCommit, FleetGroupCursorDeps, FleetStreamIncarnations,
	FleetCacheIncarnations, FleetPublisherPrincipal,
}

// KnownFleetFeature reports whether name is in FleetFeatures.
func KnownFleetFeature(name string) bool {
	for _, f := range FleetFeatures {
		if f == name {
			return true
		}
	}
	return false
}

// BrokerRegistration is what a broker sends when it registers
// (POST /v1/brokers).
type BrokerRegistration struct {
	// NodeID names the broker in the cluster (FELIX_NODE_ID), e.g. "broker-1".
	NodeID string `json:"node_id"`
	// ClientAddrs are the addresses clients reach it at, the first preferred.
	ClientAddrs []string `json:"client_addrs"`
	// PeerAddr is its broker-to-broker listener ("" until peer links exist).
	PeerAddr string `json:"peer_addr,omitempty"`
	// TCPAddr is its TLS-over-TCP client listener when that is not on the
	// first client address's host and port ("" when it is, or when it
	// has none): a Felix-Go field.
	TCPAddr string `json:"tcp_addr,omitempty"`
	// Zone is its failure domain (FELIX_NODE_ZONE), "" when unset.
	Zone string `json:"zone,omitempty"`
	// Region is its region (FELIX_NODE_REGION), "" when unset.
	Region string `json:"region,omitempty"`
	// Features are the fleet features it implements.
	Features []string `json:"features"`
	// StorageID identifies its data directory: random, written when the
	// directory is new, so a wiped or replaced volume comes back under a
	// new identity.
	StorageID string `json:"storage_id"`
	// CrashedStorageID, when set, is the storage identity this broker
	// replaced with StorageID at its start because its machine crashed
	// while it ran under an fsync policy that may lose the unsynced tail
	// of every log (docs/storage.md, "The run marker"): its copies under
	// that identity may be short, not gone. "" when it kept its identity
	// or its directory is new. The control plane keeps it on the broker's
	// record while it registers under the same StorageID.
	CrashedStorageID string `json:"crashed_storage_id,omitempty"`
}

// BrokerHeartbeat is what a broker sends every
// FELIX_NODE_HEARTBEAT_INTERVAL_MS (POST /v1/brokers/{node_id}/heartbeat).
type BrokerHeartbeat struct {
	NodeID    string `json:"node_id"`
	StorageID string `json:"storage_id"`
	// Suspects names the leaders of shards this broker follows that it
	// has not heard from for FELIX_LEADER_SUSPECT_AFTER_MS: the Quorum
	// fast path promotes a follower once a majority of a shard's replica
	// set suspects its leader. At most MaxSuspects.
	Suspects []ShardSuspect `json:"suspects,omitempty"`
	// Positions are how far this broker durably holds the log of each
	// durable shard it leads or follows that has followers: what a
	// `leader`-consistency shard's failover decides from (see
	// docs/placement.md, "Promotion"). Sent on every heartbeat; the
	// control plane keeps the latest. At most MaxPositions.
	Positions []ShardPosition `json:"positions,omitempty"`
}

// MaxSuspects bounds BrokerHeartbeat.Suspects.
const MaxSuspects = 4096

// MaxPositions bounds BrokerHeartbeat.Positions: a broker holding more
// copies reports the first MaxPositions (by shard) and the others' shards
// cannot fail over to it until it holds fewer.
const MaxPositions = 4096

// ShardPosition is how far one broker holds one durable shard's log, as
// its leader or as a follower.
type ShardPosition struct {
	Kind      string `json:"kind"`
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Shard     uint32 `json:"shard"`
	// Generation is the generation the copy is held at: the broker's own
	// as leader, the generation of the leader that last shipped to it as
	// a follower.
	Generation uint64 `json:"generation"`
	// Leader is set when the broker leads the shard.
	Leader bool `json:"leader,omitempty"`
	// Durable is the offset past the last record the copy holds durably
	// (under the broker's fsync policy).
	Durable uint64 `json:"durable"`
	// End, on a leader's position only, is the offset past its last
	// record, durable or not.
	End uint64 `json:"end,omitempty"`
}

// PositionReport is a broker's last report of positions as the control
// plane keeps it: stamped with the storage identity the broker was
// registered with when the report arrived, and the time it arrived (Unix
// ms, the control-plane member's clock).
type PositionReport struct {
	StorageID string          `json:"storage_id"`
	AtMs      int64           `json:"at_ms"`
	Positions []ShardPosition `json:"positions,omitempty"`
}

// ShardSuspect is one silent leader a follower reports: the shard, and
// the leader and generation it last knew.
type ShardSuspect struct {
	Kind       string `json:"kind"`
	TenantID   string `json:"tenant_id"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Shard      uint32 `json:"shard"`
	Generation uint64 `json:"generation"`
	Leader     string `json:"leader"`
}

// Broker is one record of the broker registry (GET /v1/brokers). Times
// are Unix milliseconds, stamped by the control-plane member that took
// the call (never by the state machine).
type Broker struct {
	BrokerRegistration
	State BrokerState `json:"state"`
	// Registrations counts the broker's registrations under this node id.
	Registrations uint64 `json:"registrations"`
	// RegisteredAtMs is when it last registered.
	RegisteredAtMs int64 `json:"registered_at_ms"`
	// LastHeartbeatMs is when its last heartbeat (or registration) arrived.
	LastHeartbeatMs int64 `json:"last_heartbeat_ms"`
	// DownAtMs is when the leader marked it down (state down only).
	DownAtMs int64 `json:"down_at_ms,omitempty"`
	// Suspects is what its last heartbeat suspected (BrokerHeartbeat).
	Suspects []ShardSuspect `json:"suspects,omitempty"`
	// ShardsOwned is how many shards are placed on it (counted from the
	// placement when the registry is read; not stored).
	ShardsOwned int `json:"shards_owned"`
	// FinalizedFeatures, in the answer to a registration or a heartbeat
	// only, are the fleet features finalized at that moment: how a broker
	// learns the gate.
	FinalizedFeatures []string `json:"finalized_features,omitempty"`
	// ExpiryTimeoutMs, in the answer to a registration or a heartbeat
	// only, is FELIX_NODE_EXPIRY_TIMEOUT_MS: a broker whose last answered
	// heartbeat was sent longer ago than this stops serving its shards
	// (the control plane waits this long plus the regrant margin before it
	// marks the broker down and places its shards elsewhere). 0 means the
	// control plane does not say, and the broker does not fence itself.
	ExpiryTimeoutMs int64 `json:"expiry_timeout_ms,omitempty"`
}

// FleetFeature is one feature of GET /v1/fleet/features.
type FleetFeature struct {
	Name string `json:"name"`
	// Supported: at least one broker is live or draining and every such
	// broker reports the feature.
	Supported bool `json:"supported"`
	// Finalized: the feature is on; brokers without it are refused at
	// registration. It never goes back.
	Finalized bool `json:"finalized"`
	// Missing names the live or draining brokers that lack it.
	Missing []string `json:"missing,omitempty"`
}

// FleetFeaturesView is the body of GET /v1/fleet/features and of a
// finalize's answer.
type FleetFeaturesView struct {
	Features []FleetFeature `json:"features"`
}

// FinalizeRequest is the body of POST /v1/fleet/features/finalize: the
// features to turn on; none means every supported feature.
type FinalizeRequest struct {
	Features []string `json:"features,omitempty"`
}
