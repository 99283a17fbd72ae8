package controlplane

import (
	"context"
	"errors"
	"testing"

	"github.com/felixmq/felix/wire"
)

// testStore runs the Store contract against one implementation. open
// returns a fresh, empty store; the suite closes it.
func testStore(t *testing.T, open func(t *testing.T) Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s Store)
	}{
		{"Tenants", storeTenants},
		{"Namespaces", storeNamespaces},
		{"Streams", storeStreams},
		{"Caches", storeCaches},
		{"DeleteWithChildren", storeDeleteWithChildren},
		{"RecursiveTenantDelete", storeRecursiveTenantDelete},
		{"SnapshotThenChanges", storeSnapshotThenChanges},
		{"ChangesPaging", storeChangesPaging},
		{"FutureCursorResets", storeFutureCursor},
		{"Meta", storeMeta},
		{"BootstrapOnce", storeBootstrapOnce},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
}

func TestRaftStoreSuiteOneMember(t *testing.T) {
	testStore(t, func(t *testing.T) Store { return openTestRaft(t, t.TempDir()) })
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
}

var bg = context.Background()

func storeTenants(t *testing.T, s Store) {
	must(t, s.CreateTenant(bg, wire.Tenant{TenantID: "b", DisplayName: "Bee"}))
	must(t, s.CreateTenant(bg, wire.Tenant{TenantID: "a"}))
	wantErr(t, s.CreateTenant(bg, wire.Tenant{TenantID: "a"}), ErrConflict)
	got, ok, err := s.Tenant(bg, "b")
	must(t, err)
	if !ok || got.DisplayName != "Bee" {
		t.Fatalf("Tenant(b) = %+v, %v", got, ok)
	}
	must(t, s.PutTenant(bg, wire.Tenant{TenantID: "b", DisplayName: "Bee 2"}))
	if got, _, _ := s.Tenant(bg, "b"); got.DisplayName != "Bee 2" {
		t.Fatalf("after put: %+v", got)
	}
	list, err := s.Tenants(bg)
	must(t, err)
	if len(list) != 2 || list[0].TenantID != "a" || list[1].TenantID != "b" {
		t.Fatalf("Tenants = %+v", list)
	}
	must(t, s.DeleteTenant(bg, "a", false))
	wantErr(t, s.DeleteTenant(bg, "a", false), ErrNotFound)
	if _, ok, _ := s.Tenant(bg, "a"); ok {
		t.Fatal("deleted tenant still there")
	}
}

func storeNamespaces(t *testing.T, s Store) {
	wantErr(t, s.CreateNamespace(bg, wire.Namespace{TenantID: "acme", Namespace: "prod"}), ErrNotFound)
	must(t, s.CreateTenant(bg, wire.Tenant{TenantID: "acme"}))
	must(t, s.CreateTenant(bg, wire.Tenant{TenantID: "acme2"}))
	must(t, s.CreateNamespace(bg, wire.Namespace{TenantID: "acme", Namespace: "prod"}))
	must(t, s.CreateNamespace(bg, wire.Namespace{TenantID: "acme", Namespace: "dev"}))
	must(t, s.CreateNamespace(bg, wire.Namespace{TenantID: "acme2", Namespace: "other"}))
	wantErr(t, s.CreateNamespace(bg, wire.Namespace{TenantID: "acme", Namespace: "prod"}), ErrConflict)
	list, err := s.Namespaces(bg, "acme")
	must(t, err)
	if len(list) != 2 || list[0].Namespace != "dev" || list[1].Namespace != "prod" {
		t.Fatalf("Namespaces(acme) = %+v", list)
	}
	if _, ok, _ := s.Namespace(bg, "acme", "prod"); !ok {
		t.Fatal("namespace missing")
	}
	must(t, s.DeleteNamespace(bg, "acme", "dev", false))
	wantErr(t, s.DeleteNamespace(bg, "acme", "dev", false), ErrNotFound)
}

func seedNamespace(t *testing.T, s Store, tenant, ns string) {
	t.Helper()
	if _, ok, _ := s.Tenant(bg, tenant); !ok {
		must(t, s.CreateTenant(bg, wire.Tenant{TenantID: tenant}))
	}
	must(t, s.CreateNamespace(bg, wire.Namespace{TenantID: tenant, Namespace: ns}))
}

