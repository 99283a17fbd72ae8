package broker

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/felixmq/felix/internal/metricdoc"
)

// parseMetrics reads h's /metrics with the Prometheus text parser, which
// refuses a family whose HELP or TYPE repeats or comes after its samples.
func parseMetrics(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("/metrics is not valid Prometheus text: %v", err)
	}
	return fams
}

// Every family on a broker's /metrics has a HELP text and a TYPE; every
// felix_* family has the text it was described with where it is created;
// no client series (felix_client_*) is among them.
func TestMetricsHaveHelpAndType(t *testing.T) {
	e := startEnv(t, testConfig())
	fams := parseMetrics(t, e.srv.HTTPHandler())
	for _, name := range brokerMetricNames {
		if fams[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	for name, mf := range fams {
		if mf.GetHelp() == "" {
			t.Errorf("%s has no HELP text", name)
		}
		// The parser types a family it saw no TYPE line for as untyped.
		if mf.GetType() == dto.MetricType_UNTYPED {
			t.Errorf("%s has no TYPE", name)
		}
		if strings.HasPrefix(name, "felix_client_") {
			t.Errorf("a broker exports the client family %s", name)
		}
		if strings.HasPrefix(name, "felix_") {
			if want, ok := metricdoc.Help(name); !ok || mf.GetHelp() != want {
				t.Errorf("%s: HELP %q, not the text it was described with (%q)", name, mf.GetHelp(), want)
			}
		}
	}
	if mf := fams["felix_publish_messages_total"]; mf.GetType() != dto.MetricType_COUNTER {
		t.Errorf("felix_publish_messages_total is a %v", mf.GetType())
	}
	if mf := fams["felix_broker_connections"]; mf.GetType() != dto.MetricType_GAUGE {
		t.Errorf("felix_broker_connections is a %v", mf.GetType())
	}
}
