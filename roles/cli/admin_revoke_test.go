package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/felixmq/felix/wire"
)

// fakeRevocations serves the revocation and members routes.
func fakeRevocations(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	revs := map[string]wire.Revocation{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tenants/{t}/revocations", func(w http.ResponseWriter, r *http.Request) {
		var req RevokeRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Subject == "" {
			apiErr(w, 400, "invalid_request", "subject: required")
			return
		}
		mu.Lock()
		defer mu.Unlock()
		rev := wire.Revocation{TenantID: r.PathValue("t"), Subject: req.Subject, Reason: req.Reason, RevokedBefore: 1700000000}
		revs[req.Subject] = rev
		writeJSON(w, 201, rev)
	})
	mux.HandleFunc("GET /v1/tenants/{t}/revocations", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		items := []wire.Revocation{}
		for _, v := range revs {
			items = append(items, v)
		}
		writeJSON(w, 200, map[string]any{"items": items})
	})
	mux.HandleFunc("DELETE /v1/tenants/{t}/revocations/{sub}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := revs[r.PathValue("sub")]; !ok {
			apiErr(w, 404, "not_found", "revocation does not exist")
			return
		}
		delete(revs, r.PathValue("sub"))
		w.WriteHeader(204)
	})
	mux.HandleFunc("GET /v1/members", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, Members{ID: 2, Leader: 1, Term: 3, Commit: 40, Applied: 39, Role: "StateFollower", Ready: true,
			Members: []Member{{ID: 1, URL: "https://a:7001", Voter: true, Leader: true}, {ID: 2, URL: "https://b:7001", Voter: true}, {ID: 3, URL: "https://c:7001"}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestAdminTokenRevokeCommands(t *testing.T) {
	clearEnv(t)
	srv := fakeRevocations(t)
	conn := adminArgs(t, srv)
	r := run(t, toolkit{}, nil, append([]string{"admin", "token", "revoke", "--sub", "worker", "--reason", "lost laptop"}, conn...)...)
	if r.err != nil || !strings.Contains(r.stdout, "revoked tokens of worker in tenant default") {
		t.Fatalf("revoke: %v %q %q", r.err, r.stdout, r.stderr)
	}
	r = run(t, toolkit{}, nil, append([]string{"admin", "token", "revocations"}, conn...)...)
	if r.err != nil || !strings.Contains(r.stdout, "worker") || !strings.Contains(r.stdout, "lost laptop") || !strings.Contains(r.stdout, "2023-11-14T22:13:20Z") {
		t.Fatalf("revocations: %v %q", r.err, r.stdout)
	}
	r = run(t, toolkit{}, nil, append([]string{"admin", "token", "unrevoke", "--sub", "worker"}, conn...)...)
	if r.err != nil || !strings.Contains(r.stdout, "lifted") {
		t.Fatalf("unrevoke: %v %q", r.err, r.stdout)
	}
	r = run(t, toolkit{}, nil, append([]string{"admin", "token", "unrevoke", "--sub", "worker"}, conn...)...)
	if r.err == nil || !strings.Contains(r.message(), "not revoked") {
		t.Fatalf("second unrevoke: %v %q", r.err, r.message())
	}
	r = run(t, toolkit{}, nil, append([]string{"admin", "token", "revoke"}, conn...)...)
	if r.exitCode() != 2 {
		t.Fatalf("revoke without --sub: exit %d", r.exitCode())
	}
}

func TestAdminMembersList(t *testing.T) {
	clearEnv(t)
	srv := fakeRevocations(t)
	conn := adminArgs(t, srv)
	r := run(t, toolkit{}, nil, append([]string{"admin", "members", "list"}, conn...)...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, want := range []string{"https://a:7001", "leader", "learner", "voter", "leader 1, term 3, commit 40, applied 39"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("members list lacks %q:\n%s", want, r.stdout)
		}
	}
	r = run(t, toolkit{}, nil, append([]string{"admin", "members", "list", "-o", "json"}, conn...)...)
	var m Members
	if r.err != nil || json.Unmarshal([]byte(r.stdout), &m) != nil || len(m.Members) != 3 || m.Leader != 1 {
		t.Fatalf("members json: %v %q", r.err, r.stdout)
	}
}
