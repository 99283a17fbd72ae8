package serve

import (
	"context"
	"strings"
	"testing"

	"github.com/felixmq/felix/roles/broker"
	"github.com/felixmq/felix/roles/broker/catalogsync"
)

// felix serve is a one-broker cluster: its broker has the first view of
// its own control plane before the start returns, and holds its lease.
func TestServeBrokerRoutesByTheClusterView(t *testing.T) {
	t.Setenv("FELIX_RAFT_TICK_MS", "10")
	runServeNode(t, t.TempDir(), func(ctx context.Context, n *node) error {
		var m strings.Builder
		n.srv.WriteMetrics(&m)
		for _, want := range []string{"felix_broker_cluster_views_applied_total 1", "felix_broker_cluster_view_errors_total 0", "felix_broker_lease_held 1"} {
			if !strings.Contains(m.String(), want) {
				t.Errorf("metrics lack %q", want)
			}
		}
		v, changed, err := n.cp.ClusterView(ctx, "")
		if err != nil || !changed || len(v.Brokers) != 1 || v.Brokers[0].NodeID != "broker-1" {
			t.Errorf("view %+v %v %v", v, changed, err)
		}
		return nil
	})
}

// felix broker finds the cluster view on its HTTP catalog source.
func TestHTTPSourceIsAClusterViewSource(t *testing.T) {
	if _, ok := catalogsync.NewHTTPSource("http://127.0.0.1:1", nil, nil).(broker.ClusterViewSource); !ok {
		t.Fatal("the HTTP catalog source does not implement broker.ClusterViewSource: felix broker would run standalone")
	}
}
