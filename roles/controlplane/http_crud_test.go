package controlplane

import (
	"net/http"
	"strings"
	"testing"

	"github.com/felixmq/felix/wire"
)

func TestHTTPTenantCRUD(t *testing.T) {
	h := newHarness(t)
	var ten wire.Tenant
	h.expect(201, "POST", "/v1/tenants", h.admin, map[string]any{"tenant_id": "acme", "display_name": "Acme"}, &ten)
	if ten.TenantID != "acme" || ten.DisplayName != "Acme" {
		t.Fatalf("created %+v", ten)
	}
	h.expectError(409, "conflict", "POST", "/v1/tenants", h.admin, map[string]any{"tenant_id": "acme"}, `"acme"`)
	h.expect(200, "GET", "/v1/tenants/acme", h.admin, nil, &ten)
	var list listBody[wire.Tenant]
	h.expect(200, "GET", "/v1/tenants", h.admin, nil, &list)
	if len(list.Items) != 2 || list.Items[0].TenantID != "acme" || list.Items[1].TenantID != "default" {
		t.Fatalf("list = %+v", list)
	}
	h.expect(204, "DELETE", "/v1/tenants/acme", h.admin, nil, nil)
	h.expectError(404, "not_found", "GET", "/v1/tenants/acme", h.admin, nil, `tenant "acme"`)
	h.expectError(404, "not_found", "DELETE", "/v1/tenants/acme", h.admin, nil)
}

func TestHTTPNamespaceCRUD(t *testing.T) {
	h := newHarness(t)
	h.expect(201, "POST", "/v1/tenants", h.admin, wire.Tenant{TenantID: "acme"}, nil)
	var ns wire.Namespace
	h.expect(201, "POST", "/v1/tenants/acme/namespaces", h.admin, map[string]any{"namespace": "prod"}, &ns)
	if ns != (wire.Namespace{TenantID: "acme", Namespace: "prod"}) {
		t.Fatalf("created %+v", ns)
	}
	h.expectError(409, "conflict", "POST", "/v1/tenants/acme/namespaces", h.admin, map[string]any{"namespace": "prod"})
	h.expectError(404, "not_found", "POST", "/v1/tenants/nope/namespaces", h.admin, map[string]any{"namespace": "prod"}, `tenant "nope"`)
	h.expectError(404, "not_found", "GET", "/v1/tenants/nope/namespaces", h.admin, nil)
	h.expectError(400, "invalid_request", "POST", "/v1/tenants/acme/namespaces", h.admin, map[string]any{"tenant_id": "other", "namespace": "x"}, "tenant_id")
	var list listBody[wire.Namespace]
	h.expect(200, "GET", "/v1/tenants/acme/namespaces", h.admin, nil, &list)
	if len(list.Items) != 1 {
		t.Fatalf("list = %+v", list)
	}
	h.expect(200, "GET", "/v1/tenants/acme/namespaces/prod", h.admin, nil, &ns)
	h.expect(204, "DELETE", "/v1/tenants/acme/namespaces/prod", h.admin, nil, nil)
	h.expectError(404, "not_found", "GET", "/v1/tenants/acme/namespaces/prod", h.admin, nil)
}

