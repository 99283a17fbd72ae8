package serve

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/roles/broker"
	"github.com/felixmq/felix/roles/broker/catalogsync"
)

// felix serve is a one-broker cluster: its broker has the first view of
// its own control plane before the start returns, and holds its lease.
func TestServeBrokerRoutesByTheClusterView(t *testing.T) {
	t.Setenv("FELIX_RAFT_TICK_MS", "10")
	dir := t.TempDir()
	args := []string{"t", "--data-dir", dir, "--broker-addr", "127.0.0.1:0",
		"--controlplane-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--shutdown-timeout", "5s"}
	app := &cli.App{Name: "t", Writer: io.Discard, Flags: append(serverFlags(), raftFlags()...), Action: func(c *cli.Context) error {
		o, err := loadOptions(c)
		if err != nil {
			return err
		}
		n, err := newNode(c, o, slog.New(slog.NewTextHandler(io.Discard, nil)), true, true)
		if err != nil {
			return err
		}
		defer n.locks.release()
		if err := n.start(c.Context); err != nil {
			return err
		}
		defer n.shutdown()
		var m strings.Builder
		n.srv.WriteMetrics(&m)
		for _, want := range []string{"felix_broker_cluster_views_applied_total 1", "felix_broker_cluster_view_errors_total 0", "felix_broker_lease_held 1"} {
			if !strings.Contains(m.String(), want) {
				t.Errorf("metrics lack %q", want)
			}
		}
		v, changed, err := n.cp.ClusterView(context.Background(), "")
		if err != nil || !changed || len(v.Brokers) != 1 || v.Brokers[0].NodeID != "broker-1" {
			t.Errorf("view %+v %v %v", v, changed, err)
		}
		return nil
	}}
	if err := app.Run(args); err != nil {
		t.Fatal(err)
	}
}

// felix broker finds the cluster view on its HTTP catalog source.
func TestHTTPSourceIsAClusterViewSource(t *testing.T) {
	if _, ok := catalogsync.NewHTTPSource("http://127.0.0.1:1", nil, nil).(broker.ClusterViewSource); !ok {
		t.Fatal("the HTTP catalog source does not implement broker.ClusterViewSource: felix broker would run standalone")
	}
}
