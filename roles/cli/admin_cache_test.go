package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/felixmq/felix/wire"
)

// TestAdminCacheCreateShards checks felix admin cache create sends
// --shards as the cache's shard count, leaves it out when not given (the
// control plane's default), and refuses 0 before asking.
func TestAdminCacheCreateShards(t *testing.T) {
	clearEnv(t)
	var (
		mu     sync.Mutex
		bodies []map[string]any
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken || r.Method != http.MethodPost ||
			r.URL.Path != "/v1/tenants/default/namespaces/default/caches" {
			apiErr(w, 404, "not_found", r.Method+" "+r.URL.Path)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		var spec wire.CacheSpec
		if json.Unmarshal(b, &body) != nil || json.Unmarshal(b, &spec) != nil {
			apiErr(w, 400, "invalid_request", string(b))
			return
		}
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		writeJSON(w, 201, spec)
	}))
	t.Cleanup(srv.Close)
	conn := adminArgs(t, srv)
	cmd := func(args ...string) result { return run(t, toolkit{}, nil, append(args, conn...)...) }

	if r := cmd("admin", "cache", "create", "sessions", "--shards", "3", "--max-entries", "100"); r.err != nil ||
		r.stdout != "created cache default/default/sessions\n" {
		t.Fatalf("create: %q %v", r.stdout, r.err)
	}
	if r := cmd("admin", "cache", "create", "plain"); r.err != nil {
		t.Fatalf("create without --shards: %v", r.err)
	}
	if r := cmd("admin", "cache", "create", "none", "--shards", "0"); r.exitCode() != exitUsage {
		t.Fatalf("--shards 0: exit %d %q", r.exitCode(), r.message())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("%d creates reached the control plane, want 2: %v", len(bodies), bodies)
	}
	if bodies[0]["cache"] != "sessions" || bodies[0]["shards"] != float64(3) || bodies[0]["max_entries"] != float64(100) {
		t.Fatalf("create sent %v", bodies[0])
	}
	if _, ok := bodies[1]["shards"]; ok || bodies[1]["cache"] != "plain" {
		t.Fatalf("create without --shards sent %v", bodies[1])
	}
}
