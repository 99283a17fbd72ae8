package catalog

import (
	"testing"

	"github.com/felixmq/felix/wire"
)

// TestCatalogIncarnations: a created stream or cache gets an incarnation
// of its own, every update keeps it whatever the command says, a stream
// re-created under a deleted one's name gets another, two replicas
// applying the same commands agree, and an import keeps what it carries.
func TestCatalogIncarnations(t *testing.T) {
	st := func(name, inc string, shards uint32) wire.CatalogItem {
		return wire.CatalogItem{Stream: &wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: name, Shards: shards, Incarnation: inc}}
	}
	cmds := [][]byte{
		CmdWrite(wire.KindTenants, ModeCreate, wire.CatalogItem{Tenant: &wire.Tenant{TenantID: "acme"}}),
		CmdWrite(wire.KindNamespaces, ModeCreate, wire.CatalogItem{Namespace: &wire.Namespace{TenantID: "acme", Namespace: "prod"}}),
		CmdWrite(wire.KindStreams, ModeCreate, st("orders", "chosen-by-client", 1)),
		CmdWrite(wire.KindStreams, ModeUpdate, st("orders", "other", 2)),
		CmdWrite(wire.KindStreams, ModePut, st("orders", "", 3)),
		CmdBatch(Batch{Tenant: "acme", Namespace: "prod", Streams: []wire.StreamSpec{*st("audit", "", 1).Stream},
			Caches: []wire.CacheSpec{{TenantID: "acme", Namespace: "prod", Cache: "sessions", Incarnation: "x"}}}),
	}
	a, b := openTestCatalog(t), openTestCatalog(t)
	for i, raw := range cmds {
		for _, c := range []*Catalog{a, b} {
			if _, err := c.Apply(uint64(i+1), raw); err != nil {
				t.Fatalf("command %d: %v", i, err)
			}
		}
	}
	stream := func(c *Catalog, name string) wire.StreamSpec {
		t.Helper()
		it, ok, err := c.Item(wire.KindStreams, CatalogKey("acme", "prod", name))
		if err != nil || !ok {
			t.Fatalf("stream %s: %v %v", name, ok, err)
		}
		return *it.Stream
	}
	orders := stream(a, "orders")
	if orders.Incarnation == "" || orders.Incarnation == "chosen-by-client" || orders.Shards != 3 {
		t.Fatalf("orders after two updates: %+v", orders)
	}
	if stream(b, "orders").Incarnation != orders.Incarnation || stream(b, "audit").Incarnation != stream(a, "audit").Incarnation {
		t.Fatal("two replicas assigned different incarnations")
	}
	if stream(a, "audit").Incarnation == orders.Incarnation {
		t.Fatal("two streams share an incarnation")
	}
	cache, _, _ := a.Item(wire.KindCaches, CatalogKey("acme", "prod", "sessions"))
	if cache.Cache.Incarnation == "" || cache.Cache.Incarnation == "x" {
		t.Fatalf("cache incarnation %q", cache.Cache.Incarnation)
	}
	seen := map[string]bool{orders.Incarnation: true}
	for i, raw := range [][]byte{
		CmdDelete(wire.KindStreams, CatalogKey("acme", "prod", "orders"), false),
		CmdWrite(wire.KindStreams, ModeCreate, st("orders", "", 1)),
		CmdDelete(wire.KindStreams, CatalogKey("acme", "prod", "orders"), false),
		CmdWrite(wire.KindStreams, ModePut, st("orders", orders.Incarnation, 1)),
	} {
		if _, err := a.Apply(uint64(len(cmds)+i+1), raw); err != nil {
			t.Fatal(err)
		}
		if it, ok, _ := a.Item(wire.KindStreams, CatalogKey("acme", "prod", "orders")); ok {
			if seen[it.Stream.Incarnation] {
				t.Fatalf("re-created stream took incarnation %q again", it.Stream.Incarnation)
			}
			seen[it.Stream.Incarnation] = true
		}
	}

	imp := openTestCatalog(t)
	raw := CmdImport(Import{
		Tenants:    []wire.Tenant{{TenantID: "acme"}},
		Namespaces: []wire.Namespace{{TenantID: "acme", Namespace: "prod"}},
		Streams:    []wire.StreamSpec{orders},
	})
	if _, err := imp.Apply(1, raw); err != nil {
		t.Fatal(err)
	}
	if got := stream(imp, "orders").Incarnation; got != orders.Incarnation {
		t.Fatalf("import gave incarnation %q, it carried %q", got, orders.Incarnation)
	}
}
