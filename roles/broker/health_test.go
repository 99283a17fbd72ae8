package broker

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// health reads a /live or /ready answer: its status code and JSON body.
func health(t *testing.T, h http.Handler, path string) (int, Health) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q", path, ct)
	}
	var body Health
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rec.Code, body
}

// /live and /ready answer JSON, with the reason when not ready: starting
// before the first catalog sync, draining once the shutdown began.
func TestHealthAnswersJSON(t *testing.T) {
	tlsCfg, _ := testTLS(t)
	idle, err := New(testConfig(), Deps{Catalog: &fakeSource{}, TLS: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	code, body := health(t, idle.HTTPHandler(), "/ready")
	if code != 503 || body.Status != HealthNotReady || !strings.HasPrefix(body.Reason, "starting") {
		t.Fatalf("/ready before the first sync: %d %+v", code, body)
	}
	idle.Shutdown(t.Context())

	e := startEnv(t, testConfig())
	h := e.srv.HTTPHandler()
	if code, body := health(t, h, "/live"); code != 200 || body != (Health{Status: HealthOK}) {
		t.Fatalf("/live: %d %+v", code, body)
	}
	if code, body := health(t, h, "/ready"); code != 200 || body != (Health{Status: HealthReady}) {
		t.Fatalf("/ready: %d %+v", code, body)
	}
	if err := e.shutdown(); err != nil {
		t.Fatal(err)
	}
	code, body = health(t, h, "/ready")
	if code != 503 || body.Status != HealthNotReady || !strings.HasPrefix(body.Reason, "draining") {
		t.Fatalf("/ready after shutdown: %d %+v", code, body)
	}
	if code, body := health(t, h, "/live"); code != 200 || body.Status != HealthOK {
		t.Fatalf("/live after shutdown: %d %+v", code, body)
	}
}
