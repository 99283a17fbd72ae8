package broker

import (
	"io"
	"net/http"

	"github.com/VictoriaMetrics/metrics"

	"github.com/felixmq/felix/internal/metricdoc"
)

// HTTPHandler serves the broker's plain-HTTP endpoints: /metrics
// (Prometheus text with HELP and TYPE for every family), /live (200 while the process runs) and /ready (200
// once the first catalog sync finished and until the drain starts, 503
// otherwise). Everything on it is read-only.
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
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if !s.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	return mux
}

// Ready reports whether the broker should receive traffic: the first
// catalog sync has finished and the drain has not started.
func (s *Server) Ready() bool {
	if s.drainingF.Load() {
		return false
	}
	select {
	case <-s.synced:
		return true
	default:
		return false
	}
}
