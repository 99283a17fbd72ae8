package serve

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/wire"
)

// felix serve registers its broker with its own control plane: node id
// broker-1, the zone from FELIX_NODE_ZONE, a storage identity kept in the
// data directory; a new cluster finalizes the features it reports.
func TestServeRegistersItsBroker(t *testing.T) {
	t.Setenv("FELIX_RAFT_TICK_MS", "10")
	t.Setenv("FELIX_NODE_ZONE", "zone-a")
	dir := t.TempDir()
	var storageIDs []string
	run := func() {
		runServeNode(t, dir, func(ctx context.Context, n *node) error {
			brokers, err := n.cp.Brokers(ctx)
			if err != nil {
				return err
			}
			if len(brokers) != 1 || brokers[0].NodeID != "broker-1" || brokers[0].State != wire.BrokerLive ||
				brokers[0].Zone != "zone-a" || brokers[0].ClientAddrs[0] != n.srv.Addr().String() {
				t.Errorf("brokers %+v", brokers)
			}
			storageIDs = append(storageIDs, brokers[0].StorageID)
			view, err := n.cp.FleetFeatures(ctx)
			if err != nil {
				return err
			}
			for _, f := range view.Features {
				reported := strings.Contains(strings.Join(brokers[0].Features, ","), f.Name)
				if want := reported && f.Name != wire.FleetPublisherPrincipal; f.Finalized != want {
					t.Errorf("feature %+v, want finalized=%v", f, want)
				}
			}
			return nil
		})
	}
	run()
	raw, err := os.ReadFile(filepath.Join(dir, "log", "storage.id"))
	if err != nil || strings.TrimSpace(string(raw)) != storageIDs[0] {
		t.Fatalf("storage.id %q %v, registered %s", raw, err, storageIDs[0])
	}
	run() // a restart keeps the identity and registers again
	if storageIDs[1] != storageIDs[0] {
		t.Fatalf("storage identity changed across a restart: %v", storageIDs)
	}
}

// runServeNode runs a `felix serve` node (control plane and broker) on
// free loopback ports with its data under dir, hands it to check once
// started, then shuts it down. An error from the start or from check
// fails the test.
func runServeNode(t *testing.T, dir string, check func(ctx context.Context, n *node) error) {
	t.Helper()
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
		return check(c.Context, n)
	}}
	if err := app.Run(args); err != nil {
		t.Fatal(err)
	}
}
