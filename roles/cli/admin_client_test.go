package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/felixmq/felix/wire"
)

const testToken = "admin-token"

// fakeControlPlane serves the parts of the REST API the CLI uses, with
// streams kept in memory.
type fakeControlPlane struct {
	mu       sync.Mutex
	streams  map[string]wire.StreamSpec // by tenant/ns/stream
	deletes  []string                   // request URIs of DELETEs
	patches  []StreamPatch              // bodies of stream PATCHes
	tokenReq TokenRequest
}

func apiErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg, "retry": "fatal"}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (f *fakeControlPlane) handler() http.Handler {
	mux := http.NewServeMux()
	base := "/v1/tenants/{t}/namespaces/{ns}/streams"
	mux.HandleFunc("POST "+base, func(w http.ResponseWriter, r *http.Request) {
		var s wire.StreamSpec
		if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
			apiErr(w, 400, "invalid_request", err.Error())
			return
		}
		s.TenantID, s.Namespace = r.PathValue("t"), r.PathValue("ns")
		if s.Shards == 0 {
			s.Shards = 1
		}
		k := s.TenantID + "/" + s.Namespace + "/" + s.Stream
		if _, ok := f.streams[k]; ok {
			apiErr(w, 409, "conflict", "stream "+k+" exists")
			return
		}
		f.streams[k] = s
		writeJSON(w, 201, s)
	})
	mux.HandleFunc("GET "+base, func(w http.ResponseWriter, r *http.Request) {
		out := []wire.StreamSpec{}
		for _, s := range f.streams {
			out = append(out, s)
		}
		slices.SortFunc(out, func(a, b wire.StreamSpec) int { return strings.Compare(a.Stream, b.Stream) })
		writeJSON(w, 200, map[string]any{"streams": out})
	})
	mux.HandleFunc("GET "+base+"/{s}", func(w http.ResponseWriter, r *http.Request) {
		k := r.PathValue("t") + "/" + r.PathValue("ns") + "/" + r.PathValue("s")
		s, ok := f.streams[k]
		if !ok {
			apiErr(w, 404, "not_found", "no stream "+k)
			return
		}
		writeJSON(w, 200, s)
	})
	mux.HandleFunc("PATCH "+base+"/{s}", func(w http.ResponseWriter, r *http.Request) {
		k := r.PathValue("t") + "/" + r.PathValue("ns") + "/" + r.PathValue("s")
		s, ok := f.streams[k]
		if !ok {
			apiErr(w, 404, "not_found", "no stream "+k)
			return
		}
		var p StreamPatch
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			apiErr(w, 400, "invalid_request", err.Error())
			return
		}
		f.patches = append(f.patches, p)
		if p.Retention != nil { // replaces the whole retention, as the control plane does
			s.Retention = *p.Retention
		}
		if p.SubQueuePolicy != nil {
			s.SubQueuePolicy = *p.SubQueuePolicy
		}
		f.streams[k] = s
		writeJSON(w, 200, s)
	})
	mux.HandleFunc("DELETE /v1/tenants/full", func(w http.ResponseWriter, r *http.Request) {
		apiErr(w, 409, "conflict", "tenant full still holds 2 namespaces")
	})
	mux.HandleFunc("DELETE /", func(w http.ResponseWriter, r *http.Request) {
		f.deletes = append(f.deletes, r.URL.RequestURI())
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/tenants", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, []wire.Tenant{{TenantID: "default"}, {TenantID: "acme", DisplayName: "Acme"}})
	})
	mux.HandleFunc("GET /v1/tenants/boom", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "it broke", http.StatusInternalServerError)
	})
	mux.HandleFunc("POST /v1/tenants/{t}/tokens", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&f.tokenReq)
		writeJSON(w, 200, TokenResponse{Token: "minted." + r.PathValue("t"), ExpiresAt: "2026-11-30T00:00:00Z"})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			apiErr(w, 401, "unauthorized", "bad token")
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		mux.ServeHTTP(w, r)
	})
}

func startControlPlane(t *testing.T) (*fakeControlPlane, *httptest.Server) {
	t.Helper()
	f := &fakeControlPlane{streams: map[string]wire.StreamSpec{}}
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	return f, srv
}

