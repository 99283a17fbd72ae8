package broker

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// Process-wide metrics (VictoriaMetrics default set). Gauges that several
// Servers in one process share are kept with Inc/Dec; the ingress queue
// depth is summed over live servers when scraped.
var (
	connectionsGauge    = metrics.GetOrCreateGauge("felix_broker_connections", nil)
	subConnectionsGauge = metrics.GetOrCreateGauge("felix_sub_active_connections", nil)
	subscriptionsGauge  = metrics.GetOrCreateGauge("felix_broker_subscriptions", nil)
	outAckDepthGauge    = metrics.GetOrCreateGauge("felix_broker_out_ack_depth", nil)

	publishMessages   = metrics.GetOrCreateCounter("felix_publish_messages_total")
	publishBytes      = metrics.GetOrCreateCounter("felix_publish_bytes_total")
	deliveredMessages = metrics.GetOrCreateCounter("felix_delivered_messages_total")
	ackedDropped      = metrics.GetOrCreateCounter("felix_broker_acked_publishes_dropped_total")
	authFailures      = metrics.GetOrCreateCounter("felix_broker_auth_failures_total")
	connsRefused      = metrics.GetOrCreateCounter("felix_broker_connections_refused_total")
	ingressDropped    = metrics.GetOrCreateCounter("felix_broker_ingress_dropped_total")
	revokedStreams    = metrics.GetOrCreateCounter("felix_broker_revoked_streams_total")
)

// liveServers feeds felix_broker_ingress_queue_depth.
var liveServers = struct {
	sync.Mutex
	m map[*Server]struct{}
}{m: map[*Server]struct{}{}}

var ingressDepthOnce sync.Once

func registerLiveServer(s *Server) {
	ingressDepthOnce.Do(func() {
		metrics.GetOrCreateGauge("felix_broker_ingress_queue_depth", ingressDepth)
	})
	liveServers.Lock()
	liveServers.m[s] = struct{}{}
	liveServers.Unlock()
}

func unregisterLiveServer(s *Server) {
	liveServers.Lock()
	delete(liveServers.m, s)
	liveServers.Unlock()
}

func ingressDepth() float64 {
	liveServers.Lock()
	defer liveServers.Unlock()
	var n int
	for s := range liveServers.m {
		n += s.ingressDepth()
	}
	return float64(n)
}

// maxTenantLabels bounds the tenant label values of per-tenant metrics;
// tenants past it share the value "other".
const maxTenantLabels = 1000

// tenantCounters hands out per-tenant counters with bounded cardinality.
type tenantCounters struct {
	name string
	mu   sync.Mutex
	m    map[string]*metrics.Counter // Invariant: len(m) <= maxTenantLabels+1
}

var queueFullByTenant = &tenantCounters{name: "felix_tenant_publish_queue_full_total", m: map[string]*metrics.Counter{}}

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
	c := metrics.GetOrCreateCounter(fmt.Sprintf("%s{tenant=%s}", t.name, strconv.Quote(label)))
	t.m[label] = c
	return c
}
