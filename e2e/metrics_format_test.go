package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/felixmq/felix/sdk/felix"
)

// A real felix serve's /metrics, after a client published and subscribed
// through it, parses with the Prometheus text parser; every family has a
// HELP text and a TYPE, and none is a client family (felix_client_*): a
// server exports only its own series.
func TestMetricsFormatHasHelpAndType(t *testing.T) {
	n := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.mustFelix(ctx, "admin", "stream", "create", "metered")
	n.mustFelix(ctx, "admin", "cache", "create", "metered-cache")
	c := n.connect(ctx, n.adminToken())
	eventually(t, 10*time.Second, "a publish to the new stream", func() bool {
		return c.Publish(ctx, "default", "metered", []byte("x"), felix.AckPerMessage) == nil
	})
	n.mustFelix(ctx, "pub", "metered", "a", "b")
	n.mustFelix(ctx, "cache", "put", "metered-cache", "k", "v")

	resp, err := http.Get(n.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not valid Prometheus text: %v", err)
	}
	for _, want := range []string{"felix_publish_messages_total", "felix_raft_term", "felix_controlplane_requests_total", "go_goroutines"} {
		if fams[want] == nil {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for name, mf := range fams {
		if strings.TrimSpace(mf.GetHelp()) == "" {
			t.Errorf("%s has no HELP text", name)
		}
		if mf.GetType() == dto.MetricType_UNTYPED {
			t.Errorf("%s has no TYPE", name)
		}
		if strings.HasPrefix(name, "felix_client_") {
			t.Errorf("the server exports the client family %s", name)
		}
		if strings.HasPrefix(name, "felix_") && strings.HasSuffix(mf.GetHelp(), "(not described).") {
			t.Errorf("%s has no HELP text of its own", name)
		}
	}
}