func TestHTTPStreamCRUD(t *testing.T) {
	h := newHarness(t)
	base := "/v1/tenants/default/namespaces/default/streams"
	var sp wire.StreamSpec
	h.expect(201, "POST", base, h.admin, map[string]any{"stream": "orders"}, &sp)
	want := wire.StreamSpec{TenantID: "default", Namespace: "default", Stream: "orders", Shards: 1, Consistency: "leader", ReplicationFactor: 1}
	if sp.TenantID != want.TenantID || sp.Shards != 1 || sp.Consistency != "leader" || sp.ReplicationFactor != 1 {
		t.Fatalf("defaults not applied: %+v", sp)
	}
	h.expectError(409, "conflict", "POST", base, h.admin, map[string]any{"stream": "orders"})
	h.expectError(404, "not_found", "POST", "/v1/tenants/default/namespaces/nope/streams", h.admin, map[string]any{"stream": "x"}, `namespace "default/nope"`)

	h.expect(201, "POST", base, h.admin, map[string]any{"stream": "events", "shards": 8, "durable": true, "consistency": "leader", "replication_factor": 1,
		"retention": map[string]any{"max_age_seconds": 60}, "sub_queue_policy": "block"}, &sp)
	if sp.Shards != 8 || !sp.Durable || sp.Retention.MaxAgeSeconds == nil || *sp.Retention.MaxAgeSeconds != 60 {
		t.Fatalf("created %+v", sp)
	}
	var list listBody[wire.StreamSpec]
	h.expect(200, "GET", base, h.admin, nil, &list)
	if len(list.Items) != 2 || list.Items[0].Stream != "events" {
		t.Fatalf("list = %+v", list)
	}

	sp = wire.StreamSpec{}
	h.expect(200, "PATCH", base+"/events", h.admin, map[string]any{"sub_queue_policy": "drop_old", "retention": map[string]any{"max_size_bytes": 1024}}, &sp)
	if sp.SubQueuePolicy != "drop_old" || sp.Retention.MaxSizeBytes == nil || sp.Retention.MaxAgeSeconds != nil || sp.Shards != 8 {
		t.Fatalf("patched %+v", sp)
	}
	h.expect(200, "GET", base+"/events", h.admin, nil, &sp)
	if sp.SubQueuePolicy != "drop_old" {
		t.Fatalf("patch not stored: %+v", sp)
	}
	h.expectError(400, "invalid_request", "PATCH", base+"/events", h.admin, map[string]any{"shards": 2}, "shards", "cannot be changed")
	h.expectError(400, "invalid_request", "PATCH", base+"/events", h.admin, map[string]any{"durable": false}, "unknown field")
	h.expectError(400, "invalid_request", "PATCH", base+"/events", h.admin, map[string]any{"sub_queue_policy": "lossy"}, "sub_queue_policy")
	h.expectError(404, "not_found", "PATCH", base+"/missing", h.admin, map[string]any{"sub_queue_policy": "block"})

	h.expect(204, "DELETE", base+"/events", h.admin, nil, nil)
	h.expectError(404, "not_found", "GET", base+"/events", h.admin, nil)
	h.expectError(404, "not_found", "DELETE", base+"/events", h.admin, nil)
}

func TestHTTPCacheCRUD(t *testing.T) {
	h := newHarness(t)
	base := "/v1/tenants/default/namespaces/default/caches"
	var c wire.CacheSpec
	h.expect(201, "POST", base, h.admin, map[string]any{"cache": "sessions", "max_entries": 100}, &c)
	if c.TenantID != "default" || c.Namespace != "default" || c.MaxEntries != 100 {
		t.Fatalf("created %+v", c)
	}
	h.expectError(409, "conflict", "POST", base, h.admin, map[string]any{"cache": "sessions"})
	var list listBody[wire.CacheSpec]
	h.expect(200, "GET", base, h.admin, nil, &list)
	if len(list.Items) != 1 {
		t.Fatalf("list = %+v", list)
	}
	h.expect(200, "GET", base+"/sessions", h.admin, nil, &c)
	h.expect(204, "DELETE", base+"/sessions", h.admin, nil, nil)
	h.expectError(404, "not_found", "GET", base+"/sessions", h.admin, nil)
}

func TestHTTPDeleteWithChildren(t *testing.T) {
	h := newHarness(t)
	h.expect(201, "POST", "/v1/tenants/default/namespaces/default/streams", h.admin, map[string]any{"stream": "s"}, nil)
	h.expectError(409, "conflict", "DELETE", "/v1/tenants/default/namespaces/default", h.admin, nil, "recursive")
	h.expectError(409, "conflict", "DELETE", "/v1/tenants/default", h.admin, nil, "1 namespaces")
	h.expectError(400, "invalid_request", "DELETE", "/v1/tenants/default?recursive=maybe", h.admin, nil, "recursive")
	h.expect(204, "DELETE", "/v1/tenants/default?recursive=true", h.admin, nil, nil)
	h.expectError(404, "not_found", "GET", "/v1/tenants/default/namespaces/default/streams/s", h.admin, nil)
	// The admin token of the deleted tenant still verifies: tokens are not
	// revoked by deleting their tenant.
	h.expect(200, "GET", "/v1/tenants", h.admin, nil, nil)
}

