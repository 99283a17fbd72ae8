package catalogsync

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/felixmq/felix/wire"
)

func TestHTTPRegistry(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/brokers", func(w http.ResponseWriter, r *http.Request) {
		var reg wire.BrokerRegistration
		if r.Header.Get("Authorization") != "Bearer tok" || json.NewDecoder(r.Body).Decode(&reg) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		if reg.StorageID == "dup" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error":{"code":"conflict","message":"duplicate node id","retry":"fatal"}}`))
			return
		}
		json.NewEncoder(w).Encode(wire.Broker{BrokerRegistration: reg, State: wire.BrokerLive})
	})
	mux.HandleFunc("POST /v1/brokers/{node}/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		var hb wire.BrokerHeartbeat
		json.NewDecoder(r.Body).Decode(&hb)
		json.NewEncoder(w).Encode(wire.Broker{BrokerRegistration: wire.BrokerRegistration{NodeID: r.PathValue("node"), StorageID: hb.StorageID}})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	// The first member is down: the calls fail over to the second.
	src := NewHTTPSourceMulti([]string{"http://127.0.0.1:1", srv.URL}, func() string { return "tok" }, nil).(*httpSource)
	ctx := context.Background()
	br, err := src.RegisterBroker(ctx, wire.BrokerRegistration{NodeID: "b1", StorageID: "s1", ClientAddrs: []string{"x:1"}})
	if err != nil || br.NodeID != "b1" || br.State != wire.BrokerLive {
		t.Fatalf("register: %+v %v", br, err)
	}
	if br, err = src.HeartbeatBroker(ctx, wire.BrokerHeartbeat{NodeID: "b1", StorageID: "s1"}); err != nil || br.NodeID != "b1" || br.StorageID != "s1" {
		t.Fatalf("heartbeat: %+v %v", br, err)
	}
	_, err = src.RegisterBroker(ctx, wire.BrokerRegistration{NodeID: "b1", StorageID: "dup"})
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != "conflict" || we.Retry != wire.RetryFatal {
		t.Fatalf("refusal: %v", err)
	}
}

func TestHTTPHandOffShard(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/placement/handoff", func(w http.ResponseWriter, r *http.Request) {
		var req wire.HandoffRequest
		if r.Header.Get("Authorization") != "Bearer tok" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		if req.Generation != 4 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error":{"code":"conflict","message":"stale","retry":"fatal","detail":{"reason":"stale_generation"}}}`))
			return
		}
		json.NewEncoder(w).Encode(wire.ShardAssignment{Kind: req.Kind, Name: req.Name, Shard: req.Shard, NodeID: req.To, Generation: 9})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	src := NewHTTPSourceMulti([]string{srv.URL}, func() string { return "tok" }, nil).(*httpSource)
	req := wire.HandoffRequest{Kind: wire.PlacementStream, TenantID: "t", Namespace: "n", Name: "s", Shard: 1, Generation: 4, From: "a", To: "b"}
	a, err := src.HandOffShard(context.Background(), req)
	if err != nil || a.NodeID != "b" || a.Generation != 9 || a.Shard != 1 {
		t.Fatalf("handoff: %+v %v", a, err)
	}
	req.Generation = 3
	_, err = src.HandOffShard(context.Background(), req)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != "conflict" || we.Retry != wire.RetryFatal || we.Detail["reason"] != "stale_generation" {
		t.Fatalf("refusal: %v", err)
	}
}
