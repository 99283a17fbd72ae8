package felix

import "github.com/VictoriaMetrics/metrics"

// Client metrics, in the process-wide VictoriaMetrics set.
var (
	publishTotal   = metrics.GetOrCreateCounter("felix_client_publish_total")        // payloads accepted by Publish*
	publishErrors  = metrics.GetOrCreateCounter("felix_client_publish_errors_total") // Publish* calls that failed
	eventsReceived = metrics.GetOrCreateCounter("felix_client_events_received_total")
	reconnects     = metrics.GetOrCreateCounter("felix_client_reconnects_total") // ClusterClient connection replacements
	// ClusterSubscription resubscribes after a lag or a lost connection.
	subscriptionResumes = metrics.GetOrCreateCounter("felix_client_subscription_resumes_total")
	// ClusterCacheWatch watches again after a lag or a lost connection.
	cacheWatchResumes = metrics.GetOrCreateCounter("felix_client_cache_watch_resumes_total")
)
