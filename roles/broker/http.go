package broker

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/internal/metricdoc"
)

// HTTPHandler serves the broker's plain-HTTP endpoints: /metrics
// (Prometheus text with HELP and TYPE for every family), /live (200 while
// the process runs) and /ready (200 once the first catalog sync finished
// and until the drain starts, 503 otherwise). /live and /ready answer a
// Health body in JSON, the same shape as the control plane's. Everything
// on it is read-only.
//
// /metrics writes this broker's own sets (WriteMetrics), then what the
// process registered globally: the default set (the control plane's
// metrics when it runs in the same process), the sets registered with
// metrics.RegisterSet (each Raft member's) and the Go and process
// metrics, once. The broker's own sets are never registered globally, so
// a second broker in the process shows up only on its own endpoint; the
// SDK keeps its client metrics off the default set, so a server exports
// only its own.
func (s *Server) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		metricdoc.Write(w, func(w io.Writer) {
			s.writeOwnMetrics(w)
			metrics.WritePrometheus(w, true)
		})
	})
	mux.HandleFunc("GET /replication", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, s.repl.report(false))
	})
	mux.HandleFunc("GET /replication/halted", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, s.repl.report(true))
	})
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, _ *http.Request) {
		writeHealth(w, http.StatusOK, Health{Status: HealthOK})
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if reason := s.notReady(); reason != "" {
			writeHealth(w, http.StatusServiceUnavailable, Health{Status: HealthNotReady, Reason: reason})
			return
		}
		writeHealth(w, http.StatusOK, Health{Status: HealthReady})
	})
	return mux
}

// Health is the JSON body of /live and /ready, on the broker and on the
// control plane alike (docs/operations.md).
type Health struct {
	// Status is HealthOK (/live), HealthReady or HealthNotReady (/ready).
	Status string `json:"status"`
	// Reason says why the server is not ready; empty otherwise.
	Reason string `json:"reason,omitempty"`
}

// The values of Health.Status.
const (
	HealthOK       = "ok"
	HealthReady    = "ready"
	HealthNotReady = "not_ready"
)

func writeHealth(w http.ResponseWriter, code int, h Health) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(h)
}

// Ready reports whether the broker should receive traffic: the first
// catalog sync has finished and the drain has not started.
func (s *Server) Ready() bool { return s.notReady() == "" }

// notReady says why the broker should not receive traffic, or "" when it
// should.
func (s *Server) notReady() string {
	if s.drainingF.Load() {
		return "draining: the broker is shutting down"
	}
	select {
	case <-s.synced:
		return ""
	default:
		return "starting: the first catalog sync has not finished"
	}
}

// writeJSON answers 200 with v as JSON, never cached.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}
