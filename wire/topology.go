package wire

import (
	"encoding/json"
	"strconv"
)

// Messages a client uses to find its way around a cluster: which brokers
// it may connect to (topology, gated by FEATURE_TOPOLOGY) and the redirect
// to a shard's owner (not_leader, gated by FEATURE_REDIRECT). See
// docs/protocol.md, "Cluster messages".

// Topology asks which brokers a client may connect to. RequestID is a
// Felix pin the spec does not show: when set, the topology_view echoes it.
type Topology struct {
	RequestID *uint64 `json:"request_id,omitempty"`
}

// TopologyBroker is one broker of a topology_view.
type TopologyBroker struct {
	// NodeID names the broker in the cluster (FELIX_NODE_ID).
	NodeID string `json:"node_id"`
	// Addr is the host:port a client reaches it at.
	Addr string `json:"addr"`
	// TCPAddr is where a client reaches it over TLS on TCP, when that is
	// not Addr's host and port (a Felix-Go field; absent otherwise).
	TCPAddr string `json:"tcp_addr,omitempty"`
}

// TopologyView answers topology. An empty Brokers is not an error: the
// cluster has told the broker of no client-reachable address, the normal
// answer on a single node.
//
// Invariant: Brokers is never nil after ParseMessage, and is encoded as
// [] (never null) when empty.
type TopologyView struct {
	Brokers   []TopologyBroker `json:"brokers"`
	RequestID *uint64          `json:"request_id,omitempty"`
}

// MarshalJSON writes an empty Brokers as [], as the spec shows it.
func (m *TopologyView) MarshalJSON() ([]byte, error) {
	type plain TopologyView
	p := plain(*m)
	if p.Brokers == nil {
		p.Brokers = []TopologyBroker{}
	}
	return json.Marshal(&p)
}

// UnmarshalJSON reads an absent or null brokers as an empty list.
func (m *TopologyView) UnmarshalJSON(b []byte) error {
	type plain TopologyView
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if p.Brokers == nil {
		p.Brokers = []TopologyBroker{}
	}
	*m = TopologyView(p)
	return nil
}

// Validate checks that every broker of the view has a node id and an
// address, and that no node id is listed twice.
func (m *TopologyView) Validate() error {
	seen := make(map[string]struct{}, len(m.Brokers))
	for i, b := range m.Brokers {
		if b.NodeID == "" || b.Addr == "" {
			return NewError(CodeInvalidRequest, "topology_view: broker %d lacks node_id or addr", i)
		}
		if _, dup := seen[b.NodeID]; dup {
			return NewError(CodeInvalidRequest, "topology_view: node_id %q listed twice", b.NodeID)
		}
		seen[b.NodeID] = struct{}{}
	}
	return nil
}

// NotLeader refuses a request sent to a broker that does not own the
// shard, naming the broker that does and the generation of its
// ownership. It is sent only to a client that offered FEATURE_REDIRECT;
// every other client gets the ordinary error from Err. RequestID is set
// when it answers a request that carried one (a subscribe has none).
type NotLeader struct {
	NodeID     string  `json:"node_id"`
	Addr       string  `json:"addr"`
	Generation uint64  `json:"generation"`
	RequestID  *uint64 `json:"request_id,omitempty"`
}

// Detail keys of a not_leader error, which carry NotLeader's fields to a
// client that did not offer FEATURE_REDIRECT.
const (
	DetailNodeID     = "node_id"
	DetailAddr       = "addr"
	DetailGeneration = "generation"
)

// Validate checks that the redirect names a broker and its address.
func (m *NotLeader) Validate() error {
	return requireNames("not_leader", [2]string{"node_id", m.NodeID}, [2]string{"addr", m.Addr})
}

// Err returns the redirect as an ordinary error: code not_leader, retry
// class redirect, the owner in the detail (node_id, addr, generation).
func (m *NotLeader) Err() *Error {
	return NewError(CodeNotLeader, "this broker does not own the shard; %s at %s does (generation %d)", m.NodeID, m.Addr, m.Generation).
		WithDetail(DetailNodeID, m.NodeID).WithDetail(DetailAddr, m.Addr).WithDetail(DetailGeneration, m.Generation)
}

// Error makes a NotLeader usable as an error.
func (m *NotLeader) Error() string { return m.Err().Error() }

// NotLeaderFromError recovers the redirect from a not_leader error built
// by Err, locally or decoded from an error frame: ok is false unless e has
// code not_leader and its detail names a node id. A generation decoded
// from JSON is exact up to 2^53.
func NotLeaderFromError(e *Error) (nl *NotLeader, ok bool) {
	if e == nil || e.Code != CodeNotLeader {
		return nil, false
	}
	node, _ := e.Detail[DetailNodeID].(string)
	if node == "" {
		return nil, false
	}
	addr, _ := e.Detail[DetailAddr].(string)
	gen, _ := detailUint(e.Detail[DetailGeneration])
	return &NotLeader{NodeID: node, Addr: addr, Generation: gen}, true
}

// detailUint reads a non-negative integer of a detail in every form it
// can hold: Go integers when built locally, float64 or json.Number when
// decoded.
func detailUint(v any) (uint64, bool) {
	switch n := v.(type) {
	case uint64:
		return n, true
	case uint32:
		return uint64(n), true
	case int:
		return uint64(n), n >= 0
	case int64:
		return uint64(n), n >= 0
	case float64:
		if n < 0 || n >= 1<<64 || n != float64(uint64(n)) {
			return 0, false
		}
		return uint64(n), true
	case json.Number:
		u, err := strconv.ParseUint(string(n), 10, 64)
		return u, err == nil
	}
	return 0, false
}

func (*Topology) MessageType() string     { return "topology" }
func (*TopologyView) MessageType() string { return "topology_view" }
func (*NotLeader) MessageType() string    { return "not_leader" }