func storeStreams(t *testing.T, s Store) {
	sp := wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: "orders", Shards: 4, Consistency: "leader", ReplicationFactor: 1}
	wantErr(t, s.CreateStream(bg, sp), ErrNotFound)
	seedNamespace(t, s, "acme", "prod")
	must(t, s.CreateStream(bg, sp))
	wantErr(t, s.CreateStream(bg, sp), ErrConflict)
	other := sp
	other.Stream = "missing"
	wantErr(t, s.UpdateStream(bg, other), ErrNotFound)
	sp.SubQueuePolicy = "block"
	must(t, s.UpdateStream(bg, sp))
	got, ok, err := s.Stream(bg, "acme", "prod", "orders")
	must(t, err)
	if !ok || got.SubQueuePolicy != "block" || got.Shards != 4 {
		t.Fatalf("Stream = %+v, %v", got, ok)
	}
	must(t, s.PutStream(bg, other))
	list, err := s.Streams(bg, "acme", "prod")
	must(t, err)
	if len(list) != 2 {
		t.Fatalf("Streams = %+v", list)
	}
	must(t, s.DeleteStream(bg, "acme", "prod", "orders"))
	wantErr(t, s.DeleteStream(bg, "acme", "prod", "orders"), ErrNotFound)
}

func storeCaches(t *testing.T, s Store) {
	c := wire.CacheSpec{TenantID: "acme", Namespace: "prod", Cache: "sessions", MaxEntries: 10}
	wantErr(t, s.CreateCache(bg, c), ErrNotFound)
	seedNamespace(t, s, "acme", "prod")
	must(t, s.CreateCache(bg, c))
	wantErr(t, s.CreateCache(bg, c), ErrConflict)
	c.MaxEntries = 20
	must(t, s.PutCache(bg, c))
	got, ok, err := s.Cache(bg, "acme", "prod", "sessions")
	must(t, err)
	if !ok || got.MaxEntries != 20 {
		t.Fatalf("Cache = %+v, %v", got, ok)
	}
	list, err := s.Caches(bg, "acme", "prod")
	must(t, err)
	if len(list) != 1 {
		t.Fatalf("Caches = %+v", list)
	}
	must(t, s.DeleteCache(bg, "acme", "prod", "sessions"))
	wantErr(t, s.DeleteCache(bg, "acme", "prod", "sessions"), ErrNotFound)
}

func storeDeleteWithChildren(t *testing.T, s Store) {
	seedNamespace(t, s, "acme", "prod")
	must(t, s.CreateStream(bg, wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: "x", Shards: 1}))
	wantErr(t, s.DeleteNamespace(bg, "acme", "prod", false), ErrConflict)
	wantErr(t, s.DeleteTenant(bg, "acme", false), ErrConflict)
	must(t, s.DeleteNamespace(bg, "acme", "prod", true))
	if _, ok, _ := s.Stream(bg, "acme", "prod", "x"); ok {
		t.Fatal("stream survived its namespace")
	}
	must(t, s.DeleteTenant(bg, "acme", false))
}

func storeRecursiveTenantDelete(t *testing.T, s Store) {
	seedNamespace(t, s, "acme", "prod")
	seedNamespace(t, s, "acme", "dev")
	seedNamespace(t, s, "acmex", "prod") // shares a prefix; must survive
	must(t, s.CreateStream(bg, wire.StreamSpec{TenantID: "acme", Namespace: "prod", Stream: "s1", Shards: 1}))
	must(t, s.CreateStream(bg, wire.StreamSpec{TenantID: "acme", Namespace: "dev", Stream: "s2", Shards: 1}))
	must(t, s.CreateCache(bg, wire.CacheSpec{TenantID: "acme", Namespace: "prod", Cache: "c1"}))
	must(t, s.CreateStream(bg, wire.StreamSpec{TenantID: "acmex", Namespace: "prod", Stream: "keep", Shards: 1}))
	cursors := map[wire.CatalogKind]uint64{}
	for _, k := range wire.CatalogKinds {
		p, err := s.Snapshot(bg, k)
		must(t, err)
		cursors[k] = p.Seq
	}
	must(t, s.DeleteTenant(bg, "acme", true))

	wantDeletes := map[wire.CatalogKind]int{wire.KindTenants: 1, wire.KindNamespaces: 2, wire.KindStreams: 2, wire.KindCaches: 1}
	for k, n := range wantDeletes {
		p, err := s.Changes(bg, k, cursors[k], 0)
		must(t, err)
		if len(p.Items) != n {
			t.Fatalf("%s changes = %+v, want %d deletes", k, p.Items, n)
		}
		for _, it := range p.Items {
			if it.Op != wire.OpDelete {
				t.Fatalf("%s change %+v is not a delete", k, it)
			}
		}
	}
	if _, ok, _ := s.Stream(bg, "acmex", "prod", "keep"); !ok {
		t.Fatal("recursive delete of acme removed acmex's stream")
	}
	if list, _ := s.Namespaces(bg, "acme"); len(list) != 0 {
		t.Fatalf("namespaces left: %+v", list)
	}
}

