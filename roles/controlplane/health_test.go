package controlplane

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// /ready answers the broker's shape: ready, or not_ready with a reason
// and 503 while the member cannot reach a quorum.
func TestReadyAnswersStatusAndReason(t *testing.T) {
	g := openTestGroup(t, 3)
	svc, err := New(Config{Logger: quietLogger()}, &spreadStore{RaftStore: g.stores[1], members: []*RaftStore{g.stores[1]}})
	must(t, err)
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	ready := func() (int, statusBody) {
		resp, err := http.Get(srv.URL + "/ready")
		must(t, err)
		defer resp.Body.Close()
		var b statusBody
		dec := json.NewDecoder(resp.Body)
		dec.DisallowUnknownFields()
		must(t, dec.Decode(&b))
		return resp.StatusCode, b
	}
	waitFor(t, "ready with a quorum", func() bool {
		code, b := ready()
		return code == 200 && b == statusBody{Status: "ready"}
	})
	g.stop(2)
	g.stop(3)
	waitFor(t, "not ready without a quorum", func() bool {
		code, b := ready()
		return code == 503 && b.Status == "not_ready" && b.Reason != ""
	})
}
