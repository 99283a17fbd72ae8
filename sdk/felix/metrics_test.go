package felix

import (
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The client metrics stay off the process-wide default set (which a
// server in the same process exports as its own) and WriteMetrics writes
// them with HELP and TYPE.
func TestClientMetricsAreOffTheDefaultSet(t *testing.T) {
	publishTotal.Inc()
	var b strings.Builder
	metrics.WritePrometheus(&b, false)
	if strings.Contains(b.String(), "felix_client_") {
		t.Fatalf("the default set holds client metrics:\n%s", b.String())
	}
	b.Reset()
	if err := WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	for name := range clientHelp {
		mf := fams[name]
		if mf == nil || mf.GetHelp() != clientHelp[name] || mf.GetType().String() != "COUNTER" {
			t.Errorf("%s: %v", name, mf)
		}
	}
}
