package controlplane

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/internal/metricdoc"
)

// controlPlaneHelp is the HELP text of the control plane's metric
// families (the broker's /metrics writes them when both run in one
// process).
var controlPlaneHelp = map[string]string{
	"felix_controlplane_requests_total":         "REST API requests answered, by route pattern and status code.",
	"felix_controlplane_raft_reproposals_total": "Catalog writes proposed again because a leader change left their outcome unknown (each applies once).",
	"felix_controlplane_token_exchanges_total":  "Token exchanges (an identity provider's token for a Felix token), by result: ok or the error code.",
	"felix_controlplane_token_refreshes_total":  "Token refreshes, by result: ok, replay (a reused refresh token) or the error code.",
	"felix_shards_under_replicated":             "Durable shards with fewer live copies (leader and followers on live or draining brokers under the storage identity placed on) than their replication factor, as of the last placement pass; 0 on members that do not lead the control plane.",
}

func init() { metricdoc.Describe(controlPlaneHelp) }

// httpMetrics counts API requests by route pattern and status code. The
// route label is the registered pattern, never the raw path, so the label
// set is bounded by the route table times the status codes in use.
type httpMetrics struct {
	counters sync.Map // "route\x00code" -> *metrics.Counter
}

func newHTTPMetrics() *httpMetrics { return &httpMetrics{} }

func (m *httpMetrics) count(route string, code int) {
	key := route + "\x00" + strconv.Itoa(code)
	if c, ok := m.counters.Load(key); ok {
		c.(*metrics.Counter).Inc()
		return
	}
	name := fmt.Sprintf(`felix_controlplane_requests_total{route=%q,code="%d"}`, route, code)
	c, _ := m.counters.LoadOrStore(key, metrics.GetOrCreateCounter(name))
	c.(*metrics.Counter).Inc()
}

// reproposals counts writes proposed again because a leader change or a
// cut hand-over left their outcome unknown (the catalog applies each once).
var reproposals = metrics.NewCounter("felix_controlplane_raft_reproposals_total")

// placementMetrics are the placement loop's gauges, in a set of their own
// registered while the loop runs, so several control planes can share a
// process (tests).
type placementMetrics struct {
	set *metrics.Set
	// underReplicated is felix_shards_under_replicated: set by each pass
	// on the leader, 0 on other members, so a sum over members counts
	// each shard once.
	underReplicated *metrics.Gauge
}

func newPlacementMetrics() *placementMetrics {
	s := metrics.NewSet()
	m := &placementMetrics{set: s, underReplicated: s.NewGauge("felix_shards_under_replicated", nil)}
	metrics.RegisterSet(s)
	return m
}

// close unregisters the set.
func (m *placementMetrics) close() {
	if m != nil {
		metrics.UnregisterSet(m.set, true)
	}
}
