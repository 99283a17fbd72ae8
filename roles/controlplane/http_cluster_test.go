package controlplane

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/felixmq/felix/wire"
)

func TestHTTPRevocations(t *testing.T) {
	h := newHarness(t)
	h.expect(201, "POST", "/v1/tenants", h.admin, wire.Tenant{TenantID: "acme"}, nil)
	tenantAdmin := h.token("acme", "ops", "tenant.manage:tenant:acme")
	other := h.token("default", "x", "tenant.manage:tenant:default")

	var rev wire.Revocation
	h.expect(201, "POST", "/v1/tenants/acme/revocations", tenantAdmin, map[string]string{"subject": "svc/worker", "reason": "rotated"}, &rev)
	if rev.TenantID != "acme" || rev.Subject != "svc/worker" || rev.RevokedBefore == 0 || rev.Reason != "rotated" {
		t.Fatalf("revocation = %+v", rev)
	}
	h.expectError(401, "unauthorized", "POST", "/v1/tenants/acme/revocations", other, map[string]string{"subject": "y"})
	h.expectError(400, "invalid_request", "POST", "/v1/tenants/acme/revocations", tenantAdmin, map[string]string{}, "subject")
	h.expectError(404, "not_found", "POST", "/v1/tenants/ghost/revocations", h.admin, map[string]string{"subject": "y"}, "ghost")

	var list struct{ Items []wire.Revocation }
	h.expect(200, "GET", "/v1/tenants/acme/revocations", tenantAdmin, nil, &list)
	if len(list.Items) != 1 || list.Items[0].Subject != "svc/worker" {
		t.Fatalf("list = %+v", list)
	}
	// The feed serves the kind like any other.
	var page wire.CatalogPage
	h.expect(200, "GET", "/v1/catalog/revocations/snapshot", h.admin, nil, &page)
	if page.Kind != wire.KindRevocations || len(page.Items) != 1 || page.Items[0].Revocation == nil {
		t.Fatalf("snapshot = %+v", page)
	}
	h.expect(204, "DELETE", "/v1/tenants/acme/revocations/svc%2Fworker", tenantAdmin, nil, nil)
	h.expectError(404, "not_found", "DELETE", "/v1/tenants/acme/revocations/svc%2Fworker", tenantAdmin, nil)
	var ch wire.CatalogPage
	h.expect(200, "GET", "/v1/catalog/revocations/changes?since=1", h.admin, nil, &ch)
	if len(ch.Items) != 1 || ch.Items[0].Op != wire.OpDelete || ch.Items[0].Revocation.Subject != "svc/worker" {
		t.Fatalf("changes = %+v", ch)
	}
}

func TestHTTPBatchCreate(t *testing.T) {
	h := newHarness(t)
	path := "/v1/tenants/default/namespaces/default/batch"
	body := map[string]any{
		"idempotency_key": "deploy-42",
		"streams":         []map[string]any{{"stream": "orders", "shards": 2}, {"stream": "audit", "durable": true}},
		"caches":          []map[string]any{{"cache": "sessions"}},
	}
	var res batchResponse
	h.expect(201, "POST", path, h.admin, body, &res)
	if res.Replayed || len(res.Streams) != 2 || res.Streams[1].Shards != 1 || res.Streams[0].TenantID != "default" {
		t.Fatalf("batch = %+v", res)
	}
	h.expect(201, "POST", path, h.admin, body, &res)
	if !res.Replayed {
		t.Fatal("a retried batch was not reported as replayed")
	}
	// Without the key, the same batch conflicts, and nothing of it is kept.
	h.expectError(409, "conflict", "POST", path, h.admin, map[string]any{
		"streams": []map[string]any{{"stream": "fresh"}, {"stream": "orders"}},
	}, "orders")
	h.expectError(404, "not_found", "GET", "/v1/tenants/default/namespaces/default/streams/fresh", h.admin, nil)
	h.expectError(400, "invalid_request", "POST", path, h.admin, map[string]any{
		"streams": []map[string]any{{"stream": "a b"}, {"stream": "x", "shards": 0}, {"stream": "x"}},
	}, "streams[0]", "twice")
	h.expectError(400, "invalid_request", "POST", path, h.admin, map[string]any{}, "streams")
	h.expectError(404, "not_found", "POST", "/v1/tenants/default/namespaces/nope/batch", h.admin, map[string]any{
		"streams": []map[string]any{{"stream": "x"}},
	}, "nope")
}

func TestHTTPMembersAndReady(t *testing.T) {
	h := newHarness(t)
	var m membersBody
	h.expect(200, "GET", "/v1/members", h.admin, nil, &m)
	if m.ID != 1 || m.Leader != 1 || !m.Ready || len(m.Members) != 1 || !m.Members[0].Voter || !m.Members[0].Leader || m.Applied == 0 {
		t.Fatalf("members = %+v", m)
	}
	h.expectError(403, "forbidden", "GET", "/v1/members", h.token("default", "x", "tenant.manage:tenant:default"), nil)
	h.expect(200, "GET", "/ready", "", nil, nil)
}

// A member cut off from its group answers /ready with 503.
func TestReadyFalseWithoutQuorum(t *testing.T) {
	g := openTestGroup(t, 3)
	svc, err := New(Config{Logger: quietLogger()}, &spreadStore{RaftStore: g.stores[1], members: []*RaftStore{g.stores[1]}})
	must(t, err)
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	status := func() int {
		resp, err := http.Get(srv.URL + "/ready")
		must(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor(t, "ready with a quorum", func() bool { return status() == 200 })
	g.stop(2)
	g.stop(3)
	waitFor(t, "not ready without a quorum", func() bool { return status() == 503 })
	g.restart(2)
	waitFor(t, "ready again", func() bool { return status() == 200 })
}
