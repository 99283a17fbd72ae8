package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestBenchScenariosRun runs every `felix bench` scenario briefly against a
// real broker so the tool cannot rot. It checks what the scenarios promise
// (no loss under Block with waiting ingress, no errors), never speed.
func TestBenchScenariosRun(t *testing.T) {
	n := startServe(t, "FELIX_PUB_INGRESS_WAIT=true")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// run runs one scenario and returns its figures and parameters.
	run := func(args ...string) (map[string]float64, map[string]any) {
		t.Helper()
		out := n.mustFelix(ctx, append(append([]string{"bench"}, args...), "-o", "json")...)
		var r struct {
			Scenario string         `json:"scenario"`
			Params   map[string]any `json:"params"`
			Figures  []struct {
				Name  string  `json:"name"`
				Value float64 `json:"value"`
			} `json:"figures"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("bench %v: %v in %q", args, err, out)
		}
		f := map[string]float64{}
		for _, x := range r.Figures {
			f[x.Name] = x.Value
		}
		return f, r.Params
	}
	figures := func(args ...string) map[string]float64 {
		t.Helper()
		f, _ := run(args...)
		return f
	}

	if f := figures("quic-raw", "--duration", "1s"); f["received_mb_per_s"] <= 0 {
		t.Errorf("quic-raw moved nothing: %v", f)
	}
	f := figures("pubsub", "--duration", "1s", "--payload", "4096", "--batch", "16", "--policy", "block")
	if f["published"] <= 0 || f["lost"] != 0 || f["delivered"] != f["published"] || f["publish_errors"] != 0 {
		t.Errorf("pubsub under block with waiting ingress: %v; want everything delivered", f)
	}
	f = figures("pubsub", "--duration", "1s", "--payload", "1024", "--acked")
	if f["published"] <= 0 || f["publish_errors"] != 0 {
		t.Errorf("acked pubsub: %v", f)
	}
	f = figures("fanout", "--subscribers", "10", "--rate", "200", "--duration", "1s")
	if f["published"] <= 0 || f["errors"] != 0 || f["delivered"] != 10*f["published"] {
		t.Errorf("fanout to 10: %v; want every subscriber to get every message", f)
	}
	if f := figures("latency", "--count", "200", "--duration", "5s"); f["acked_publish_p50"] <= 0 {
		t.Errorf("latency: %v", f)
	}
	if f := figures("cache", "--duration", "1s", "--inflight", "8"); f["ops_per_s"] <= 0 || f["errors"] != 0 {
		t.Errorf("cache: %v", f)
	}
	f = figures("cache", "--mode", "put", "--duration", "1s", "--inflight", "16")
	if f["puts"] <= 0 || f["errors"] != 0 || f["put_p50"] <= 0 {
		t.Errorf("cache puts: %v", f)
	}
	if f := figures("cache", "--mode", "latency", "--duration", "1s"); f["puts"] <= 0 || f["put_p50"] <= 0 {
		t.Errorf("cache latency: %v", f)
	}
	// The scenario itself fails if the key's counter is not the number of
	// updates applied.
	f = figures("cache", "--mode", "cas", "--duration", "1s", "--callers", "4")
	if f["applied"] <= 0 || f["errors"] != 0 || f["unconfirmed"] != 0 || f["update_p50"] <= 0 {
		t.Errorf("cache cas: %v", f)
	}
	f = figures("durable", "--mode", "acked", "--inflight", "8", "--duration", "1s")
	if f["published"] <= 0 || f["publish_errors"] != 0 || f["delivered"] != f["published"] {
		t.Errorf("durable acked: %v", f)
	}
	// 100 in flight take two producers (64 each at most).
	f = figures("durable", "--mode", "idempotent", "--inflight", "100", "--duration", "1s")
	if f["published"] <= 0 || f["publish_errors"] != 0 || f["delivered"] != f["published"] {
		t.Errorf("durable idempotent: %v", f)
	}
	if f := figures("durable", "--mode", "one-at-a-time", "--duration", "1s"); f["acked_publish_p50"] <= 0 {
		t.Errorf("durable one at a time: %v", f)
	}
	f = figures("group", "--consumers", "1..2", "--records", "300", "--max", "50", "--payload", "256", "--duration", "10s")
	if f["acked_c1"] != 300 || f["acked_c2"] != 300 || f["acked_msgs_per_s"] <= 0 || f["poll_errors"] != 0 || f["ack_errors"] != 0 {
		t.Errorf("group: %v", f)
	}
	f = figures("group", "--mode", "latency", "--rate", "50", "--payload", "64", "--duration", "1s")
	if f["published"] <= 0 || f["lost"] != 0 || f["errors"] != 0 || f["publish_to_handler_p50"] <= 0 {
		t.Errorf("group latency: %v", f)
	}
	if f := figures("subs-idle", "--count", "40", "--connections", "4", "--settle", "100ms"); f["opened"] != 40 {
		t.Errorf("subs-idle: %v", f)
	}
	if f := figures("meta", "--duration", "1s", "--concurrency", "4"); f["created"] <= 0 || f["errors"] != 0 {
		t.Errorf("meta: %v", f)
	}
	// Whether a step keeps up depends on the machine's speed (the
	// publisher must stay within a tenth of the step of its schedule), so
	// the search is checked for consistency, not for where it ends: it ran
	// between one and max-steps steps, judged at least one rate, and the
	// best rate that kept up is below the first that did not.
	f, params := run("fanout", "--max", "--subscribers", "4", "--duration", "300ms", "--max-steps", "3")
	good, bad := f["max_rate"], f["first_failing_rate"]
	if steps, _ := params["steps"].(float64); steps < 1 || steps > 3 ||
		good < 0 || bad < 0 || good+bad == 0 || (bad > 0 && good >= bad) ||
		f["max_deliveries_per_s"] != 4*good {
		t.Errorf("fanout --max: %v, steps %v; want 1 to 3 steps, a judged rate, max_rate below first_failing_rate", f, params["steps"])
	}
}
