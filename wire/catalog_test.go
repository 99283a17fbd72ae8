package wire

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestCatalogKindsOrder(t *testing.T) {
	want := []CatalogKind{"tenants", "namespaces", "caches", "streams"}
	if !reflect.DeepEqual(CatalogKinds, want) {
		t.Fatalf("CatalogKinds = %v, want %v", CatalogKinds, want)
	}
}

func TestCatalogPageJSON(t *testing.T) {
	pages := []CatalogPage{
		{Kind: KindTenants, Seq: 3, Items: []CatalogItem{
			{Seq: 1, Op: OpPut, Tenant: &Tenant{TenantID: "acme", DisplayName: "Acme"}},
			{Seq: 3, Op: OpDelete, Tenant: &Tenant{TenantID: "gone"}},
		}},
		{Kind: KindNamespaces, Seq: 9, Reset: true, Items: []CatalogItem{}},
		{Kind: KindStreams, Seq: 4, Items: []CatalogItem{{Seq: 4, Op: OpPut, Stream: &StreamSpec{
			TenantID: "acme", Namespace: "prod", Stream: "orders", Shards: 4, Durable: true,
			Retention:   Retention{MaxSizeBytes: u64p(1 << 30), MaxAgeSeconds: u64p(86400)},
			Consistency: "leader", ReplicationFactor: 1, SubQueuePolicy: "drop_new",
		}}}},
		{Kind: KindCaches, Seq: 2, Items: []CatalogItem{{Seq: 2, Op: OpPut, Cache: &CacheSpec{
			TenantID: "acme", Namespace: "prod", Cache: "sessions", Shards: 2, MaxEntries: 1000, MaxBytes: 1 << 20,
		}}}},
	}
	for _, p := range pages {
		b, err := json.Marshal(&p)
		if err != nil {
			t.Fatal(err)
		}
		var got CatalogPage
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Errorf("round trip of %s\n got  %+v\n want %+v", b, got, p)
		}
	}
	// The exact shape of a delete and of an empty stream spec's optional
	// fields, which a non-Go reader depends on.
	b, _ := json.Marshal(CatalogItem{Seq: 5, Op: OpDelete, Namespace: &Namespace{TenantID: "acme", Namespace: "old"}})
	if want := `{"seq":5,"op":"delete","namespace":{"tenant_id":"acme","namespace":"old"}}`; string(b) != want {
		t.Errorf("delete item = %s, want %s", b, want)
	}
	b, _ = json.Marshal(StreamSpec{TenantID: "a", Namespace: "b", Stream: "c", Shards: 1})
	if want := `{"tenant_id":"a","namespace":"b","stream":"c","shards":1,"durable":false,"retention":{}}`; string(b) != want {
		t.Errorf("minimal stream spec = %s, want %s", b, want)
	}
}