func TestAdminClientStreams(t *testing.T) {
	_, srv := startControlPlane(t)
	a, err := NewAdminClient(Settings{ControlPlane: srv.URL + "/", Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	age := uint64(3600)
	spec := wire.StreamSpec{TenantID: "default", Namespace: "default", Stream: "events", Shards: 4,
		Retention: wire.Retention{MaxAgeSeconds: &age}}
	got, err := a.CreateStream(ctx, spec)
	if err != nil || got.Shards != 4 || *got.Retention.MaxAgeSeconds != 3600 {
		t.Fatalf("create: %+v %v", got, err)
	}
	if _, err := a.CreateStream(ctx, wire.StreamSpec{TenantID: "default", Namespace: "default", Stream: "other"}); err != nil {
		t.Fatal(err)
	}
	_, err = a.CreateStream(ctx, spec)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != "conflict" || ae.Status != 409 || !strings.Contains(ae.Message, "exists") {
		t.Fatalf("second create: %v", err)
	}
	list, err := a.Streams(ctx, "default", "default")
	if err != nil || len(list) != 2 || list[0].Stream != "events" || list[1].Shards != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
	one, err := a.Stream(ctx, "default", "default", "events")
	if err != nil || one.Stream != "events" {
		t.Fatalf("get: %+v %v", one, err)
	}
	_, err = a.Stream(ctx, "default", "default", "nope")
	if !errors.As(err, &ae) || ae.Code != "not_found" || ae.Status != 404 {
		t.Fatalf("get missing: %v", err)
	}
	if err := a.DeleteStream(ctx, "default", "default", "events"); err != nil {
		t.Fatal(err)
	}
	tenants, err := a.Tenants(ctx)
	if err != nil || len(tenants) != 2 || tenants[1].DisplayName != "Acme" {
		t.Fatalf("tenants (bare array): %+v %v", tenants, err)
	}
}

func TestAdminClientErrors(t *testing.T) {
	f, srv := startControlPlane(t)
	ctx := context.Background()
	bad, _ := NewAdminClient(Settings{ControlPlane: srv.URL, Token: "wrong"})
	_, err := bad.Tenants(ctx)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != "unauthorized" || ae.Status != 401 || ae.Message != "bad token" {
		t.Fatalf("bad token: %v", err)
	}
	a, _ := NewAdminClient(Settings{ControlPlane: strings.TrimPrefix(srv.URL, "http://"), Token: testToken})
	_, err = a.Tenant(ctx, "boom")
	if !errors.As(err, &ae) || ae.Code != "internal" || ae.Status != 500 || ae.Message != "it broke" {
		t.Fatalf("plain-text 500: %v", err)
	}
	if err := a.DeleteNamespace(ctx, "acme", "prod", true); err != nil {
		t.Fatal(err)
	}
	if got := f.deletes; len(got) != 1 || got[0] != "/v1/tenants/acme/namespaces/prod?recursive=true" {
		t.Fatalf("deletes %q", got)
	}
	if _, err := NewAdminClient(Settings{ControlPlane: "ftp://x", Token: "t"}); err == nil {
		t.Fatal("ftp URL accepted")
	}
}

func TestDecodeList(t *testing.T) {
	for _, raw := range []string{`[{"tenant_id":"a"}]`, `{"tenants":[{"tenant_id":"a"}]}`,
		`{"items":[{"tenant_id":"a"}],"next":""}`, `{"whatever":[{"tenant_id":"a"}]}`} {
		got, err := decodeList[wire.Tenant](json.RawMessage(raw), "tenants")
		if err != nil || len(got) != 1 || got[0].TenantID != "a" {
			t.Errorf("%s: %+v %v", raw, got, err)
		}
	}
	if _, err := decodeList[wire.Tenant](json.RawMessage(`{"n":1}`), "tenants"); err == nil {
		t.Error("object without a list accepted")
	}
}

// adminArgs are the connection flags pointing at srv with a token file.
func adminArgs(t *testing.T, srv *httptest.Server) []string {
	t.Helper()
	dir := t.TempDir()
	tok := filepath.Join(dir, "t.token")
	if err := os.WriteFile(tok, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--controlplane", srv.URL, "--token-file", tok, "--data-dir", dir}
}

func TestAdminDeleteNeedsYesWithoutTerminal(t *testing.T) {
	clearEnv(t)
	f, srv := startControlPlane(t)
	conn := adminArgs(t, srv)

	r := run(t, toolkit{}, strings.NewReader("y\n"), append([]string{"admin", "stream", "delete", "events"}, conn...)...)
	if r.exitCode() != exitUsage || !strings.Contains(r.message(), "--yes") {
		t.Fatalf("without --yes: exit %d %q", r.exitCode(), r.message())
	}
	if len(f.deletes) != 0 {
		t.Fatalf("deleted without --yes: %q", f.deletes)
	}

	r = run(t, toolkit{}, nil, append([]string{"admin", "stream", "delete", "events", "--yes"}, conn...)...)
	if r.err != nil || r.stdout != "deleted stream default/default/events\n" {
		t.Fatalf("with --yes: %q %v", r.stdout, r.err)
	}
	if len(f.deletes) != 1 || f.deletes[0] != "/v1/tenants/default/namespaces/default/streams/events" {
		t.Fatalf("deletes %q", f.deletes)
	}
}

func TestAdminStreamCommands(t *testing.T) {
	clearEnv(t)
	f, srv := startControlPlane(t)
	conn := adminArgs(t, srv)
	cmd := func(args ...string) result { return run(t, toolkit{}, nil, append(args, conn...)...) }

	r := cmd("admin", "stream", "create", "events", "--shards", "3", "--durable", "--retention-age", "24h",
		"--retention-bytes", "1000", "--policy", "block", "--consistency", "quorum", "--replication-factor", "3")
	if r.err != nil || r.stdout != "created stream default/default/events\n" {
		t.Fatalf("create: %q %v", r.stdout, r.err)
	}
	s := f.streams["default/default/events"]
	if s.Shards != 3 || !s.Durable || *s.Retention.MaxAgeSeconds != 86400 || *s.Retention.MaxSizeBytes != 1000 ||
		s.SubQueuePolicy != "block" || s.Consistency != "quorum" || s.ReplicationFactor != 3 {
		t.Fatalf("stored %+v", s)
	}
	r = cmd("admin", "stream", "create", "events")
	if r.exitCode() != 1 || !strings.Contains(r.message(), "(code conflict)\nhint: it already exists; see it with felix admin stream get events") {
		t.Fatalf("duplicate: exit %d %q", r.exitCode(), r.message())
	}
	r = cmd("admin", "tenant", "delete", "full", "--yes")
	if r.exitCode() != 1 || !strings.Contains(r.message(), "(code conflict)\nhint: it still holds resources; pass --recursive") {
		t.Fatalf("delete non-empty: exit %d %q", r.exitCode(), r.message())
	}
	r = cmd("admin", "stream", "get", "nope")
	if r.exitCode() != 1 || !strings.Contains(r.message(), "(code not_found)\nhint: ") {
		t.Fatalf("missing: exit %d %q", r.exitCode(), r.message())
	}
	r = cmd("admin", "stream", "list", "-o", "json")
	var list []wire.StreamSpec
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0].Stream != "events" {
		t.Fatalf("list json %q: %v %v", r.stdout, err, r.err)
	}
	r = cmd("admin", "stream", "get", "events")
	if r.err != nil || !strings.HasPrefix(r.stdout, "STREAM") || !strings.Contains(r.stdout, "events") ||
		!strings.Contains(r.stdout, "1000 bytes, 24h0m0s") {
		t.Fatalf("get text: %q %v", r.stdout, r.err)
	}
	if r := cmd("admin", "stream", "create", "x", "--policy", "sometimes"); r.exitCode() != exitUsage {
		t.Fatalf("bad policy: exit %d", r.exitCode())
	}
	r = cmd("admin", "token", "create", "--sub", "worker", "--perms", "stream.publish:stream:default/default/*,cache.read:cache:default", "--ttl", "1h", "-o", "json")
	var tok TokenResponse
	if err := json.Unmarshal([]byte(r.stdout), &tok); err != nil || tok.Token != "minted.default" || tok.ExpiresAt == "" {
		t.Fatalf("token json %q: %v %v", r.stdout, err, r.err)
	}
	if f.tokenReq.Subject != "worker" || len(f.tokenReq.Perms) != 2 || f.tokenReq.TTLSeconds != 3600 {
		t.Fatalf("token request %+v", f.tokenReq)
	}
	if r := cmd("admin", "token", "create", "--perms", "*:*"); r.exitCode() != exitUsage {
		t.Fatalf("token without --sub: exit %d", r.exitCode())
	}
}

// A control plane that cannot be dialled is passed over for the
// cluster's next one, which then answers every request, writes included.
func TestAdminClientMovesOnToTheNextControlPlane(t *testing.T) {
	_, srv := startControlPlane(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	a, err := NewAdminClient(Settings{ControlPlane: down, MoreControlPlanes: []string{srv.URL}, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	if _, err := a.CreateStream(ctx, wire.StreamSpec{TenantID: "default", Namespace: "default", Stream: "s"}); err != nil {
		t.Fatalf("create through the second control plane: %v", err)
	}
	if list, err := a.Streams(ctx, "default", "default"); err != nil || len(list) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
	b, err := NewAdminClient(Settings{ControlPlane: down, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Tenants(ctx); err == nil {
		t.Fatal("a control plane that cannot be dialled answered")
	}
}
