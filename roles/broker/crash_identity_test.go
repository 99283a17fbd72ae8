package broker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/wire"
)

// A broker whose machine crashed comes back under a new storage identity
// and does not reopen, lead or report the shards placed on its old one
// until the control plane names them for it under the new one.
func TestABrokerBackAfterACrashServesItsShardOnlyOnceNamedUnderItsNewIdentity(t *testing.T) {
	dir := t.TempDir()
	mustNil(t, os.WriteFile(filepath.Join(dir, storageIDFile), []byte("sid-1\n"), 0o600))
	reg := newFakeRegistry()
	durableShard := func(gen uint64, sid string) wire.ShardAssignment {
		a := sa("s", 0, "broker-7", gen, "")
		a.StorageID = sid
		return a
	}
	spec := wire.StreamSpec{TenantID: "t", Namespace: "ns", Stream: "s", Shards: 1, Incarnation: "i", Durable: true}
	start := func(v wire.ClusterView) (*Server, *scriptedViews) {
		cfg := testConfig()
		cfg.ClusterViewInterval = time.Minute // the test fetches
		cfg.Node = NodeConfig{ID: "broker-7", HeartbeatInterval: time.Hour}
		cfg.Durable.StorageDir = dir
		views := newScriptedViews(v)
		srv := newTestBroker(t, cfg, Deps{Registry: reg, Cluster: views})
		mustNil(t, srv.Start(context.Background()))
		mustNil(t, srv.state.ApplyStream(spec))
		return srv, views
	}
	shard := func(srv *Server) (*core.Shard, error) {
		st, ok := srv.core.Stream(core.StreamKey{Tenant: "t", Namespace: "ns", Stream: "s"})
		if !ok {
			t.Fatal("stream not in the core")
		}
		return st.Shard(0)
	}

	// First run: sid-1 leads the shard and writes to it.
	srv, _ := start(selfView("v1", durableShard(1, "sid-1")))
	if got := receive(t, reg.regC, "registration"); got.StorageID != "sid-1" || got.CrashedStorageID != "" {
		t.Fatalf("first registration %+v", got)
	}
	sh, err := shard(srv)
	if err != nil || !route0(srv, "s").Local {
		t.Fatalf("first run: shard %v, route %+v", err, route0(srv, "s"))
	}
	if _, err := sh.Publish(context.Background(), [][]byte{[]byte("a"), []byte("b")}, ""); err != nil {
		t.Fatal(err)
	}
	mustNil(t, srv.Shutdown(context.Background()))
	if _, err := os.Stat(filepath.Join(dir, runMarkerFile)); !os.IsNotExist(err) {
		t.Fatalf("the run marker outlived a clean stop: %v", err)
	}
	// The machine crashed instead: the marker is there, from another boot.
	writeMarker(t, dir, "a boot before the crash", "periodic")

	// Back: the control plane has not acted yet, so the view still names
	// the shard here under sid-1 at generation 1.
	srv, views := start(selfView("v1", durableShard(1, "sid-1")))
	got := receive(t, reg.regC, "registration after the crash")
	if got.StorageID == "sid-1" || got.StorageID == "" || got.CrashedStorageID != "sid-1" {
		t.Fatalf("registration after the crash %+v", got)
	}
	if r := route0(srv, "s"); r.Local || r.Unavailable != wire.UnavailableStorageLost {
		t.Fatalf("route under the old identity %+v", r)
	}
	if _, err := shard(srv); err == nil {
		t.Fatal("the shard was reopened under the old identity")
	}
	if m := metricsText(srv); !strings.Contains(m, `felix_broker_shards_owned{kind="stream"} 0`) {
		t.Fatalf("shards owned under the old identity:\n%s", m)
	}
	if ps := srv.repl.positions(); len(ps) != 0 {
		t.Fatalf("reported %+v under the old identity", ps)
	}
	// Named again under the new identity at a new generation: it opens
	// what its disk holds.
	views.set(selfView("v2", durableShard(2, got.StorageID)))
	mustNil(t, srv.fetchView(context.Background()))
	if r := route0(srv, "s"); !r.Local || r.Generation != 2 {
		t.Fatalf("route once named again %+v", r)
	}
	sh, err = shard(srv)
	if err != nil {
		t.Fatal(err)
	}
	if n := sh.NextOffset(); n < 2 {
		t.Fatalf("reopened with next offset %d, want the 2 records it held", n)
	}
}
