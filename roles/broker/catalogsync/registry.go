package catalogsync

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/felixmq/felix/wire"
)

// The HTTP source is also the broker's way into the control plane's
// broker registry (docs/protocol.md, "Broker registry"), with the same
// token and the same failover between members; a broker finds these
// methods on the Source it was given.

// RegisterBroker registers a broker: POST /v1/brokers.
func (h *httpSource) RegisterBroker(ctx context.Context, reg wire.BrokerRegistration) (wire.Broker, error) {
	return h.postBroker(ctx, "/v1/brokers", reg)
}

// HeartbeatBroker sends a heartbeat: POST /v1/brokers/{node_id}/heartbeat.
func (h *httpSource) HeartbeatBroker(ctx context.Context, hb wire.BrokerHeartbeat) (wire.Broker, error) {
	return h.postBroker(ctx, "/v1/brokers/"+url.PathEscape(hb.NodeID)+"/heartbeat", hb)
}

func (h *httpSource) postBroker(ctx context.Context, path string, body any) (wire.Broker, error) {
	var br wire.Broker
	raw, err := json.Marshal(body)
	if err != nil {
		return br, err
	}
	b, err := h.call(ctx, http.MethodPost, path, raw)
	if err != nil {
		return br, err
	}
	if err := json.Unmarshal(b, &br); err != nil {
		return br, fmt.Errorf("catalogsync: POST %s: decode the broker record: %w", path, err)
	}
	return br, nil
}

// HandOffShard asks for a planned handoff: POST /v1/placement/handoff.
// The answer is the shard's new assignment; a refusal comes back as the
// control plane's error (code conflict, retry class fatal).
func (h *httpSource) HandOffShard(ctx context.Context, req wire.HandoffRequest) (wire.ShardAssignment, error) {
	var a wire.ShardAssignment
	raw, err := json.Marshal(req)
	if err != nil {
		return a, err
	}
	b, err := h.call(ctx, http.MethodPost, "/v1/placement/handoff", raw)
	if err != nil {
		return a, err
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return a, fmt.Errorf("catalogsync: POST /v1/placement/handoff: decode the assignment: %w", err)
	}
	return a, nil
}
