package broker

import (
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

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

	queueFullByTenant *tenantCounters
}

func newServerMetrics() *serverMetrics {
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
		queueFullByTenant: &tenantCounters{set: s, name: "felix_tenant_publish_queue_full_total", m: map[string]*metrics.Counter{}},
	}
}

// watchIngress exposes depth, read when scraped, as the ingress queue
// depth.
func (m *serverMetrics) watchIngress(depth func() int) {
	m.set.NewGauge("felix_broker_ingress_queue_depth", func() float64 { return float64(depth()) })
}

// WriteMetrics writes this broker's own metrics (its core's and its
// network service's) in Prometheus text; HTTPHandler's /metrics adds the
// process-wide ones.
func (s *Server) WriteMetrics(w io.Writer) {
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