func storeSnapshotThenChanges(t *testing.T, s Store) {
	must(t, s.CreateTenant(bg, wire.Tenant{TenantID: "a"}))
	snap, err := s.Snapshot(bg, wire.KindTenants)
	must(t, err)
	if snap.Kind != wire.KindTenants || snap.Seq != 1 || len(snap.Items) != 1 || snap.Items[0].Op != wire.OpPut || snap.Items[0].Tenant.TenantID != "a" {
		t.Fatalf("snapshot = %+v", snap)
	}
	none, err := s.Changes(bg, wire.KindTenants, snap.Seq, 0)
	must(t, err)
	if len(none.Items) != 0 || none.Seq != snap.Seq || none.Reset {
		t.Fatalf("changes with nothing new = %+v", none)
	}
	must(t, s.CreateTenant(bg, wire.Tenant{TenantID: "b"}))
	must(t, s.DeleteTenant(bg, "b", false))
	ch, err := s.Changes(bg, wire.KindTenants, snap.Seq, 0)
	must(t, err)
	if len(ch.Items) != 2 || ch.Reset {
		t.Fatalf("changes = %+v", ch)
	}
	if it := ch.Items[0]; it.Op != wire.OpPut || it.Seq != 2 || it.Tenant.TenantID != "b" {
		t.Fatalf("first change = %+v", it)
	}
	if it := ch.Items[1]; it.Op != wire.OpDelete || it.Seq != 3 || it.Tenant.TenantID != "b" {
		t.Fatalf("second change = %+v", it)
	}
	if ch.Seq != 3 {
		t.Fatalf("cursor = %d, want 3", ch.Seq)
	}
	// Other kinds keep their own counters.
	ns, err := s.Snapshot(bg, wire.KindNamespaces)
	must(t, err)
	if ns.Seq != 0 || len(ns.Items) != 0 {
		t.Fatalf("namespaces snapshot = %+v", ns)
	}
}

func storeChangesPaging(t *testing.T, s Store) {
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		must(t, s.CreateTenant(bg, wire.Tenant{TenantID: id}))
	}
	var got []string
	cursor := uint64(0)
	for range 10 {
		p, err := s.Changes(bg, wire.KindTenants, cursor, 2)
		must(t, err)
		if len(p.Items) > 2 {
			t.Fatalf("page of %d items with limit 2", len(p.Items))
		}
		if len(p.Items) == 0 {
			break
		}
		for _, it := range p.Items {
			got = append(got, it.Tenant.TenantID)
		}
		cursor = p.Seq
	}
	if len(got) != 5 || got[0] != "a" || got[4] != "e" || cursor != 5 {
		t.Fatalf("paged changes = %v, cursor %d", got, cursor)
	}
}

func storeFutureCursor(t *testing.T, s Store) {
	must(t, s.CreateTenant(bg, wire.Tenant{TenantID: "a"}))
	p, err := s.Changes(bg, wire.KindTenants, 99, 0)
	must(t, err)
	if !p.Reset || len(p.Items) != 0 || p.Seq != 1 {
		t.Fatalf("future cursor page = %+v", p)
	}
	if _, err := s.Changes(bg, "widgets", 0, 0); err == nil {
		t.Fatal("unknown kind accepted")
	}
}

func storeMeta(t *testing.T, s Store) {
	if _, ok, err := s.Meta(bg, "k"); ok || err != nil {
		t.Fatalf("Meta on empty store: %v, %v", ok, err)
	}
	must(t, s.PutMeta(bg, "k", []byte("v1")))
	v, ok, err := s.Meta(bg, "k")
	must(t, err)
	if !ok || string(v) != "v1" {
		t.Fatalf("Meta = %q, %v", v, ok)
	}
	cur, err := s.PutMetaIfAbsent(bg, "k", []byte("v2"))
	must(t, err)
	if string(cur) != "v1" {
		t.Fatalf("PutMetaIfAbsent over a value returned %q", cur)
	}
	cur, err = s.PutMetaIfAbsent(bg, "k2", []byte("v2"))
	must(t, err)
	if string(cur) != "v2" {
		t.Fatalf("PutMetaIfAbsent on empty key returned %q", cur)
	}
}

func storeBootstrapOnce(t *testing.T, s Store) {
	ten := wire.Tenant{TenantID: "default"}
	ns := wire.Namespace{TenantID: "default", Namespace: "default"}
	created, err := s.Bootstrap(bg, "boot", ten, ns)
	must(t, err)
	if !created {
		t.Fatal("first bootstrap did nothing")
	}
	if _, ok, _ := s.Namespace(bg, "default", "default"); !ok {
		t.Fatal("default namespace missing")
	}
	must(t, s.DeleteTenant(bg, "default", true))
	created, err = s.Bootstrap(bg, "boot", ten, ns)
	must(t, err)
	if created {
		t.Fatal("second bootstrap ran")
	}
	if _, ok, _ := s.Tenant(bg, "default"); ok {
		t.Fatal("second bootstrap recreated a deleted tenant")
	}
}
