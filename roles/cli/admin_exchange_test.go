package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeAuthPlane serves the RBAC, OIDC, exchange, refresh and key rotation
// routes in memory.
type fakeAuthPlane struct {
	mu       sync.Mutex
	policies map[string][]string
	assigned map[[2]string]bool
	oidc     *OIDCConfig
	bearers  []string // Authorization headers seen by exchange
}

func (f *fakeAuthPlane) server(t *testing.T) *httptest.Server {
	f.policies, f.assigned = map[string][]string{}, map[[2]string]bool{}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/tenants/{t}/policies/{role}", func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Permissions []string }
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.policies[r.PathValue("role")] = body.Permissions
		writeJSON(w, 200, Policy{Tenant: r.PathValue("t"), Role: r.PathValue("role"), Permissions: body.Permissions})
	})
	mux.HandleFunc("DELETE /v1/tenants/{t}/policies/{role}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.policies[r.PathValue("role")]; !ok {
			apiErr(w, 404, "not_found", "no such role")
			return
		}
		delete(f.policies, r.PathValue("role"))
		w.WriteHeader(204)
	})
	mux.HandleFunc("GET /v1/tenants/{t}/policies", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		items := []Policy{}
		for role, perms := range f.policies {
			items = append(items, Policy{Tenant: r.PathValue("t"), Role: role, Permissions: perms})
		}
		writeJSON(w, 200, map[string]any{"items": items})
	})
	mux.HandleFunc("PUT /v1/tenants/{t}/principals/{p}/roles/{role}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.assigned[[2]string{r.PathValue("p"), r.PathValue("role")}] = true
		writeJSON(w, 200, Assignment{Tenant: r.PathValue("t"), Principal: r.PathValue("p"), Role: r.PathValue("role")})
	})
	mux.HandleFunc("DELETE /v1/tenants/{t}/principals/{p}/roles/{role}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.assigned, [2]string{r.PathValue("p"), r.PathValue("role")})
		w.WriteHeader(204)
	})
	mux.HandleFunc("DELETE /v1/tenants/{t}/principals/{p}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for k := range f.assigned {
			if k[0] == r.PathValue("p") {
				delete(f.assigned, k)
			}
		}
		w.WriteHeader(204)
	})
	mux.HandleFunc("GET /v1/tenants/{t}/assignments", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		items := []Assignment{}
		for k := range f.assigned {
			if p := r.URL.Query().Get("principal"); p == "" || p == k[0] {
				items = append(items, Assignment{Tenant: r.PathValue("t"), Principal: k[0], Role: k[1]})
			}
		}
		writeJSON(w, 200, map[string]any{"items": items})
	})
	mux.HandleFunc("PUT /v1/tenants/{t}/oidc", func(w http.ResponseWriter, r *http.Request) {
		var c OIDCConfig
		json.NewDecoder(r.Body).Decode(&c)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.oidc = &c
		writeJSON(w, 200, c)
	})
	mux.HandleFunc("GET /v1/tenants/{t}/oidc", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.oidc == nil {
			apiErr(w, 404, "not_found", "no OIDC issuer configured")
			return
		}
		writeJSON(w, 200, f.oidc)
	})
	mux.HandleFunc("POST /v1/tenants/{t}/token/exchange", func(w http.ResponseWriter, r *http.Request) {
		var req ExchangeRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.bearers = append(f.bearers, r.Header.Get("Authorization"))
		f.mu.Unlock()
		writeJSON(w, 200, ExchangeResponse{Token: "felix-token", RefreshToken: "frt1.f.0.s", Subject: "alice", Permissions: req.Actions})
	})
	mux.HandleFunc("POST /v1/tenants/{t}/token/refresh", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			RefreshToken string `json:"refresh_token"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if req.RefreshToken != "frt1.f.0.s" {
			apiErr(w, 401, "unauthorized", "unknown refresh token")
			return
		}
		writeJSON(w, 200, ExchangeResponse{Token: "felix-token-2", RefreshToken: "frt1.f.1.s"})
	})
	mux.HandleFunc("POST /v1/signing-keys/rotate", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, RotateResponse{KID: "new", KIDs: []string{"new", "old"}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestAdminRBACCommands(t *testing.T) {
	clearEnv(t)
	f := &fakeAuthPlane{}
	conn := adminArgs(t, f.server(t))
	cmd := func(args ...string) result { return run(t, toolkit{}, nil, append(args, conn...)...) }
	if r := cmd("admin", "rbac", "policy", "add", "reader", "stream.subscribe:stream:default/default/*"); r.err != nil {
		t.Fatalf("policy add: %v %s", r.err, r.stderr)
	}
	if r := cmd("admin", "rbac", "policy", "add", "reader", "cache.read:cache:default/default/c/k,stream.subscribe:stream:default/default/*"); r.err != nil {
		t.Fatal(r.err)
	}
	if got := f.policies["reader"]; len(got) != 2 || !slices.Contains(got, "cache.read:cache:default/default/c/k") {
		t.Fatalf("policy after two adds: %v", got)
	}
	r := cmd("admin", "rbac", "policy", "list")
	if r.err != nil || !strings.Contains(r.stdout, "reader") || !strings.Contains(r.stdout, "cache.read") {
		t.Fatalf("policy list: %v %q", r.err, r.stdout)
	}
	if r := cmd("admin", "rbac", "policy", "remove", "reader", "cache.read:cache:default/default/c/k"); r.err != nil || len(f.policies["reader"]) != 1 {
		t.Fatalf("policy remove perm: %v %v", r.err, f.policies)
	}
	if r := cmd("admin", "rbac", "role", "assign", "alice", "reader"); r.err != nil || !f.assigned[[2]string{"alice", "reader"}] {
		t.Fatalf("assign: %v", r.err)
	}
	r = cmd("admin", "rbac", "role", "list", "--principal", "alice", "-o", "json")
	var as []Assignment
	if r.err != nil || json.Unmarshal([]byte(r.stdout), &as) != nil || len(as) != 1 || as[0].Role != "reader" {
		t.Fatalf("role list: %v %q", r.err, r.stdout)
	}
	if r := cmd("admin", "rbac", "role", "unassign", "alice", "reader"); r.err != nil || len(f.assigned) != 0 {
		t.Fatalf("unassign: %v %v", r.err, f.assigned)
	}
	cmd("admin", "rbac", "role", "assign", "bob", "reader")
	if r := cmd("admin", "rbac", "role", "unassign", "bob", "--all"); r.err != nil || len(f.assigned) != 0 {
		t.Fatalf("unassign --all: %v %v", r.err, f.assigned)
	}
	if r := cmd("admin", "rbac", "role", "unassign", "bob"); r.exitCode() != 2 {
		t.Fatalf("unassign without role or --all: exit %d", r.exitCode())
	}
	if r := cmd("admin", "rbac", "policy", "remove", "reader"); r.err != nil || len(f.policies) != 0 {
		t.Fatalf("policy remove: %v %v", r.err, f.policies)
	}
	if r := cmd("admin", "rbac", "policy", "remove", "reader"); r.err == nil || !strings.Contains(r.message(), "policy list") {
		t.Fatalf("removing a missing role: %v", r.err)
	}
}

func TestAdminOIDCExchangeAndRotate(t *testing.T) {
	clearEnv(t)
	f := &fakeAuthPlane{}
	conn := adminArgs(t, f.server(t))
	cmd := func(args ...string) result { return run(t, toolkit{}, nil, append(args, conn...)...) }
	if r := cmd("admin", "oidc", "get"); r.err == nil || !strings.Contains(r.message(), "oidc set") {
		t.Fatalf("get before set: %v", r.err)
	}
	if r := cmd("admin", "oidc", "set", "--issuer", "https://idp", "--audience", "felix"); r.exitCode() != 2 {
		t.Fatalf("set without JWKS: exit %d", r.exitCode())
	}
	if r := cmd("admin", "oidc", "set", "--issuer", "https://idp", "--audience", "felix", "--jwks-file", "/etc/jwks"); r.err != nil {
		t.Fatal(r.err)
	}
	if r := cmd("admin", "oidc", "get"); r.err != nil || !strings.Contains(r.stdout, "/etc/jwks") || !strings.Contains(r.stdout, "sub") {
		t.Fatalf("get: %v %q", r.err, r.stdout)
	}

	dir := t.TempDir()
	idFile, rtFile := filepath.Join(dir, "id.jwt"), filepath.Join(dir, "rt")
	if err := os.WriteFile(idFile, []byte("upstream.jwt.value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := cmd("admin", "token", "exchange", "--oidc-token", idFile, "--actions", "stream.subscribe", "--refresh-out", rtFile)
	if r.err != nil || strings.TrimSpace(r.stdout) != "felix-token" {
		t.Fatalf("exchange: %v %q %q", r.err, r.stdout, r.stderr)
	}
	if len(f.bearers) != 1 || f.bearers[0] != "Bearer upstream.jwt.value" {
		t.Fatalf("exchange sent %q", f.bearers)
	}
	r = cmd("admin", "token", "refresh", "--refresh-token", rtFile, "--refresh-out", rtFile, "-o", "json")
	var out ExchangeResponse
	if r.err != nil || json.Unmarshal([]byte(r.stdout), &out) != nil || out.Token != "felix-token-2" {
		t.Fatalf("refresh: %v %q", r.err, r.stdout)
	}
	if b, _ := os.ReadFile(rtFile); strings.TrimSpace(string(b)) != "frt1.f.1.s" {
		t.Fatalf("refresh token file holds %q", b)
	}
	if r := cmd("admin", "token", "refresh", "--refresh-token", rtFile); r.err == nil || !strings.Contains(r.message(), "unknown refresh token") {
		t.Fatalf("stale refresh: %v", r.err)
	}
	if r := cmd("admin", "token", "exchange"); r.exitCode() != 2 {
		t.Fatalf("exchange without --oidc-token: exit %d", r.exitCode())
	}
	if r := cmd("admin", "token", "rotate-key"); r.err != nil || !strings.Contains(r.stdout, "signing key is now new") {
		t.Fatalf("rotate-key: %v %q", r.err, r.stdout)
	}
}
