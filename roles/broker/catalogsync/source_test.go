package catalogsync

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/felixmq/felix/wire"
)

// catalogServer serves src over the control plane's catalog routes,
// requiring "Bearer secret".
func catalogServer(t *testing.T, src *fakeSource) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	writeErr := func(w http.ResponseWriter, status int, code, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "retry": "fatal"}})
	}
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer secret" {
				writeErr(w, http.StatusUnauthorized, "unauthorized", "missing token")
				return
			}
			h(w, r)
		}
	}
	writeJSON := func(w http.ResponseWriter, v any, err error) {
		if err != nil {
			writeErr(w, http.StatusServiceUnavailable, "internal", err.Error())
			return
		}
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /v1/catalog/{kind}/snapshot", auth(func(w http.ResponseWriter, r *http.Request) {
		p, err := src.Snapshot(r.Context(), wire.CatalogKind(r.PathValue("kind")))
		writeJSON(w, p, err)
	}))
	mux.HandleFunc("GET /v1/catalog/{kind}/changes", auth(func(w http.ResponseWriter, r *http.Request) {
		var since uint64
		if err := json.Unmarshal([]byte(r.URL.Query().Get("since")), &since); err != nil {
			writeErr(w, http.StatusBadRequest, "invalid_request", "bad since")
			return
		}
		p, err := src.Changes(r.Context(), wire.CatalogKind(r.PathValue("kind")), since)
		writeJSON(w, p, err)
	}))
	mux.HandleFunc("GET /v1/jwks", auth(func(w http.ResponseWriter, r *http.Request) {
		b, err := src.JWKS(r.Context())
		if err != nil {
			writeErr(w, http.StatusServiceUnavailable, "internal", err.Error())
			return
		}
		w.Write(b)
	}))
	mux.HandleFunc("GET /plain", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream exploded", http.StatusBadGateway)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPSourceSyncsThroughTheRESTAPI(t *testing.T) {
	src := newFakeSource()
	src.put(wire.KindTenants, tenant("acme"))
	src.put(wire.KindNamespaces, namespace("acme", "prod"))
	src.put(wire.KindStreams, stream("acme", "prod", "orders", 2))
	srv := catalogServer(t, src)
	rec := &recorder{}
	s := NewSyncer(NewHTTPSource(srv.URL+"/", func() string { return "secret" }, srv.Client()), rec, 0, quiet)
	var jwks []byte
	s.OnJWKS = func(b []byte) { jwks = b }
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec, "+tenant acme ", "+ns acme/prod", "+stream acme/prod/orders shards=2")
	if string(jwks) != `{"keys":[]}` {
		t.Fatalf("jwks %q", jwks)
	}
	src.del(wire.KindNamespaces, namespace("acme", "prod"))
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, rec, "-ns acme/prod")
	calls := src.callLog()
	if !strings.Contains(strings.Join(calls, " "), "changes:namespaces@3") {
		t.Fatalf("changes not asked from the snapshot cursor: %q", calls)
	}
}

func TestHTTPSourceErrors(t *testing.T) {
	src := newFakeSource()
	srv := catalogServer(t, src)
	ctx := context.Background()

	anon := NewHTTPSource(srv.URL, nil, srv.Client())
	_, err := anon.Snapshot(ctx, wire.KindTenants)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeUnauthorized || !strings.Contains(err.Error(), "missing token") ||
		!strings.Contains(err.Error(), "401") {
		t.Fatalf("unauthenticated: %v", err)
	}

	authed := NewHTTPSource(srv.URL, func() string { return "secret" }, srv.Client())
	src.setFail("changes:tenants", errors.New("store is down"))
	if _, err := authed.Changes(ctx, wire.KindTenants, 7); err == nil || !strings.Contains(err.Error(), "store is down") {
		t.Fatalf("server error: %v", err)
	}

	plain := NewHTTPSource(srv.URL+"/plain?", nil, srv.Client()).(*httpSource)
	if _, err := plain.get(ctx, ""); err == nil || !strings.Contains(err.Error(), "upstream exploded") {
		t.Fatalf("non-JSON error body: %v", err)
	}

	small := NewHTTPSource(srv.URL, func() string { return "secret" }, srv.Client()).(*httpSource)
	small.maxBody = 4
	if _, err := small.JWKS(ctx); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized body: %v", err)
	}

	mismatch := NewHTTPSource(srv.URL, func() string { return "secret" }, srv.Client()).(*httpSource)
	src.put(wire.KindTenants, tenant("acme"))
	if _, err := mismatch.page(ctx, wire.KindStreams, "/v1/catalog/tenants/snapshot"); err == nil {
		t.Fatal("page of the wrong kind accepted")
	}
}