func TestHTTPValidation(t *testing.T) {
	h := newHarness(t)
	streams := "/v1/tenants/default/namespaces/default/streams"
	cases := []struct {
		path     string
		body     any
		fragment string
	}{
		{"/v1/tenants", map[string]any{"tenant_id": ""}, "tenant_id: required"},
		{"/v1/tenants", map[string]any{"tenant_id": "a/b"}, "tenant_id"},
		{"/v1/tenants", map[string]any{"tenant_id": strings.Repeat("x", 129)}, "tenant_id"},
		{"/v1/tenants", map[string]any{"tenant_id": "ok", "extra": 1}, `unknown field "extra"`},
		{"/v1/tenants", "", "JSON object is required"},
		{"/v1/tenants", "{", "body"},
		{"/v1/tenants", `{"tenant_id":"a"} {}`, "after the JSON object"},
		{"/v1/tenants", map[string]any{"tenant_id": 5}, "tenant_id"},
		{streams, map[string]any{"stream": "s", "shards": 1025}, "shards"},
		{streams, map[string]any{"stream": "s", "consistency": "eventual"}, "consistency"},
		{streams, map[string]any{"stream": "s", "replication_factor": 8}, "replication_factor"},
		{streams, map[string]any{"stream": "s", "shards": 0}, "shards: 0 is out of range 1..1024"},
		{"/v1/tenants/default/namespaces/default/batch", map[string]any{"streams": []any{map[string]any{"stream": "s", "shards": 0}}}, "streams[0].shards: 0 is out of range"},
		{"/v1/tenants/default/namespaces/default/batch", map[string]any{"streams": []any{map[string]any{"stream": "s", "replication_factor": 8}}}, "streams[0]: replication_factor: 8 is out of range 1..7"},
		{"/v1/tenants/default/tokens", map[string]any{"sub": "x", "perms": []string{"stream.pub:stream:default/*"}}, `unknown action "stream.pub"`},
		{"/v1/tenants/default/tokens", map[string]any{"sub": "x", "perms": []string{"nothing.*:stream:default/*"}}, `unknown action "nothing.*"`},
		{streams, map[string]any{"stream": "s", "sub_queue_policy": "nope"}, "sub_queue_policy"},
		{streams, map[string]any{"stream": "bad name"}, "stream"},
		{streams, map[string]any{"stream": "s", "namespace": "other"}, "namespace"},
		{"/v1/tenants/default/namespaces/default/caches", map[string]any{"cache": ""}, "cache: required"},
		{"/v1/tenants/default/tokens", map[string]any{"sub": "x", "perms": []string{}}, "perms"},
		{"/v1/tenants/default/tokens", map[string]any{"sub": "x", "perms": []string{"nocolon"}}, "perms"},
		{"/v1/tenants/default/tokens", map[string]any{"sub": "", "perms": []string{"*:*"}}, "sub: required"},
		{"/v1/tenants/default/tokens", map[string]any{"sub": "x", "perms": []string{"*:*"}, "ttl_seconds": 0}, "ttl_seconds"},
		{"/v1/tenants/default/tokens", map[string]any{"sub": "x", "perms": []string{"*:*"}, "ttl_seconds": 400000000}, "ttl_seconds"},
	}
	for _, tc := range cases {
		h.expectError(400, "invalid_request", "POST", tc.path, h.admin, tc.body, tc.fragment)
	}
	h.expectError(400, "invalid_request", "PUT", "/v1/tenants/default/policies/r", h.admin,
		map[string]any{"permissions": []string{"cache.reed:cache:default/*"}}, `unknown action "cache.reed"`)
	// Several bad fields are reported together.
	h.expectError(400, "invalid_request", "POST", streams, h.admin, map[string]any{"stream": "s", "shards": 5000, "consistency": "x"}, "shards", "consistency")
	// A body over 1 MiB is refused.
	big := `{"tenant_id":"` + strings.Repeat("x", maxBodyBytes) + `"}`
	h.expectError(http.StatusRequestEntityTooLarge, "invalid_request", "POST", "/v1/tenants", h.admin, big, "body")
	// Bad path names are refused too.
	h.expectError(400, "invalid_request", "GET", "/v1/tenants/default/namespaces/bad%20name", h.admin, nil, "namespace (path)")
}

func TestHTTPUnknownRoute(t *testing.T) {
	h := newHarness(t)
	h.expectError(404, "not_found", "GET", "/v1/nothing", h.admin, nil, "no such route")
	h.expectError(405, "invalid_request", "PUT", "/v1/tenants/acme", h.admin, nil, "GET, DELETE")
	h.expectError(405, "invalid_request", "POST", "/v1/catalog/streams/snapshot", "", nil, "GET")
}
