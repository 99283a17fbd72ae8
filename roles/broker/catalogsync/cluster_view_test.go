package catalogsync

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/felixmq/felix/wire"
)

// The HTTP source fetches the view with known=TAG; 304 is "unchanged";
// a failing member is skipped; refusals come back typed.
func TestHTTPClusterView(t *testing.T) {
	view := wire.ClusterView{ClusterID: "c1", Tag: "3-abc", PlacementRevision: 3,
		Brokers:     []wire.Broker{{BrokerRegistration: wire.BrokerRegistration{NodeID: "b1"}, State: wire.BrokerLive}},
		Assignments: []wire.ShardAssignment{{Kind: wire.PlacementStream, TenantID: "t", Namespace: "ns", Name: "s", NodeID: "b1", Generation: 1}}}
	var sawKnown []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/cluster/view", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"error":{"code":"forbidden","message":"needs cluster.manage","retry":"fatal"}}`))
			return
		}
		known := r.URL.Query().Get("known")
		sawKnown = append(sawKnown, known)
		if known == view.Tag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		json.NewEncoder(w).Encode(view)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := context.Background()
	src := NewHTTPSourceMulti([]string{"http://127.0.0.1:1", srv.URL}, func() string { return "tok" }, nil).(*httpSource)
	v, changed, err := src.ClusterView(ctx, "")
	if err != nil || !changed || v.Tag != "3-abc" || v.ClusterID != "c1" || len(v.Brokers) != 1 || len(v.Assignments) != 1 {
		t.Fatalf("first fetch: %+v %v %v", v, changed, err)
	}
	v, changed, err = src.ClusterView(ctx, "3-abc")
	if err != nil || changed || v.Tag != "" {
		t.Fatalf("unchanged: %+v %v %v", v, changed, err)
	}
	if _, changed, err = src.ClusterView(ctx, "2-old"); err != nil || !changed {
		t.Fatalf("stale tag: %v %v", changed, err)
	}
	if len(sawKnown) != 3 || sawKnown[0] != "" || sawKnown[1] != "3-abc" || sawKnown[2] != "2-old" {
		t.Fatalf("known sent: %q", sawKnown)
	}
	bad := NewHTTPSource(srv.URL, func() string { return "other" }, nil).(*httpSource)
	_, _, err = bad.ClusterView(ctx, "")
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeForbidden {
		t.Fatalf("refusal: %v", err)
	}
}

// The watch sends the tag held and the wait, reads a 200 as the new tag
// and a 304 as unchanged.
func TestHTTPClusterViewWatch(t *testing.T) {
	mux := http.NewServeMux()
	var sawWait []string
	mux.HandleFunc("GET /v1/cluster/view/changes", func(w http.ResponseWriter, r *http.Request) {
		sawWait = append(sawWait, r.URL.Query().Get("wait_ms"))
		if r.URL.Query().Get("known") == "3-abc" {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Write([]byte(`{"tag":"3-abc"}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	src := NewHTTPSource(srv.URL, nil, nil).(*httpSource)
	tag, changed, err := src.WaitClusterViewChange(context.Background(), "2-old", 1500*time.Millisecond)
	if err != nil || !changed || tag != "3-abc" {
		t.Fatalf("stale tag: %q %v %v", tag, changed, err)
	}
	if tag, changed, err = src.WaitClusterViewChange(context.Background(), "3-abc", time.Second); err != nil || changed || tag != "" {
		t.Fatalf("current tag: %q %v %v", tag, changed, err)
	}
	if len(sawWait) != 2 || sawWait[0] != "1500" || sawWait[1] != "1000" {
		t.Fatalf("wait_ms sent: %v", sawWait)
	}
}
