package controlplane

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/wire"
)

func TestHTTPSnapshotThenChanges(t *testing.T) {
	h := newHarness(t)
	var snap wire.CatalogPage
	h.expect(200, "GET", "/v1/catalog/streams/snapshot", h.admin, nil, &snap)
	if snap.Kind != wire.KindStreams || snap.Seq != 0 || snap.Items == nil || len(snap.Items) != 0 {
		t.Fatalf("empty snapshot = %+v", snap)
	}
	base := "/v1/tenants/default/namespaces/default/streams"
	h.expect(201, "POST", base, h.admin, map[string]any{"stream": "a"}, nil)
	h.expect(201, "POST", base, h.admin, map[string]any{"stream": "b"}, nil)
	h.expect(200, "GET", "/v1/catalog/streams/snapshot", h.admin, nil, &snap)
	if snap.Seq != 2 || len(snap.Items) != 2 {
		t.Fatalf("snapshot = %+v", snap)
	}
	h.expect(201, "POST", base, h.admin, map[string]any{"stream": "c"}, nil)
	h.expect(204, "DELETE", base+"/a", h.admin, nil, nil)

	var ch wire.CatalogPage
	h.expect(200, "GET", fmt.Sprintf("/v1/catalog/streams/changes?since=%d", snap.Seq), h.admin, nil, &ch)
	if len(ch.Items) != 2 || ch.Seq != 4 || ch.Reset {
		t.Fatalf("changes = %+v", ch)
	}
	if it := ch.Items[0]; it.Op != wire.OpPut || it.Seq != 3 || it.Stream == nil || it.Stream.Stream != "c" {
		t.Fatalf("first change = %+v", it)
	}
	if it := ch.Items[1]; it.Op != wire.OpDelete || it.Seq != 4 || it.Stream == nil || it.Stream.Stream != "a" {
		t.Fatalf("second change = %+v", it)
	}
	ch = wire.CatalogPage{}
	h.expect(200, "GET", "/v1/catalog/streams/changes?since=3&limit=1", h.admin, nil, &ch)
	if len(ch.Items) != 1 || ch.Seq != 4 {
		t.Fatalf("limited changes = %+v", ch)
	}
	h.expectError(400, "invalid_request", "GET", "/v1/catalog/widgets/snapshot", h.admin, nil, "kind")
	h.expectError(400, "invalid_request", "GET", "/v1/catalog/streams/changes?since=-1", h.admin, nil, "since")
	h.expectError(400, "invalid_request", "GET", "/v1/catalog/streams/changes?limit=0", h.admin, nil, "limit")
}

func TestHTTPChangesResetAfterTrim(t *testing.T) {
	h := newHarness(t, withKeep(2))
	for _, name := range []string{"a", "b", "c", "d"} {
		h.expect(201, "POST", "/v1/tenants", h.admin, wire.Tenant{TenantID: name}, nil)
	}
	// Tenants: default (1), a..d (2..5); entries 4 and 5 are kept.
	var ch wire.CatalogPage
	h.expect(200, "GET", "/v1/catalog/tenants/changes?since=1", h.admin, nil, &ch)
	if !ch.Reset || len(ch.Items) != 0 {
		t.Fatalf("changes after trim = %+v, want reset", ch)
	}
	status, raw := h.do("GET", "/v1/catalog/tenants/changes?since=1", h.admin, nil)
	if status != 200 || !strings.Contains(string(raw), `"reset":true`) || !strings.Contains(string(raw), `"items":[]`) {
		t.Fatalf("reset page on the wire: %d %s", status, raw)
	}
	ch = wire.CatalogPage{}
	h.expect(200, "GET", "/v1/catalog/tenants/changes?since=3", h.admin, nil, &ch)
	if ch.Reset || len(ch.Items) != 2 {
		t.Fatalf("changes since 3 = %+v", ch)
	}
}

func TestHTTPRecursiveDeleteFeeds(t *testing.T) {
	h := newHarness(t)
	h.expect(201, "POST", "/v1/tenants/default/namespaces/default/streams", h.admin, map[string]any{"stream": "s"}, nil)
	h.expect(201, "POST", "/v1/tenants/default/namespaces/default/caches", h.admin, map[string]any{"cache": "c"}, nil)
	h.expect(204, "DELETE", "/v1/tenants/default/namespaces/default?recursive=1", h.admin, nil, nil)
	for kind, name := range map[string]string{"streams": "s", "caches": "c", "namespaces": "default"} {
		var ch wire.CatalogPage
		h.expect(200, "GET", "/v1/catalog/"+kind+"/changes?since=1", h.admin, nil, &ch)
		if len(ch.Items) != 1 || ch.Items[0].Op != wire.OpDelete {
			t.Fatalf("%s changes = %+v", kind, ch)
		}
		b, _ := json.Marshal(ch.Items[0])
		if !strings.Contains(string(b), `"`+name+`"`) {
			t.Fatalf("%s delete does not name %q: %s", kind, name, b)
		}
	}
}

func TestOpenAPIListsEveryRoute(t *testing.T) {
	h := newHarness(t)
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
		Comps   struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	h.expect(200, "GET", "/v1/openapi.json", "", nil, &doc)
	if !strings.HasPrefix(doc.OpenAPI, "3.0") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	for _, rt := range h.svc.routes() {
		op, ok := doc.Paths[rt.path][strings.ToLower(rt.method)]
		if !ok {
			t.Errorf("route %s missing from the OpenAPI document", rt.pattern())
			continue
		}
		if _, ok := op["responses"]; !ok {
			t.Errorf("route %s has no responses", rt.pattern())
		}
		for _, name := range []string{rt.request, rt.response} {
			if name != "" && doc.Comps.Schemas[name] == nil {
				t.Errorf("route %s names missing schema %q", rt.pattern(), name)
			}
		}
	}
	// Every $ref resolves.
	status, raw := h.do("GET", "/v1/openapi.json", "", nil)
	if status != 200 {
		t.Fatal(status)
	}
	for _, part := range strings.Split(string(raw), `"$ref":"#/components/schemas/`)[1:] {
		name, _, _ := strings.Cut(part, `"`)
		if doc.Comps.Schemas[name] == nil {
			t.Errorf("dangling $ref %q", name)
		}
	}
}

func TestRequestMetrics(t *testing.T) {
	h := newHarness(t)
	h.expect(200, "GET", "/v1/tenants/default", h.admin, nil, nil)
	h.expect(200, "GET", "/v1/tenants/default", h.admin, nil, nil)
	h.expectError(404, "not_found", "GET", "/v1/tenants/ghost", h.admin, nil)
	var sb strings.Builder
	metrics.WritePrometheus(&sb, false)
	out := sb.String()
	for _, want := range []string{
		`felix_controlplane_requests_total{route="GET /v1/tenants/{tenant}",code="200"}`,
		`felix_controlplane_requests_total{route="GET /v1/tenants/{tenant}",code="404"}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(out, "ghost") {
		t.Error("a raw path leaked into a metric label")
	}
}
