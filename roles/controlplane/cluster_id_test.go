package controlplane

import (
	"testing"

	"github.com/felixmq/felix/wire"
)

// TestClusterIDNamesEveryPage: every snapshot and changes page names the
// cluster; the id survives a restart over the same store, and a new store
// is another cluster.
func TestClusterIDNamesEveryPage(t *testing.T) {
	path := t.TempDir()
	svc := reopenService(t, path)
	_, err := svc.Bootstrap(bg)
	must(t, err)
	snap, err := svc.Snapshot(bg, wire.KindTenants)
	must(t, err)
	changes, err := svc.Changes(bg, wire.KindTenants, 0)
	must(t, err)
	id := snap.ClusterID
	if len(id) != 32 || changes.ClusterID != id {
		t.Fatalf("snapshot names cluster %q, changes %q", id, changes.ClusterID)
	}
	must(t, svc.Close())

	svc = reopenService(t, path)
	defer svc.Close()
	again, err := svc.Snapshot(bg, wire.KindStreams)
	must(t, err)
	if again.ClusterID != id {
		t.Fatalf("cluster id %q after a restart, was %q", again.ClusterID, id)
	}
	other := reopenService(t, t.TempDir())
	defer other.Close()
	fresh, err := other.ClusterID(bg)
	must(t, err)
	if fresh == id || fresh == "" {
		t.Fatalf("a new store has cluster id %q (the first had %q)", fresh, id)
	}
}
