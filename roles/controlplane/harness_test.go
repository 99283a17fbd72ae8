package controlplane

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/core/auth"
)

// harness is a Service over a temporary bbolt file, served by httptest,
// with a cluster admin token.
type harness struct {
	t     *testing.T
	path  string
	svc   *Service
	srv   *httptest.Server
	admin string
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newHarness(t *testing.T, opts ...testStoreOpt) *harness {
	t.Helper()
	h := &harness{t: t, path: t.TempDir()}
	store := openTestRaft(t, h.path, opts...)
	svc, err := New(Config{Logger: quietLogger()}, store)
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	h.svc = svc
	if _, err := svc.Bootstrap(bg); err != nil {
		t.Fatal(err)
	}
	h.srv = httptest.NewServer(svc.Handler())
	t.Cleanup(func() {
		h.srv.Close()
		h.svc.Close()
	})
	h.admin = h.token("default", "admin", "*:*")
	return h
}

// token mints a one-hour token directly.
func (h *harness) token(tenant, sub string, perms ...string) string {
	h.t.Helper()
	tok, err := h.svc.MintToken(auth.Claims{Subject: sub, TenantID: tenant, Perms: perms, Expiry: time.Now().Add(time.Hour)})
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

// do sends a request; body may be nil, a string (sent raw) or a value
// (sent as JSON). It returns the status and the response body.
func (h *harness) do(method, path, token string, body any) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(out) > 0 && resp.Header.Get("Content-Type") != "application/json" {
		h.t.Fatalf("%s %s: Content-Type %q", method, path, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, out
}

// expect sends a request, checks the status and decodes the body into out
// (when out is not nil).
func (h *harness) expect(want int, method, path, token string, body, out any) {
	h.t.Helper()
	status, raw := h.do(method, path, token, body)
	if status != want {
		h.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, status, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			h.t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
}

// expectError checks status and error code, and that the message contains
// each of the given fragments.
func (h *harness) expectError(status int, code, method, path, token string, body any, fragments ...string) {
	h.t.Helper()
	var e errorBody
	h.expect(status, method, path, token, body, &e)
	if string(e.Error.Code) != code {
		h.t.Fatalf("%s %s: code %q, want %q (%s)", method, path, e.Error.Code, code, e.Error.Message)
	}
	if e.Error.Retry == "" {
		h.t.Fatalf("%s %s: error without retry class", method, path)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Error.Message, f) {
			h.t.Fatalf("%s %s: message %q lacks %q", method, path, e.Error.Message, f)
		}
	}
}
