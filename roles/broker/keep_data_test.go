package broker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/felixmq/felix/core"
	"github.com/felixmq/felix/wire"
)

// TestBrokerKeepsDurableDataWhenItsCatalogVanishes: a running broker whose
// control plane starts answering for another, empty cluster stops serving
// its durable stream but keeps every record, and serves them again once
// the stream is back in the catalog with the same identity.
func TestBrokerKeepsDurableDataWhenItsCatalogVanishes(t *testing.T) {
	cfg := testConfig()
	cfg.Durable.StorageDir = t.TempDir()
	spec := wire.StreamSpec{TenantID: testTenant, Namespace: "prod", Stream: "log", Shards: 1, Durable: true, Incarnation: "5"}
	e := startEnvWith(t, cfg, func(f *fakeSource) { f.cluster = "cluster-a" }, spec)
	s := e.authed(e.dial(0), durableFlags, durableFeatures, "stream.publish:*")
	publishAcked(t, s, "log", 0, 3)

	k := core.StreamKey{Tenant: testTenant, Namespace: "prod", Stream: "log"}
	served := func() (uint64, bool) {
		st, ok := e.srv.core.Stream(k)
		if !ok {
			return 0, false
		}
		sh, err := st.Shard(0)
		if err != nil {
			t.Fatal(err)
		}
		return sh.NextOffset(), true
	}
	e.src.become("cluster-b")
	waitFor(t, "the stream to stop being served", func() bool { _, ok := served(); return !ok })
	if _, err := os.Stat(filepath.Join(cfg.Durable.StorageDir, "streams", testTenant, "prod", "log", "0")); err != nil {
		t.Fatalf("the stream's log after its catalog vanished: %v", err)
	}
	waitFor(t, "the stream to be counted as held", func() bool {
		held, err := e.srv.core.HeldStreams()
		return err == nil && len(held) == 1
	})

	e.src.become("cluster-a", spec)
	waitFor(t, "the stream to be served again", func() bool { _, ok := served(); return ok })
	if next, _ := served(); next != 3 {
		t.Fatalf("back in its catalog, the stream holds %d records, want 3", next)
	}
}
