package broker

import (
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/internal/metricdoc"
)

// serverHelp is the HELP text of the network service's metric families.
var serverHelp = map[string]string{
	"felix_broker_connections":                   "QUIC connections open on this broker.",
	"felix_broker_fleet_feature_enabled":         "1 when the fleet-wide feature named by the label is finalized for the cluster, as this broker last heard from the control plane.",
	"felix_sub_active_connections":               "Connections with at least one subscription open.",
	"felix_broker_subscriptions":                 "Subscriptions open on this broker.",
	"felix_broker_out_ack_depth":                 "Publish acknowledgements queued for their connections' writers.",
	"felix_broker_ingress_queue_depth":           "Publish batches waiting in the ingress queue for a publish worker.",
	"felix_publish_messages_total":               "Messages accepted by publishes on this broker.",
	"felix_publish_bytes_total":                  "Bytes accepted by publishes on this broker, payloads with their per-message overhead.",
	"felix_delivered_messages_total":             "Messages written to subscribers by this broker.",
	"felix_broker_acked_publishes_dropped_total": "Publishes acknowledged on enqueue that then failed to be committed.",
	"felix_broker_auth_failures_total":           "Authentications refused (bad, expired or revoked token).",
	"felix_broker_connections_refused_total":     "Connections refused because their source already held the maximum number of connections.",
	"felix_broker_ingress_dropped_total":         "Fire-and-forget publishes dropped because the ingress queue was full.",
	"felix_broker_revoked_streams_total":         "QUIC streams ended because a revocation named their token or principal.",
	"felix_broker_cluster_views_applied_total":   "Changed cluster views this broker fetched from the control plane and routes by.",
	"felix_broker_cluster_view_errors_total":     "Cluster view fetches that failed (the broker routes by the last view it holds).",
	"felix_broker_cluster_view_wakeups_total":    "Cluster view changes a held watch announced before the next poll (the broker fetched the view at once).",
	"felix_broker_lease_held":                    "1 while this broker may serve the shards it owns: its last answered heartbeat was sent less than the control plane's expiry timeout ago (always 1 standalone).",
	"felix_tenant_publish_queue_full_total":      "Publishes that found the publish queue full (acked ones refused with overloaded, others dropped), by tenant (at most 1000 tenant labels, then other).",
}

// serverMetrics are one Server's metrics, kept in a set of its own (next
// to its core's, see core.Broker.Metrics) so that several brokers can
// live in one process without sharing counts. Neither set is registered
// globally: the Server's /metrics writes both.
type serverMetrics struct {
	set *metrics.Set

	connections    *metrics.Gauge
	subConnections *metrics.Gauge
	subscriptions  *metrics.Gauge
	outAckDepth    *metrics.Gauge

	publishMessages   *metrics.Counter
	publishBytes      *metrics.Counter
	deliveredMessages *metrics.Counter
	ackedDropped      *metrics.Counter
	authFailures      *metrics.Counter
	connsRefused      *metrics.Counter
	ingressDropped    *metrics.Counter
	revokedStreams    *metrics.Counter
	viewsApplied      *metrics.Counter
	viewErrors        *metrics.Counter
	viewWakeups       *metrics.Counter

	queueFullByTenant *tenantCounters

	// deliveries counts delivered events per shard, for stream_info.
	deliveries shardDeliveries
}

func newServerMetrics() *serverMetrics {
	metricdoc.Describe(serverHelp)
	s := metrics.NewSet()
	return &serverMetrics{
		set:               s,
		connections:       s.NewGauge("felix_broker_connections", nil),
		subConnections:    s.NewGauge("felix_sub_active_connections", nil),
		subscriptions:     s.NewGauge("felix_broker_subscriptions", nil),
		outAckDepth:       s.NewGauge("felix_broker_out_ack_depth", nil),
		publishMessages:   s.NewCounter("felix_publish_messages_total"),
		publishBytes:      s.NewCounter("felix_publish_bytes_total"),
		deliveredMessages: s.NewCounter("felix_delivered_messages_total"),
		ackedDropped:      s.NewCounter("felix_broker_acked_publishes_dropped_total"),
		authFailures:      s.NewCounter("felix_broker_auth_failures_total"),
		connsRefused:      s.NewCounter("felix_broker_connections_refused_total"),
		ingressDropped:    s.NewCounter("felix_broker_ingress_dropped_total"),
		revokedStreams:    s.NewCounter("felix_broker_revoked_streams_total"),
		viewsApplied:      s.NewCounter("felix_broker_cluster_views_applied_total"),
		viewErrors:        s.NewCounter("felix_broker_cluster_view_errors_total"),
		viewWakeups:       s.NewCounter("felix_broker_cluster_view_wakeups_total"),
		queueFullByTenant: &tenantCounters{set: s, name: "felix_tenant_publish_queue_full_total", m: map[string]*metrics.Counter{}},
	}
}

// watchIngress exposes depth, read when scraped, as the ingress queue
// depth.
func (m *serverMetrics) watchIngress(depth func() int) {
	m.set.NewGauge("felix_broker_ingress_queue_depth", func() float64 { return float64(depth()) })
}

// watchLease exposes held, read when scraped, as felix_broker_lease_held.
func (m *serverMetrics) watchLease(held func() bool) {
	m.set.NewGauge("felix_broker_lease_held", func() float64 {
		if held() {
			return 1
		}
		return 0
	})
}

// WriteMetrics writes this broker's own metrics (its core's and its
// network service's) in Prometheus text; HTTPHandler's /metrics adds the
// process-wide ones.
//
// The text carries "# HELP" and "# TYPE" lines for every family (see
// internal/metricdoc).
func (s *Server) WriteMetrics(w io.Writer) {
	metricdoc.Write(w, s.writeOwnMetrics)
}

func (s *Server) writeOwnMetrics(w io.Writer) {
	s.core.Metrics().WritePrometheus(w)
	s.metrics.set.WritePrometheus(w)
}

// maxTenantLabels bounds the tenant label values of per-tenant metrics;
// tenants past it share the value "other".
const maxTenantLabels = 1000

// tenantCounters hands out per-tenant counters with bounded cardinality.
type tenantCounters struct {
	set  *metrics.Set
	name string
	mu   sync.Mutex
	m    map[string]*metrics.Counter // Invariant: len(m) <= maxTenantLabels+1
}

// get returns the counter for tenant, or the shared "other" counter once
// maxTenantLabels distinct tenants have been seen.
func (t *tenantCounters) get(tenant string) *metrics.Counter {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.m[tenant]; ok {
		return c
	}
	label := tenant
	if len(t.m) >= maxTenantLabels {
		label = "other"
		if c, ok := t.m[label]; ok {
			return c
		}
	}
	c := t.set.GetOrCreateCounter(fmt.Sprintf("%s{tenant=%s}", t.name, strconv.Quote(label)))
	t.m[label] = c
	return c
}
