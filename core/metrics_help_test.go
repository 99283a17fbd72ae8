package core

import (
	"strings"
	"testing"

	"github.com/felixmq/felix/internal/metricdoc"
)

// Every family in a broker core's metric set has a HELP text, given
// where the metric is created.
func TestCoreMetricsAreDescribed(t *testing.T) {
	b, _ := newTestStream(t, Config{Storage: &StorageConfig{Dir: t.TempDir()}}, 1, "")
	for _, name := range b.Metrics().ListMetricNames() {
		family, _, _ := strings.Cut(name, "{")
		if text, ok := metricdoc.Help(family); !ok || text == "" {
			t.Errorf("%s has no HELP text", family)
		}
	}
}
