package felix

import (
	"io"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/internal/metricdoc"
)

// clientMetrics is the SDK's own metric set. It is deliberately not the
// process-wide default set: a server that embeds a client (felix serve's
// tools, a test, an application exposing its own /metrics) must not
// export client series as its own. An application exposes them by
// writing WriteMetrics next to its own.
var clientMetrics = metrics.NewSet()

// Client metrics.
var (
	publishTotal   = clientMetrics.NewCounter("felix_client_publish_total")        // payloads accepted by Publish*
	publishErrors  = clientMetrics.NewCounter("felix_client_publish_errors_total") // Publish* calls that failed
	eventsReceived = clientMetrics.NewCounter("felix_client_events_received_total")
	reconnects     = clientMetrics.NewCounter("felix_client_reconnects_total") // ClusterClient connection replacements
	// ClusterSubscription resubscribes after a lag or a lost connection.
	subscriptionResumes = clientMetrics.NewCounter("felix_client_subscription_resumes_total")
	// ClusterCacheWatch watches again after a lag or a lost connection.
	cacheWatchResumes = clientMetrics.NewCounter("felix_client_cache_watch_resumes_total")
	// Connections a ClusterClient dropped because a probe went unanswered.
	probesFailed = clientMetrics.NewCounter("felix_client_probes_unanswered_total")
)

// clientHelp is the HELP text of the client metric families.
var clientHelp = map[string]string{
	"felix_client_publish_total":              "Payloads accepted by Publish calls of this process's clients.",
	"felix_client_publish_errors_total":       "Publish calls of this process's clients that failed.",
	"felix_client_events_received_total":      "Events received by this process's subscriptions.",
	"felix_client_reconnects_total":           "Connections a ClusterClient replaced.",
	"felix_client_subscription_resumes_total": "ClusterSubscription resubscribes after a lag or a lost connection.",
	"felix_client_cache_watch_resumes_total":  "ClusterCacheWatch watches started again after a lag or a lost connection.",
	"felix_client_probes_unanswered_total":    "Connections a ClusterClient dropped because the broker did not answer a liveness probe after a call timed out.",
}

// WriteMetrics writes the process's client metrics (the felix_client_*
// families, counted over every Client and ClusterClient of the process)
// in Prometheus text, with a HELP and a TYPE line per family (it turns
// the VictoriaMetrics library's metadata exposition on for the process).
func WriteMetrics(w io.Writer) error {
	return metricdoc.Write(w, clientMetrics.WritePrometheus)
}

func init() { metricdoc.Describe(clientHelp) }
